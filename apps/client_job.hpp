// What `salamander federate` and `salamander split` share: one client per
// node, on local nodes of this process (--clients N, each device emulated at
// its share of a core) or on the node processes of a cluster file; the
// supervisor published with --listen; SIGINT and SIGTERM stop the job after
// its last whole round.
#pragma once

#include "actors/job/runner.hpp"
#include "apps/cli_options.hpp"
#include "apps/commands.hpp"
#include "apps/progress.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>

#include "apps/dashboard/dashboard_cli.hpp"

#include <functional>
#include <tuple>
#include <utility>
#include <string>
#include <vector>

namespace salamander::apps {

/// The options every client job takes.
struct client_job_options {
  int clients = 0;           ///< embedded: this many local nodes
  std::string client_shares; ///< embedded: relative speeds, e.g. 1,1,0.1 (EMULATED)
  std::string cluster;       ///< or the nodes of a cluster file
  std::string secret_file;
  std::string tls;
  std::string listen;
  int threads = 1;
  double hang_timeout_s = 3.0;
  bool fetch_weights = false;
  dashboard_cli dashboard;  ///< --dashboard: the live page
  std::string metrics_path; ///< the run's log (the dashboard's checkpoints go beside it)
};

/// --checkpoint and --resume: resuming needs an existing file, and a new
/// run never overwrites one. Throws std::invalid_argument saying what to do.
void check_checkpoint_options(const std::string& checkpoint, bool resume);

/// "1,1,0.1" -> {1, 1, 0.1}; throws std::invalid_argument naming the entry.
std::vector<double> parse_shares(const std::string& text);

/// What the commands of client jobs take besides their job's own settings.
struct client_cli {
  client_job_options clients;
  std::string metrics; ///< "": runs/job-.../metrics.jsonl; none: off
  std::string save;    ///< the final model, as a checkpoint
};

/// The client-job options of a command: its clients and, with --save, the
/// final weights fetched.
inline client_job_options client_options_of(const client_cli& cli) {
  auto o = cli.clients;
  o.fetch_weights = !cli.save.empty();
  return o;
}

/// For the log: "local nodes, embedded" or the cluster file.
inline std::string where_clients_run(const client_cli& cli) {
  return cli.clients.cluster.empty() ? "local nodes, embedded" : cli.clients.cluster;
}

// ---- the options federate and split share, bound into their job's
// configuration (actors::fed_config, actors::split_config: the same names)

/// --clients N, --client-shares (its help: `shares_help`), --cluster FILE.
void add_client_places(CLI::App& sub, client_job_options& o,
                       const std::string& shares_help);

/// --alpha A (Dirichlet label skew, A > 0) or --iid: shards with every
/// label in proportion. `--alpha 0` is refused with the hint: a Dirichlet
/// of 0 is no distribution, and reading it as IID would change the request.
template <class Config> void add_alpha(CLI::App& sub, Config& job) {
  auto* alpha =
      sub.add_option("--alpha", job.alpha, "Dirichlet(alpha) label skew of the clients' shards")
          ->check(CLI::Validator(
              [](std::string& text) -> std::string {
                try {
                  if (std::stod(text) == 0) {
                    return "Dirichlet's alpha must be more than 0; for IID shards give --iid";
                  }
                } catch (const std::exception&) {
                }
                return "";
              },
              "", "alpha"))
          ->check(number(0, 1e6, true, ""))
          ->capture_default_str();
  sub.add_flag_callback(
         "--iid", [&job] { job.alpha = 0; },
         "IID shards: every client gets the labels in proportion (instead of --alpha)")
      ->excludes(alpha);
  sub.add_option(
         "--classes-apart", job.classes_apart,
         "the last N clients hold classes no other client holds (their share of the "
         "classes, split among them by --alpha, the other classes among the rest): "
         "leaving those clients out loses whole classes; 0: off")
      ->check(CLI::Range(int64_t{0}, int64_t{1 << 20}))
      ->capture_default_str();
}

/// How the data is split over the clients, for the job's first log line.
template <class Config> std::string data_split_text(const Config& cfg) {
  auto split =
      cfg.alpha > 0 ? fmt::format("dirichlet({})", cfg.alpha) : std::string("iid");
  return cfg.classes_apart > 0 ? fmt::format("{}, the last {} clients' classes apart",
                                             split, cfg.classes_apart)
                               : split;
}

template <class Config> void add_fraction_fit(CLI::App& sub, Config& job) {
  sub.add_option("--fraction-fit", job.fraction_fit,
                 "fraction of the available clients sampled for each round (FedAvg's C, "
                 "Flower's fraction_fit), at least one client; 1: every client")
      ->check(number(0, 1, true, ""))
      ->capture_default_str();
}

/// "0.2:0.1" -> {0.2, 0.1}: a fraction in [0, 1] and a speed in (0, 1];
/// throws std::invalid_argument saying what is wrong.
std::pair<double, double> parse_stragglers(const std::string& text);

template <class Config> void add_clients_per_node(CLI::App& sub, Config& job) {
  sub.add_option("--clients-per-node", job.clients_per_node,
                 "virtual clients: this many on each node, each with its own shard (the "
                 "data is split over nodes x this many)")
      ->check(whole<int>(1))
      ->capture_default_str();
  sub.add_option_function<std::string>(
      "--stragglers",
      [&job](const std::string& text) {
        try {
          std::tie(job.straggler_fraction, job.straggler_speed) = parse_stragglers(text);
        } catch (const std::invalid_argument& e) {
          throw CLI::ValidationError("--stragglers", e.what());
        }
      },
      "FRACTION:SPEED: that part of the clients, drawn with --seed, runs at SPEED of its "
      "node's speed, EMULATED, e.g. 0.2:0.1 (a fifth of them 10x slower); default: none");
}

template <class Config> void add_time_budget(CLI::App& sub, Config& job) {
  sub.add_option("--time-budget", job.time_budget_s,
                 "stop after this many seconds of training (0: only --rounds)")
      ->check(number(0, 1e7, false, "seconds"))
      ->capture_default_str();
}

/// What the training options of a client job say where the commands differ.
struct client_training_help {
  std::string model, seed, batch_size, optimizer, lr, checkpoint, save;
};

/// --metrics, --listen, --secret-file, --tls, --dashboard, --threads,
/// --hang-timeout.
void add_client_job_options(CLI::App& sub, client_cli& cli);

/// --model ... --save, then add_client_job_options.
template <class Config>
void add_client_training(CLI::App& sub, Config& job, client_cli& cli,
                         const client_training_help& help) {
  sub.add_option("--model", job.model, help.model)->capture_default_str();
  add_dataset(sub, job.dataset);
  add_data_dir(sub, job.data_dir,
               "directory with the Fashion-MNIST IDX files (the supervisor's test split; "
               "embedded clients' training split)");
  sub.add_option("--seed", job.seed, help.seed)->capture_default_str();
  sub.add_option("--batch-size", job.batch_size, help.batch_size)
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  sub.add_option("--optimizer", job.optimizer, help.optimizer)->capture_default_str();
  sub.add_option("--lr", job.lr, help.lr)
      ->check(number(0, 10, true, ""))
      ->capture_default_str();
  sub.add_option("--momentum", job.momentum, "sgd momentum")->capture_default_str();
  sub.add_option("--max-samples", job.max_samples,
                 "each client trains on at most this many of its examples (0: all)")
      ->check(whole<int64_t>(0))
      ->capture_default_str();
  sub.add_option("--test-samples", job.test_samples,
                 "evaluate on this many test examples (0: the whole test split)")
      ->check(whole<int64_t>(0))
      ->capture_default_str();
  sub.add_option("--checkpoint", job.checkpoint_path, help.checkpoint);
  sub.add_flag("--resume", job.resume, "carry on from --checkpoint");
  sub.add_option("--save", cli.save, help.save);
  add_client_job_options(sub, cli);
}

/// `job` with what the command's other options set (threads, metrics log),
/// its --checkpoint and --resume checked.
/// The client-job options of a command whose job logs to `metrics_path`.
inline client_job_options client_options_of(const client_cli& cli,
                                            const std::string& metrics_path) {
  auto o = client_options_of(cli);
  o.metrics_path = metrics_path;
  return o;
}

template <class Config> Config with_client_options(Config job, const client_cli& cli) {
  job.threads = cli.clients.threads;
  job.metrics_path = metrics_path_of(cli.metrics);
  check_checkpoint_options(job.checkpoint_path, job.resume);
  return job;
}

/// Runs a job over the clients `o` names. `run` starts it (with the cluster
/// secret, the nodes, and the options to pass on); `on_round` sees the status
/// once per round finished (a progress line shows the others). Throws
/// std::invalid_argument for options that do not fit together, before
/// anything starts.
actors::job_result run_client_job(
    const client_job_options& o, const std::string& subsystem,
    const std::function<actors::job_result(caf::actor_system&, const std::string& secret,
                                           std::vector<actors::remote_node>,
                                           const actors::job_options&)>& run,
    const std::function<void(const job_status&)>& on_round);

/// --save `path`: the job's final weights as a checkpoint (its epoch the
/// rounds done); false when there is no path or no weights.
bool save_final_model(const std::string& path, const actors::job_result& result,
                      uint64_t seed, const std::string& note);

} // namespace salamander::apps
