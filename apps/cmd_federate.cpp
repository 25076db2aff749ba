// `salamander federate`: federated learning over local nodes (--clients N,
// each a device emulated at its share of a core) or the nodes of a cluster
// file. The federated job (actors/federated/) runs the rounds; this command
// sets it up, shows a progress line per round, and stops it on SIGINT or
// SIGTERM (the global model of the last round is kept: --checkpoint).
#include "actors/cluster/auth.hpp"
#include "actors/cluster/cluster_file.hpp"
#include "actors/federated/fed_job.hpp"
#include "actors/node/system.hpp"
#include "apps/commands.hpp"
#include "apps/progress.hpp"
#include "apps/runtime_env.hpp"
#include "apps/status_text.hpp"
#include "messages/checkpoint.hpp"

#include <caf/io/middleman.hpp>
#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>

namespace salamander::apps {

namespace {

// "1,1,0.1" -> {1, 1, 0.1}; throws std::invalid_argument naming the entry.
std::vector<double> parse_shares(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      double v = std::stod(item, &used);
      if (used != item.size() || !(v > 0) || v > 1000) {
        throw std::invalid_argument("");
      }
      out.push_back(v);
    } catch (const std::exception&) {
      throw std::invalid_argument("--client-shares: '" + item +
                                  "' is not a positive speed (e.g. 1,1,0.1)");
    }
  }
  return out;
}

