// `salamander federate`: federated learning over local nodes (--clients N,
// each a device emulated at its share of a core) or the nodes of a cluster
// file. The federated job (actors/federated/) runs the rounds; this command
// sets it up, shows a progress line per round, and stops it on SIGINT or
// SIGTERM (the global model of the last round is kept: --checkpoint).
#include "actors/federated/fed_job.hpp"
#include "apps/cli_options.hpp"
#include "apps/client_job.hpp"
#include "apps/commands.hpp"
#include "apps/runtime_env.hpp"

#include <fmt/format.h>

namespace salamander::apps {

namespace {

struct fed_cli {
  actors::fed_config job; ///< what the options set, bound straight into it
  client_cli common;
  int buffer = 3; ///< fedbuff: updates per server step (job.settings.buffer)
};

// The job's configuration, checked as far as it can be before anything starts.
actors::fed_config config_of(const fed_cli& cli) {
  auto cfg = with_client_options(cli.job, cli.common);
  cfg.settings.buffer = static_cast<uint32_t>(cli.buffer);
  // the strategy's own checks, before anything starts
  auto s = cfg.settings;
  algorithms::fed::make_strategy(cfg.strategy, s);
  actors::width_layout(models::describe(models::model_spec::parse(cfg.model)));
  return cfg;
}

int run_federate(const fed_cli& cli) {
  auto log = logger("federated");
  set_threads(cli.common.clients.threads);
  check_blas();
  auto cfg = config_of(cli);
  auto result = run_client_job(
      client_options_of(cli.common, cfg.metrics_path), "federated",
      [&](caf::actor_system& sys, const std::string& secret,
          std::vector<actors::remote_node> nodes, const actors::job_options& opts) {
        cfg.secret = secret;
        log->info(
            "federated learning: strategy {}, model {}, {} clients ({}), {} rounds of "
            "{} local epoch(s), {} data{}",
            cfg.strategy, cfg.model, nodes.size(), where_clients_run(cli.common),
            cfg.rounds, cfg.settings.local_epochs, data_split_text(cfg),
            cfg.time_budget_s > 0 ? fmt::format(", at most {:.0f} s", cfg.time_budget_s)
                                  : std::string());
        return actors::run_fed_job(sys, cfg, std::move(nodes), opts);
      },
      [&](const job_status& s) {
        log->info(
            "round {}/{}: accuracy {:.2f}%, {:.1f} s, {}/{} clients took part ({}); "
            "{} update(s) dropped so far",
            s.rounds.round, s.rounds.total, 100 * s.test_accuracy, s.rounds.round_s,
            s.rounds.contributed, s.rounds.clients, s.plan, s.rounds.dropped_updates);
      });
  auto& s = result.status;
  if (s.phase != status_phase::finished) {
    log->error("federated job failed: {}", s.error);
    return 1;
  }
  if (save_final_model(
          cli.common.save, result, cfg.seed,
          fmt::format("federated {} after {} rounds", cfg.strategy, s.rounds.round))) {
    log->info("saved the global model to {}", cli.common.save);
  }
  log->info("finished{}: {} rounds in {:.1f} s of training, test accuracy {:.2f}%",
            s.stopped.empty() ? "" : " (stopped: " + s.stopped + ")", s.rounds.round,
            s.train_s, 100 * s.test_accuracy);
  if (!s.metrics_path.empty()) {
    std::printf("metrics: %s\n", s.metrics_path.c_str());
  }
  std::printf("strategy: %s\n", s.rounds.strategy.c_str());
  std::printf("rounds: %lld\n", static_cast<long long>(s.rounds.round));
  std::printf("train time: %.2f s\n", s.train_s);
  std::printf("dropped updates: %lld\n",
              static_cast<long long>(s.rounds.dropped_updates));
  std::printf("test accuracy: %.4f\n", s.test_accuracy);
  return 0;
}

} // namespace

command add_federate(CLI::App& app) {
  auto cli = std::make_shared<fed_cli>();
  auto& job = cli->job;
  auto* sub = app.add_subcommand(
      "federate",
      "federated learning: every node trains on its own data and a strategy merges "
      "their updates (fedavg, deadline, elfish, heterofl, fedrolex, fedbuff)");
  sub->add_option("--strategy", job.strategy,
                  "fedavg (wait for all), deadline (drop late updates), elfish "
                  "(stragglers soft-train a rotating part of each layer), heterofl, "
                  "fedrolex, fedbuff (asynchronous)")
      ->capture_default_str();
  sub->add_option("--rounds", job.rounds, "rounds at most (fedbuff: server steps)")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  sub->add_option("--local-epochs", job.settings.local_epochs,
                  "epochs each client trains per round")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  add_alpha(*sub, job);
  add_client_places(*sub, cli->common.clients,
                    "embedded: EMULATED relative speed of each client, e.g. "
                    "1,1,1,1,1,1,1,0.1,0.1,0.1 (scaled to fit this host's cores)");
  add_time_budget(*sub, job);
  add_fraction_fit(*sub, job);
  add_clients_per_node(*sub, job);
  sub->add_option("--fraction", job.settings.fraction,
                  "of the clients, the part drawn for each round")
      ->check(number(0, 1, true, ""))
      ->capture_default_str();
  sub->add_option("--deadline", job.settings.deadline_s,
                  "deadline strategy: seconds per round (0: 1.25 x the median client's "
                  "round)")
      ->check(number(0, 1e6, false, "seconds"))
      ->capture_default_str();
  sub->add_option("--round-timeout", job.settings.round_timeout_s,
                  "no round waits longer (0: 3 x the slowest predicted client + 30 s)")
      ->check(number(0, 1e6, false, "seconds"))
      ->capture_default_str();
  sub->add_option("--buffer", cli->buffer, "fedbuff: updates per server step")
      ->check(whole<int>(1))
      ->capture_default_str();
  sub->add_option_function<std::string>(
         "--aggregation",
         [&job](const std::string& a) {
           job.settings.weighting = algorithms::fed::parse_aggregation(a);
         },
         "how a round's updates are weighted: own (the strategy's), kept (each element "
         "over the clients that trained it, samples x kept fraction: ELFISH's), samples "
         "(over those clients, by samples), naive (over every client, a masked element "
         "counted as unchanged)")
      ->check(CLI::IsMember({"own", "kept", "samples", "naive"}))
      ->default_str("own");
  sub->add_option(
         "--restricted-softmax", job.restricted_softmax,
         "FedRS: in local training, scale the logits of the classes a client's "
         "shard lacks by this (0 to 1), so that clients that never see a class do "
         "not outvote the ones that hold it (label-skewed shards, --classes-apart); "
         "1: plain softmax")
      ->check(number(0, 1, false, ""))
      ->capture_default_str();
  sub->add_option("--min-keep", job.settings.min_keep,
                  "the smallest part of each layer a straggler trains (elfish, heterofl, "
                  "fedrolex)")
      ->check(number(0, 1, true, ""))
      ->capture_default_str();
  sub->add_flag_callback(
      "--no-partial-work", [&job] { job.settings.partial_work = false; },
      "a straggler trains every batch of its round even when its narrowest part "
      "(--min-keep) is predicted past the pace (elfish, heterofl, fedrolex; the "
      "default trains the part of its batches that fits the pace)");
  add_client_training(*sub, job, cli->common,
                      {"mlp or cnn (dense and conv layers can be sliced)",
                       "initial weights, shards, masks", "local batch size",
                       "sgd or adam (fresh each round)", "local learning rate",
                       "write the global model and its round here after every round",
                       "write the final global model here (a checkpoint)"});
  return {sub, [cli] { return run_federate(*cli); }};
}

} // namespace salamander::apps
