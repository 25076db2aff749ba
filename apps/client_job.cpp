#include "apps/client_job.hpp"
#include "actors/cluster/auth.hpp"
#include "actors/cluster/cluster_file.hpp"
#include "actors/node/network.hpp"
#include "actors/node/system.hpp"
#include "actors/node/tls.hpp"
#include "apps/commands.hpp"
#include "apps/number_word.hpp"
#include "apps/runtime_env.hpp"
#include "apps/status_text.hpp"
#include "messages/checkpoint.hpp"

#include <caf/io/middleman.hpp>

#include <csignal>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>

namespace salamander::apps {

std::vector<double> parse_shares(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto v = finite_number(item);
    if (!v || !(*v > 0) || *v > 1000) {
      throw std::invalid_argument("--client-shares: '" + item +
                                  "' is not a positive speed (e.g. 1,1,0.1)");
    }
    out.push_back(*v);
  }
  return out;
}

std::pair<double, double> parse_stragglers(const std::string& text) {
  auto colon = text.find(':');
  auto number = [&](const std::string& part, const char* what) {
    auto v = finite_number(part);
    if (!v) {
      throw std::invalid_argument(std::string(what) + " '" + part + "' is not a number (" +
                                  "FRACTION:SPEED, e.g. 0.2:0.1)");
    }
    return *v;
  };
  if (colon == std::string::npos) {
    throw std::invalid_argument("'" + text + "' is not FRACTION:SPEED (e.g. 0.2:0.1)");
  }
  auto fraction = number(text.substr(0, colon), "FRACTION");
  auto speed = number(text.substr(colon + 1), "SPEED");
  if (fraction < 0 || fraction > 1) {
    throw std::invalid_argument("FRACTION must be in [0, 1], got " + text.substr(0, colon));
  }
  if (speed <= 0 || speed > 1) {
    throw std::invalid_argument("SPEED must be in (0, 1] (a part of the node's speed), got " +
                                text.substr(colon + 1));
  }
  return {fraction, speed};
}

void add_client_places(CLI::App& sub, client_job_options& o,
                       const std::string& shares_help) {
  sub.add_option("--clients", o.clients, "embedded: N local nodes (--clients-per-node clients on each)")
      ->check(whole<int>(1));
  sub.add_option("--client-shares", o.client_shares, shares_help);
  add_cluster_file(sub, o.cluster);
}

void add_client_job_options(CLI::App& sub, client_cli& cli) {
  add_metrics(sub, cli.metrics);
  sub.add_option("--listen", cli.clients.listen,
                 "HOST:PORT to publish the supervisor on (console, node --join)");
  add_secret_file(sub, cli.clients.secret_file);
  add_tls(sub, cli.clients.tls);
  add_dashboard(sub, cli.clients.dashboard);
  add_threads(sub, cli.clients.threads, "compute threads (0: LibTorch's default)");
  add_hang_timeout(sub, cli.clients.hang_timeout_s);
}

void check_checkpoint_options(const std::string& checkpoint, bool resume) {
  if (resume && checkpoint.empty()) {
    throw std::invalid_argument(
        "--resume needs --checkpoint FILE (the file to resume from)");
  }
  if (resume && !std::filesystem::exists(checkpoint)) {
    throw std::invalid_argument("--resume: " + checkpoint + " does not exist");
  }
  if (!resume && !checkpoint.empty() && std::filesystem::exists(checkpoint)) {
    throw std::invalid_argument("--checkpoint " + checkpoint +
                                " exists: --resume to carry on from it, or remove it");
  }
}