// Embedded emulation: one share of a core per client. The shares are
// relative speeds; scaled down, when they add up to more than this host
// has, so that the fast clients are not slowed by each other instead of by
// their share.
std::vector<actors::emulation_config> emulated_clients(const fed_cli& cli) {
  std::vector<actors::emulation_config> out;
  if (cli.client_shares.empty()) {
    return out;
  }
  auto shares = parse_shares(cli.client_shares);
  if (static_cast<int>(shares.size()) != cli.clients) {
    throw std::invalid_argument("--client-shares lists " + std::to_string(shares.size()) +
                                " speeds for " + std::to_string(cli.clients) +
                                " clients (--clients)");
  }
  double sum = 0, top = 0;
  for (auto s : shares) {
    sum += s;
    top = std::max(top, s);
  }
  double cores = std::max(1u, std::thread::hardware_concurrency());
  // at most 90% of the host, and no client above one core
  double scale = std::min(0.9 * cores / sum, 1.0 / top);
  auto log = logger("federated");
  for (size_t i = 0; i < shares.size(); ++i) {
    actors::emulation_config c;
    c.cpu_share = std::min(1.0, shares[i] * scale);
    out.push_back(c);
  }
  log->info("EMULATED clients: relative speeds {} run at {:.3f} x those shares of one core "
            "each ({} host cores)",
            cli.client_shares, scale, cores);
  return out;
}

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
  cfg.metrics_path = cli.metrics == "none" ? ""
                     : cli.metrics.empty() ? default_metrics_path()
                                           : cli.metrics;
  if (cli.resume && cli.checkpoint.empty()) {
    throw std::invalid_argument("--resume needs --checkpoint FILE (the file to resume from)");
  }
  if (cli.resume && !std::filesystem::exists(cli.checkpoint)) {
    throw std::invalid_argument("--resume: " + cli.checkpoint + " does not exist");
  }
  if (!cli.resume && !cli.checkpoint.empty() && std::filesystem::exists(cli.checkpoint)) {
    throw std::invalid_argument("--checkpoint " + cli.checkpoint +
                                " exists: --resume to carry on from it, or remove it");
  }
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
  if (cli.clients <= 0 && cli.cluster.empty()) {
    throw std::invalid_argument("say where the clients run: --clients N (N local nodes, one "
                                "process) or --cluster FILE (node processes)");
  }
  if (cli.clients > 0 && !cli.cluster.empty()) {
    throw std::invalid_argument("--clients and --cluster exclude each other");
  }
  if (!cli.cluster.empty() && !cli.client_shares.empty()) {
    throw std::invalid_argument("--client-shares emulates local clients; node processes "
                                "take --cpu-share each");
  }
  auto cfg = config_of(cli);
  std::vector<actors::cluster_node> listed;
  if (!cli.cluster.empty()) {
    listed = actors::read_cluster_file(cli.cluster);
    if (auto secret = actors::load_secret(cli.secret_file)) {
      cfg.secret = *secret;
    }
  }
  auto emulation = emulated_clients(cli);
  caf::actor_system_config sys_cfg;
  actors::system_options sopts;
  sopts.connection_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(cli.hang_timeout_s * 1000));
  actors::configure(sys_cfg, sopts);
  caf::actor_system sys{sys_cfg};
  std::vector<actors::remote_node> nodes;
  if (cli.cluster.empty()) {
    nodes = actors::local_nodes(sys, cli.clients, cli.threads, emulation);
  } else {
    auto connected = actors::connect_nodes(sys, listed);
    if (!connected) {
      throw std::runtime_error(sys.render(connected.error()));
    }
    nodes = std::move(*connected);
  }
  log->info("federated learning: strategy {}, model {}, {} clients ({}), {} rounds of {} "
            "local epoch(s), {} data{}",
            cfg.strategy, cfg.model, nodes.size(),
            cli.cluster.empty() ? "local nodes, embedded" : cli.cluster, cfg.rounds,
            cfg.settings.local_epochs,
            cfg.alpha > 0 ? fmt::format("dirichlet({})", cfg.alpha) : std::string("iid"),
            cfg.time_budget_s > 0 ? fmt::format(", at most {:.0f} s", cfg.time_budget_s)
                                  : std::string());
  auto handles = nodes;
  watch_stop_signals();
  std::mutex cluster_mutex;
  cluster_actor cluster;
  std::thread watcher([&] {
    int sig = next_stop_signal();
    std::lock_guard<std::mutex> guard(cluster_mutex);
    if (sig > 0 && cluster) {
      log->warn("{}: stopping after the last round (its global model is kept)",
                sig == SIGINT ? "SIGINT" : "SIGTERM");
      caf::anon_send(cluster, stop_atom_v, std::string(sig == SIGINT ? "SIGINT" : "SIGTERM"));
    }
  });
  progress_line progress(log);
  int64_t shown_round = -1;
  actors::job_options opts;
  opts.fetch_weights = !cli.save.empty();
  opts.on_start = [&](cluster_actor c) {
    {
      std::lock_guard<std::mutex> guard(cluster_mutex);
      cluster = c;
    }
    if (!cli.listen.empty()) {
      auto [host, port] = actors::parse_address(cli.listen);
      auto bound = sys.middleman().publish(c, port, host.c_str());
      if (!bound) {
        throw std::runtime_error("cannot listen on " + cli.listen + ": " +
                                 sys.render(bound.error()));
      }
      log->info("supervisor listening on {}:{} (salamander console {}:{})", host, *bound,
                host, *bound);
    }
  };
  opts.on_status = [&](const job_status& s) {
    if (s.round != shown_round && s.round > 0) {
      shown_round = s.round;
      progress.finish();
      log->info("round {}/{}: accuracy {:.2f}%, {:.1f} s, {}/{} clients took part ({}); "
                "{} update(s) dropped so far",
                s.round, s.rounds, 100 * s.test_accuracy, s.round_s, s.contributed,
                s.clients, s.plan, s.dropped_updates);
    }
    progress.update(status_fields(s));
  };
  auto result = actors::run_fed_job(sys, cfg, std::move(nodes), opts);
  end_stop_watch();
  watcher.join();
  progress.finish();
  auto& s = result.status;
  if (cli.cluster.empty()) {
    for (auto& n : handles) {
      caf::anon_send(n.handle, leave_atom_v);
    }
  }
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
