// `salamander split`: split learning over local nodes (--clients N, each a
// device emulated at its share of a core) or the nodes of a cluster file,
// with the server beside the supervisor. The split job (actors/split/) runs
// the rounds; this command sets it up, shows a line per round with what has
// crossed the cut, and stops it on SIGINT or SIGTERM (the state after the
// last whole round is kept: --checkpoint).
#include "actors/split/split_job.hpp"
#include "apps/cli_options.hpp"
#include "apps/client_job.hpp"
#include "apps/commands.hpp"
#include "apps/runtime_env.hpp"
#include "models/model_desc.hpp"

#include <fmt/format.h>

namespace salamander::apps {

namespace {

struct split_cli {
  actors::split_config job; ///< what the options set, bound straight into it
  client_cli common;
  bool own_models = false;   ///< adasplit: never average the client-side models
  double budget_mb = 1000;   ///< C3-style score: bytes budget (MB)
  double budget_gflop = 1e4; ///< and client compute budget (GFLOP)
};

// The job's configuration, checked as far as it can be before anything starts.
actors::split_config config_of(const split_cli& cli) {
  auto cfg = with_client_options(cli.job, cli.common);
  cfg.average_clients = !cli.own_models;
  cfg.budget.bytes = cli.budget_mb * 1e6;
  cfg.budget.client_flops = cli.budget_gflop * 1e9;
  // what can be checked before anything starts
  split::parse_method(cfg.method);
  actors::check_cut(models::describe(models::model_spec::parse(cfg.model)), cfg.cut);
  return cfg;
}

int run_split(const split_cli& cli) {
  auto log = logger("split");
  set_threads(cli.common.clients.threads);
  check_blas();
  auto cfg = config_of(cli);
  auto desc = models::describe(models::model_spec::parse(cfg.model));
  auto costs = actors::costs_of(desc, static_cast<size_t>(cfg.cut));
  auto result = run_client_job(
      client_options_of(cli.common, cfg.metrics_path), "split",
      [&](caf::actor_system& sys, const std::string& secret,
          std::vector<actors::remote_node> nodes, const actors::job_options& opts) {
        cfg.secret = secret;
        log->info(
            "split learning: {}, model {} cut before {} ({} per example across the "
            "cut), {} clients ({}), {} rounds, {} data{}",
            cfg.method, cfg.model, desc.layers[static_cast<size_t>(cfg.cut)].name,
            models::format_bytes(static_cast<double>(costs.activation_bytes)),
            nodes.size(), where_clients_run(cli.common), cfg.rounds, data_split_text(cfg),
            cfg.method == "adasplit"
                ? fmt::format("; local phase {} of {} rounds, {:.0f}% of the clients "
                              "send per iteration after it",
                              split::local_rounds(cfg.rounds, cfg.local_fraction),
                              cfg.rounds, 100 * cfg.client_fraction)
                : std::string());
        return actors::run_split_job(sys, cfg, std::move(nodes), opts);
      },
      [&](const job_status& s) {
        log->info(
            "round {}/{}{}: accuracy {:.2f}%, {:.1f} s, {} up, {} down, {:.2f} GFLOP "
            "on clients so far ({})",
            s.rounds.round, s.rounds.total,
            s.rounds.split_phase == adasplit_phase::none ? "" : " (" + to_string(s.rounds.split_phase) + ")",
            100 * s.test_accuracy, s.rounds.round_s,
            models::format_bytes(static_cast<double>(s.rounds.bytes_up)),
            models::format_bytes(static_cast<double>(s.rounds.bytes_down)),
            s.rounds.client_flops / 1e9, s.plan);
      });
  auto& s = result.status;
  if (s.phase != status_phase::finished) {
    log->error("split job failed: {}", s.error);
    return 1;
  }
  if (save_final_model(cli.common.save, result, cfg.seed,
                       fmt::format("split {} cut {} after {} rounds", cfg.method, cfg.cut,
                                   s.rounds.round))) {
    log->info("saved the model (client 0's side and the server's) to {}",
              cli.common.save);
  }
  auto c3 = actors::c3_of(s, cfg.budget);
  log->info(
      "finished{}: {} rounds in {:.1f} s of training, test accuracy {:.2f}%, {} across "
      "the cut, C3-style score {:.4f} (budgets {} and {:.0f} GFLOP)",
      s.stopped.empty() ? "" : " (stopped: " + s.stopped + ")", s.rounds.round, s.train_s,
      100 * s.test_accuracy,
      models::format_bytes(static_cast<double>(s.rounds.bytes_up + s.rounds.bytes_down)),
      c3, models::format_bytes(cfg.budget.bytes), cfg.budget.client_flops / 1e9);
  if (!s.metrics_path.empty()) {
    std::printf("metrics: %s\n", s.metrics_path.c_str());
  }
  std::printf("method: %s\n", s.rounds.strategy.c_str());
  std::printf("rounds: %lld\n", static_cast<long long>(s.rounds.round));
  std::printf("train time: %.2f s\n", s.train_s);
  std::printf("bytes up: %lld\n", static_cast<long long>(s.rounds.bytes_up));
  std::printf("bytes down: %lld\n", static_cast<long long>(s.rounds.bytes_down));
  std::printf("client gflop: %.3f\n", s.rounds.client_flops / 1e9);
  std::printf("server gflop: %.3f\n", s.rounds.server_flops / 1e9);
  std::printf("c3 score: %.4f\n", c3);
  std::printf("test accuracy: %.4f\n", s.test_accuracy);
  return 0;
}

} // namespace

command add_split(CLI::App& app) {
  auto cli = std::make_shared<split_cli>();
  auto& job = cli->job;
  auto* sub = app.add_subcommand(
      "split",
      "split learning: clients hold the layers before a cut and their own data, the "
      "server the layers after it (vanilla, splitfed, adasplit)");
  sub->add_option("--method", job.method,
                  "vanilla (clients take turns, gradients back every batch), splitfed "
                  "(SplitFed v2: parallel clients, one server model, client models "
                  "averaged), adasplit (local loss, then sparse sends, no gradients "
                  "back, a server mask per client)")
      ->capture_default_str();
  sub->add_option("--cut", job.cut,
                  "clients hold layers [0, CUT) of the model, the server the rest "
                  "(`salamander describe MODEL` lists them)")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  sub->add_option("--rounds", job.rounds, "rounds: one local epoch per client each")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  add_client_places(*sub, cli->common.clients,
                    "embedded: EMULATED relative speed of each client, e.g. "
                    "1,1,0.5,0.5,0.25");
  add_alpha(*sub, job);
  add_time_budget(*sub, job);
  add_fraction_fit(*sub, job);
  add_clients_per_node(*sub, job);
  sub->add_option("--local-fraction", job.local_fraction,
                  "adasplit: the share of the rounds in the local phase (nothing sent)")
      ->check(number(0, 1, false, ""))
      ->capture_default_str();
  sub->add_option(
         "--client-fraction", job.client_fraction,
         "adasplit: the share of the clients the orchestrator picks to send, per "
         "iteration of the global phase")
      ->check(number(0, 1, true, ""))
      ->capture_default_str();
  sub->add_option(
         "--explore", job.explore,
         "adasplit: the orchestrator's exploration weight (0: highest loss only)")
      ->check(number(0, 100, false, ""))
      ->capture_default_str();
  sub->add_option("--send-floor", job.send_floor,
                  "adasplit: every client sends at least this share of its fair part "
                  "(client fraction x its batches) each round, so every client's server "
                  "mask trains; 0: the orchestrator's bandit alone")
      ->check(number(0, 1, false, ""))
      ->capture_default_str();
  sub->add_option("--mask-lr", job.mask_lr, "adasplit: learning rate of the server masks")
      ->check(number(0, 100, false, ""))
      ->capture_default_str();
  sub->add_option("--mask-l1", job.mask_l1,
                  "adasplit: L1 pull of the server masks towards 0, per element and step")
      ->check(number(0, 100, false, ""))
      ->capture_default_str();
  sub->add_option(
         "--mask-keep", job.mask_keep,
         "adasplit: each client's server mask keeps this share of every server "
         "tensor, the parameters its own data scores highest (a sparsity target; "
         "--mask-l1 then does nothing); 1: a score above 1/2 keeps a parameter")
      ->check(number(0, 1, true, ""))
      ->capture_default_str();
  sub->add_flag("--own-models", cli->own_models,
                "adasplit: each client keeps its own client-side model (never averaged; "
                "by default they are averaged after each global-phase round)");
  sub->add_option(
         "--budget-mb", cli->budget_mb,
         "C3-style score: the bytes budget (each budget's worth halves the score)")
      ->check(number(0, 1e12, true, "MB"))
      ->capture_default_str();
  sub->add_option("--budget-gflop", cli->budget_gflop,
                  "C3-style score: the client compute budget")
      ->check(number(0, 1e15, true, "GFLOP"))
      ->capture_default_str();
  sub->add_option("--stall", job.stall_s,
                  "a client silent this many seconds in its round is out of it (hung)")
      ->check(number(0, 1e6, true, "seconds"))
      ->capture_default_str();
  add_client_training(*sub, job, cli->common,
                      {model_help, "initial weights, shards, example order",
                       "client batch size", "sgd or adam",
                       "learning rate (clients and server)",
                       "write the server, every client-side model and the counters here "
                       "after every round",
                       "write the final model (client 0's side and the server's) here"});
  return {sub, [cli] { return run_split(*cli); }};
}

} // namespace salamander::apps
