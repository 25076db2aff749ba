// `salamander split`: split learning over local nodes (--clients N, each a
// device emulated at its share of a core) or the nodes of a cluster file,
// with the server beside the supervisor. The split job (actors/split/) runs
// the rounds; this command sets it up, shows a line per round with what has
// crossed the cut, and stops it on SIGINT or SIGTERM (the state after the
// last whole round is kept: --checkpoint).
#include "actors/split/split_job.hpp"
#include "apps/client_job.hpp"
#include "apps/commands.hpp"
#include "apps/runtime_env.hpp"
#include "apps/status_text.hpp"
#include "messages/checkpoint.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace salamander::apps {

namespace {

actors::split_config config_of(const split_cli& cli) {
  actors::split_config cfg;
  cfg.model = cli.model;
  cfg.method = cli.method;
  cfg.cut = cli.cut;
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
  cfg.local_fraction = cli.local_fraction;
  cfg.client_fraction = cli.client_fraction;
  cfg.explore = cli.explore;
  cfg.mask_lr = cli.mask_lr;
  cfg.mask_l1 = cli.mask_l1;
  cfg.average_clients = !cli.own_models;
  cfg.budget.bytes = cli.budget_mb * 1e6;
  cfg.budget.client_flops = cli.budget_gflop * 1e9;
  cfg.stall_s = cli.stall_s;
  cfg.checkpoint_path = cli.checkpoint;
  cfg.resume = cli.resume;
  cfg.threads = cli.threads;
  cfg.metrics_path = metrics_path_of(cli.metrics);
  check_checkpoint_options(cli.checkpoint, cli.resume);
  // what can be checked before anything starts
  split::parse_method(cfg.method);
  actors::check_cut(models::describe(models::model_spec::parse(cfg.model)), cfg.cut);
  return cfg;
}

} // namespace

int run_split(const split_cli& cli) {
  auto log = logger("split");
  set_threads(cli.threads);
  check_blas();
  auto cfg = config_of(cli);
  auto desc = models::describe(models::model_spec::parse(cfg.model));
  auto costs = actors::costs_of(desc, static_cast<size_t>(cfg.cut));
  int64_t shown_round = -1;
  auto result = run_client_job(
      client_options_of(cli), "split",
      [&](caf::actor_system& sys, const std::string& secret,
          std::vector<actors::remote_node> nodes, const actors::job_options& opts) {
        cfg.secret = secret;
        log->info(
            "split learning: {}, model {} cut before {} ({} per example across the "
            "cut), {} clients ({}), {} rounds, {} data{}",
            cfg.method, cfg.model, desc.layers[static_cast<size_t>(cfg.cut)].name,
            models::format_bytes(static_cast<double>(costs.activation_bytes)),
            nodes.size(), cli.cluster.empty() ? "local nodes, embedded" : cli.cluster,
            cfg.rounds,
            cfg.alpha > 0 ? fmt::format("dirichlet({})", cfg.alpha) : std::string("iid"),
            cfg.method == "adasplit"
                ? fmt::format("; local phase {} of {} rounds, {:.0f}% of the clients "
                              "send per iteration after it",
                              split::local_rounds(cfg.rounds, cfg.local_fraction),
                              cfg.rounds, 100 * cfg.client_fraction)
                : std::string());
        return actors::run_split_job(sys, cfg, std::move(nodes), opts);
      },
      [&](const job_status& s, progress_line& progress) {
        if (s.round != shown_round && s.round > 0) {
          shown_round = s.round;
          progress.finish();
          log->info(
              "round {}/{}{}: accuracy {:.2f}%, {:.1f} s, {} up, {} down, {:.2f} GFLOP "
              "on clients so far ({})",
              s.round, s.rounds, s.split_phase.empty() ? "" : " (" + s.split_phase + ")",
              100 * s.test_accuracy, s.round_s,
              models::format_bytes(static_cast<double>(s.bytes_up)),
              models::format_bytes(static_cast<double>(s.bytes_down)),
              s.client_flops / 1e9, s.plan);
        }
        progress.update(status_fields(s));
      });
  auto& s = result.status;
  if (s.phase != "finished") {
    log->error("split job failed: {}", s.error);
    return 1;
  }
  if (!cli.save.empty() && result.weights) {
    messages::checkpoint c;
    c.snapshot = *result.weights;
    c.seed = cli.seed;
    c.epoch = static_cast<uint64_t>(s.round);
    c.note = fmt::format("split {} cut {} after {} rounds", cli.method, cli.cut, s.round);
    messages::save_checkpoint(cli.save, c);
    log->info("saved the model (client 0's side and the server's) to {}", cli.save);
  }
  auto c3 = actors::c3_of(s, cfg.budget);
  log->info(
      "finished{}: {} rounds in {:.1f} s of training, test accuracy {:.2f}%, {} across "
      "the cut, C3-style score {:.4f} (budgets {} and {:.0f} GFLOP)",
      s.stopped.empty() ? "" : " (stopped: " + s.stopped + ")", s.round, s.train_s,
      100 * s.test_accuracy,
      models::format_bytes(static_cast<double>(s.bytes_up + s.bytes_down)), c3,
      models::format_bytes(cfg.budget.bytes), cfg.budget.client_flops / 1e9);
  if (!s.metrics_path.empty()) {
    std::printf("metrics: %s\n", s.metrics_path.c_str());
  }
  std::printf("method: %s\n", s.strategy.c_str());
  std::printf("rounds: %lld\n", static_cast<long long>(s.round));
  std::printf("train time: %.2f s\n", s.train_s);
  std::printf("bytes up: %lld\n", static_cast<long long>(s.bytes_up));
  std::printf("bytes down: %lld\n", static_cast<long long>(s.bytes_down));
  std::printf("client gflop: %.3f\n", s.client_flops / 1e9);
  std::printf("server gflop: %.3f\n", s.server_flops / 1e9);
  std::printf("c3 score: %.4f\n", c3);
  std::printf("test accuracy: %.4f\n", s.test_accuracy);
  return 0;
}

} // namespace salamander::apps
