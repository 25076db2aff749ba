// `salamander federate`: federated learning over local nodes (--clients N,
// each a device emulated at its share of a core) or the nodes of a cluster
// file. The federated job (actors/federated/) runs the rounds; this command
// sets it up, shows a progress line per round, and stops it on SIGINT or
// SIGTERM (the global model of the last round is kept: --checkpoint).
#include "actors/federated/fed_job.hpp"
#include "apps/client_job.hpp"
#include "apps/commands.hpp"
#include "apps/progress.hpp"
#include "apps/runtime_env.hpp"
#include "apps/status_text.hpp"
#include "messages/checkpoint.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace salamander::apps {

namespace {

actors::fed_config config_of(const fed_cli& cli) {
  actors::fed_config cfg;
  cfg.model = cli.model;
  cfg.strategy = cli.strategy;
  cfg.settings.local_epochs = cli.local_epochs;
  cfg.settings.fraction = cli.fraction;
  cfg.settings.min_keep = cli.min_keep;
  cfg.settings.deadline_s = cli.deadline_s;
  cfg.settings.round_timeout_s = cli.round_timeout_s;
  cfg.settings.buffer = static_cast<uint32_t>(cli.buffer);
  cfg.rounds = cli.rounds;
  cfg.time_budget_s = cli.time_budget_s;
  cfg.dataset = cli.dataset;
  cfg.data_dir = cli.data_dir;
  cfg.alpha = cli.alpha;
  cfg.seed = cli.seed;
  cfg.batch_size = cli.batch_size;
  cfg.optimizer = cli.optimizer;
  cfg.lr = cli.lr;
  cfg.momentum = cli.momentum;
  cfg.max_samples = cli.max_samples;
  cfg.test_samples = cli.test_samples;
  cfg.checkpoint_path = cli.checkpoint;
  cfg.resume = cli.resume;
  cfg.threads = cli.threads;
  cfg.metrics_path = metrics_path_of(cli.metrics);
  check_checkpoint_options(cli.checkpoint, cli.resume);
  // the strategy's own checks, before anything starts
  auto s = cfg.settings;
  algorithms::fed::make_strategy(cfg.strategy, s);
  actors::width_layout(models::describe(models::model_spec::parse(cfg.model)));
  return cfg;
}

} // namespace

int run_federate(const fed_cli& cli) {
  auto log = logger("federated");
  set_threads(cli.threads);
  check_blas();
  auto cfg = config_of(cli);
  int64_t shown_round = -1;
  auto result = run_client_job(
      client_options_of(cli), "federated",
      [&](caf::actor_system& sys, const std::string& secret,
          std::vector<actors::remote_node> nodes, const actors::job_options& opts) {
        cfg.secret = secret;
        log->info(
            "federated learning: strategy {}, model {}, {} clients ({}), {} rounds of "
            "{} local epoch(s), {} data{}",
            cfg.strategy, cfg.model, nodes.size(),
            cli.cluster.empty() ? "local nodes, embedded" : cli.cluster, cfg.rounds,
            cfg.settings.local_epochs,
            cfg.alpha > 0 ? fmt::format("dirichlet({})", cfg.alpha) : std::string("iid"),
            cfg.time_budget_s > 0 ? fmt::format(", at most {:.0f} s", cfg.time_budget_s)
                                  : std::string());
        return actors::run_fed_job(sys, cfg, std::move(nodes), opts);
      },
      [&](const job_status& s, progress_line& progress) {
        if (s.round != shown_round && s.round > 0) {
          shown_round = s.round;
          progress.finish();
          log->info(
              "round {}/{}: accuracy {:.2f}%, {:.1f} s, {}/{} clients took part ({}); "
              "{} update(s) dropped so far",
              s.round, s.rounds, 100 * s.test_accuracy, s.round_s, s.contributed,
              s.clients, s.plan, s.dropped_updates);
        }
        progress.update(status_fields(s));
      });
  auto& s = result.status;
  if (s.phase != "finished") {
    log->error("federated job failed: {}", s.error);
    return 1;
  }
  if (!cli.save.empty() && result.weights) {
    messages::checkpoint c;
    c.snapshot = *result.weights;
    c.seed = cli.seed;
    c.epoch = static_cast<uint64_t>(s.round);
    c.note = fmt::format("federated {} after {} rounds", cli.strategy, s.round);
    messages::save_checkpoint(cli.save, c);
    log->info("saved the global model to {}", cli.save);
  }
  log->info("finished{}: {} rounds in {:.1f} s of training, test accuracy {:.2f}%",
            s.stopped.empty() ? "" : " (stopped: " + s.stopped + ")", s.round, s.train_s,
            100 * s.test_accuracy);
  if (!s.metrics_path.empty()) {
    std::printf("metrics: %s\n", s.metrics_path.c_str());
  }
  std::printf("strategy: %s\n", s.strategy.c_str());
  std::printf("rounds: %lld\n", static_cast<long long>(s.round));
  std::printf("train time: %.2f s\n", s.train_s);
  std::printf("dropped updates: %lld\n", static_cast<long long>(s.dropped_updates));
  std::printf("test accuracy: %.4f\n", s.test_accuracy);
  return 0;
}

} // namespace salamander::apps