namespace {

// Embedded emulation: one share of a core per client. The shares are
// relative speeds; scaled down, when they add up to more than this host
// has, so that the fast clients are not slowed by each other instead of by
// their share.
std::vector<actors::emulation_config> emulated_clients(const client_job_options& o,
                                                       const std::string& subsystem) {
  std::vector<actors::emulation_config> out;
  if (o.client_shares.empty()) {
    return out;
  }
  auto shares = parse_shares(o.client_shares);
  if (static_cast<int>(shares.size()) != o.clients) {
    throw std::invalid_argument("--client-shares lists " + std::to_string(shares.size()) +
                                " speeds for " + std::to_string(o.clients) +
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
  for (size_t i = 0; i < shares.size(); ++i) {
    actors::emulation_config c;
    c.cpu_share = std::min(1.0, shares[i] * scale);
    out.push_back(c);
  }
  logger(subsystem)->info("EMULATED clients: relative speeds {} run at {:.3f} x those "
                          "shares of one core each ({} host cores)",
                          o.client_shares, scale, cores);
  return out;
}

// --clients N or --cluster FILE, and what fits each.
void check_places(const client_job_options& o) {
  if (o.clients <= 0 && o.cluster.empty()) {
    throw std::invalid_argument(
        "say where the clients run: --clients N (N local nodes, one "
        "process) or --cluster FILE (node processes)");
  }
  if (o.clients > 0 && !o.cluster.empty()) {
    throw std::invalid_argument("--clients and --cluster exclude each other");
  }
  if (!o.cluster.empty() && !o.client_shares.empty()) {
    throw std::invalid_argument("--client-shares emulates local clients; node processes "
                                "take --cpu-share each");
  }
}

// The clients' nodes: local ones, emulated, or those of the cluster file.
std::vector<actors::remote_node>
client_nodes(caf::actor_system& sys, const client_job_options& o,
             const std::vector<actors::cluster_node>& listed,
             const std::vector<actors::emulation_config>& emulation) {
  if (o.cluster.empty()) {
    return actors::local_nodes(sys, o.clients, o.threads, emulation);
  }
  auto connected = actors::connect_nodes(sys, listed);
  if (!connected) {
    throw std::runtime_error(sys.render(connected.error()));
  }
  return std::move(*connected);
}

// The supervisor's console port (--listen), for `salamander console`.
void listen_on(caf::actor_system& sys, const cluster_actor& c, const std::string& listen,
               const std::shared_ptr<spdlog::logger>& log) {
  auto [host, port] = actors::parse_address(listen);
  auto bound = actors::publish(c, port, host);
  if (!bound) {
    throw std::runtime_error("cannot listen on " + listen + ": " + sys.render(bound.error()));
  }
  log->info("supervisor listening on {}:{} (salamander console {}:{})", host, *bound, host,
            *bound);
}

// The nodes this command started itself (no --cluster) leave with it.
void dismiss_own_nodes(const client_job_options& o,
                       const std::vector<actors::remote_node>& handles) {
  if (o.cluster.empty()) {
    for (auto& n : handles) {
      caf::anon_send(n.handle, leave_atom_v);
    }
  }
}

} // namespace

actors::job_result run_client_job(
    const client_job_options& o, const std::string& subsystem,
    const std::function<actors::job_result(caf::actor_system&, const std::string& secret,
                                           std::vector<actors::remote_node>,
                                           const actors::job_options&)>& run,
    const std::function<void(const job_status&)>& on_round) {
  auto log = logger(subsystem);
  check_places(o);
  std::string secret;
  std::vector<actors::cluster_node> listed;
  if (!o.cluster.empty()) {
    listed = actors::read_cluster_file(o.cluster);
    if (auto s = actors::load_secret(o.secret_file)) {
      secret = *s;
    }
  }
  auto emulation = emulated_clients(o, subsystem);
  caf::actor_system_config sys_cfg;
  actors::system_options sopts;
  sopts.connection_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(o.hang_timeout_s * 1000));
  actors::configure(sys_cfg, sopts);
  actors::configure_tls(sys_cfg, actors::checked_tls(o.tls));
  caf::actor_system sys{sys_cfg};
  auto dash =
      open_dashboard(sys, o.dashboard, {o.secret_file, o.tls, o.metrics_path, false, {}});
  auto nodes = client_nodes(sys, o, listed, emulation);
  auto handles = nodes;
  watch_stop_signals();
  std::mutex cluster_mutex;
  cluster_actor cluster;
  std::thread watcher([&] {
    int sig = next_stop_signal();
    if (sig == 0) {
      return; // the job is over
    }
    std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    std::lock_guard<std::mutex> guard(cluster_mutex);
    if (!cluster) {
      // (as training does: a signal before the job started is not lost)
      log->error("{} before the job started: stopping at once", name);
      std::_Exit(128 + sig);
    }
    log->warn("{}: stopping after the last whole round (its state is kept)", name);
    caf::anon_send(cluster, stop_atom_v, name);
  });
  progress_line progress(log);
  actors::job_options opts;
  opts.fetch_weights = o.fetch_weights;
  opts.on_start = [&](cluster_actor c) {
    {
      std::lock_guard<std::mutex> guard(cluster_mutex);
      cluster = c;
    }
    if (dash) {
      dash->attach(c);
    }
    if (!o.listen.empty()) {
      listen_on(sys, c, o.listen, log);
    }
  };
  int64_t shown_round = -1;
  opts.on_status = [&](const job_status& s) {
    if (s.rounds.round != shown_round && s.rounds.round > 0) {
      shown_round = s.rounds.round;
      progress.finish();
      on_round(s);
    }
    progress.update(status_fields(s));
  };
  actors::job_result result;
  try {
    result = run(sys, secret, std::move(nodes), opts);
  } catch (...) {
    // (a --listen that cannot bind): stop what was started, or the actor
    // system would wait for it for ever
    {
      std::lock_guard<std::mutex> guard(cluster_mutex);
      if (cluster) {
        caf::anon_send(cluster, leave_atom_v);
      }
    }
    dismiss_own_nodes(o, handles);
    end_stop_watch();
    watcher.join();
    throw;
  }
  if (dash) {
    dash->show_final(result.status);
  }
  end_stop_watch();
  watcher.join();
  progress.finish();
  dismiss_own_nodes(o, handles);
  return result;
}

bool save_final_model(const std::string& path, const actors::job_result& result,
                      uint64_t seed, const std::string& note) {
  if (path.empty() || !result.weights) {
    return false;
  }
  messages::checkpoint c;
  c.snapshot = *result.weights;
  c.seed = seed;
  c.epoch = static_cast<uint64_t>(result.status.rounds.round);
  c.note = note;
  messages::save_checkpoint(path, c);
  return true;
}

} // namespace salamander::apps
