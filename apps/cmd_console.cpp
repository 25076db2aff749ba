// `salamander console HOST:PORT`: attach to a running job's supervisor (one
// started with --listen), look at it and poke it. Interactive with line
// editing, history and completion (libedit's readline interface), or
// `--exec 'cmd; cmd'` for scripts. `salamander chaos` is the older spelling
// of the failure commands and runs through the same code.
#include "actors/cluster/auth.hpp"
#include "actors/cluster/cluster_file.hpp"
#include "actors/node/network.hpp"
#include "actors/node/system.hpp"
#include "actors/node/tls.hpp"
#include "apps/cli_options.hpp"
#include "apps/commands.hpp"
#include "apps/console_parse.hpp"
#include "apps/console_verbs.hpp"
#include "apps/runtime_env.hpp"
#include "apps/status_text.hpp"

#include "models/model_desc.hpp"

#include <caf/io/middleman.hpp>

#include <fmt/format.h>

#include <editline/readline.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <unistd.h>

namespace salamander::apps {

namespace {

struct console_cli {
  std::string supervisor;
  std::string secret_file; ///< else $SALAMANDER_SECRET; none: look only
  std::string tls;         ///< deploy/make-certs.sh's; else $SALAMANDER_TLS; none: off
  std::string exec;        ///< "cmd; cmd": run these and exit (scripts, tests)
  double timeout_s = 30;
};

struct chaos_cli {
  std::string supervisor;
  std::string command;
  std::vector<std::string> args;
};

std::string mb(double bytes) {
  return bytes <= 0 ? std::string("-") : fmt::format("{:.0f} MB", bytes / 1e6);
}

std::string rate(double bytes_per_s) {
  if (bytes_per_s <= 0) {
    return "-";
  }
  return fmt::format("{:.0f} Mbit/s", bytes_per_s * 8 / 1e6);
}

std::string ms(double s) {
  return s <= 0 ? std::string("-") : fmt::format("{:.1f} ms", s * 1e3);
}

std::string show_fed_status(const job_status& s) {
  std::string out = status_line(s) + "\n";
  out += fmt::format("federated, strategy {}: round {} of {} after {:.1f} s of training; "
                     "test accuracy {}\n",
                     s.rounds.strategy, s.rounds.round, s.rounds.total, s.train_s,
                     s.test_accuracy >= 0 ? fmt::format("{:.2f}%", 100 * s.test_accuracy)
                                          : std::string("-"));
  out +=
      fmt::format("clients: {} up, {} took part in the last round ({:.1f} s, aiming at "
                  "{:.1f} s); {} update(s) dropped (late or failed)\n",
                  s.rounds.clients, s.rounds.contributed, s.rounds.round_s,
                  s.rounds.pace_s, s.rounds.dropped_updates);
  out += "kept fractions of the last tasks: " + s.plan + "\n";
  if (s.paused_by_user) {
    out += "paused from the console: resume starts the next round\n";
  }
  if (!s.error.empty()) {
    out += "last failure: " + s.error + "\n";
  }
  return out;
}

std::string bytes_text(int64_t b) {
  return models::format_bytes(static_cast<double>(b));
}

std::string show_split_status(const job_status& s) {
  std::string out = status_line(s) + "\n";
  out += fmt::format(
      "split learning, method {}{}: round {} of {} after {:.1f} s of "
      "training; test accuracy {}\n",
      s.rounds.strategy,
      s.rounds.split_phase == adasplit_phase::none ? "" : " (" + to_string(s.rounds.split_phase) + " phase)",
      s.rounds.round, s.rounds.total, s.train_s,
      s.test_accuracy >= 0 ? fmt::format("{:.2f}%", 100 * s.test_accuracy)
                           : std::string("-"));
  out +=
      fmt::format("across the cut: {} up, {} down; {:.2f} GFLOP on the clients, {:.2f} "
                  "on the server\n",
                  bytes_text(s.rounds.bytes_up), bytes_text(s.rounds.bytes_down),
                  s.rounds.client_flops / 1e9, s.rounds.server_flops / 1e9);
  out += fmt::format("clients: {} up; last round {:.1f} s: {}\n", s.rounds.clients,
                     s.rounds.round_s, s.plan);
  if (s.paused_by_user) {
    out += "paused from the console: resume starts the next round\n";
  }
  if (!s.error.empty()) {
    out += "last failure: " + s.error + "\n";
  }
  return out;
}

std::string show_status(const job_status& s) {
  if (s.mode == job_mode::federate) {
    return show_fed_status(s);
  }
  if (s.mode == job_mode::split) {
    return show_split_status(s);
  }
  std::string out = status_line(s) + "\n";
  out += fmt::format("plan v{}: {}\n", s.pipeline.plan_version,
                     s.plan.empty() ? "(none yet)" : s.plan);
  if (s.mode == job_mode::serve) {
    out += fmt::format("served {} requests in {:.1f} s ({} failed, {} refused: queue "
                       "full); {} recoveries, {} re-plans\n",
                       s.serving.requests, s.elapsed_s, s.serving.failed_requests,
                       s.serving.rejected, s.pipeline.recoveries, s.pipeline.replans);
    if (s.paused_by_user) {
      out += "paused from the console: requests queue until resume\n";
    }
    if (!s.error.empty()) {
      out += "last failure: " + s.error + "\n";
    }
    return out;
  }
  out += fmt::format(
      "committed {} batches in {:.1f} s; {} recoveries, {} re-plans{}\n",
      s.training.committed, s.elapsed_s, s.pipeline.recoveries, s.pipeline.replans,
      s.test_accuracy >= 0 ? fmt::format("; test accuracy {:.2f}%", 100 * s.test_accuracy)
                           : "");
  if (s.paused_by_user) {
    out += "paused from the console: resume carries on\n";
  }
  if (!s.error.empty()) {
    out += "last failure: " + s.error + "\n";
  }
  return out;
}

std::string show_nodes(const job_status& s) {
  std::string out = fmt::format(
      "{:<14} {:<8} {:<9} {:>6} {:>6} {:>8} {:>9} {:>22} {:>10}  {}\n", "node", "health",
      "role", "cpu", "speed", "capacity", "memory", "link", "heartbeat", "emulation");
  for (auto& n : s.nodes) {
    out += fmt::format(
        "{:<14} {:<8} {:<9} {:>6} {:>6} {:>8} {:>9} {:>22} {:>10}  {}\n", n.name,
        n.health, n.role, fmt::format("{:.2f}", n.cpu_share),
        n.speed > 0 ? fmt::format("{:.2f}", n.speed) : "-",
        fmt::format("{:.2f}", n.capacity), mb(n.memory_bytes),
        n.link_latency_s > 0
            ? fmt::format("{} {:.1f}ms", rate(n.link_bytes_per_s), n.link_latency_s * 1e3)
            : rate(n.link_bytes_per_s),
        n.last_heartbeat_s < 0 ? std::string("never")
                               : fmt::format("{:.1f} s ago", n.last_heartbeat_s),
        n.emulation.empty() ? "none" : n.emulation);
  }
  out +=
      "speed: measured over profiled compute (1 = as profiled); capacity: the node's own "
      "compute probe vs the start; cpu: emulated share "
      "(1 on real devices); link: measured to the other nodes (median rate, one-way "
      "latency), or the emulated rate\n";
  return out;
}

std::string show_plan(const job_status& s) {
  if (s.mode == job_mode::federate) {
    return "a federated job has no pipeline: every client trains the model (or a slice "
           "of it). Kept fractions of the last tasks: " +
           s.plan + "\n";
  }
  if (s.mode == job_mode::split) {
    return "a split job has no pipeline: every client holds the layers before the cut, "
           "the server the rest. Clients: " +
           s.plan + "\n";
  }
  if (s.stages.empty()) {
    return "no plan yet (phase " + to_string(s.phase) + ")\n";
  }
  if (s.mode == job_mode::serve) {
    std::string out =
        fmt::format("plan v{} ({} re-plans, {} recoveries so far)\n",
                    s.pipeline.plan_version, s.pipeline.replans, s.pipeline.recoveries);
    out += fmt::format("{:<6} {:<14} {:<10} {:>12}\n", "stage", "node", "layers", "busy");
    for (auto& r : s.stages) {
      out += fmt::format("{:<6} {:<14} {:<10} {:>12}\n", r.index, r.node,
                         fmt::format("[{},{})", r.begin, r.end),
                         fmt::format("{:.2f} s", r.measured_s));
    }
    out += "busy: compute time of the stage since this plan started serving\n";
    return out;
  }
  std::string out = fmt::format("plan v{} ({} re-plans so far)\n",
                                s.pipeline.plan_version, s.pipeline.replans);
  out += fmt::format("{:<6} {:<14} {:<10} {:>12} {:>12} {:>10} {:>10}\n", "stage", "node",
                     "layers", "predicted", "measured", "waiting", "sending");
  for (auto& r : s.stages) {
    out += fmt::format("{:<6} {:<14} {:<10} {:>12} {:>12} {:>10} {:>10}\n", r.index,
                       r.node, fmt::format("[{},{})", r.begin, r.end), ms(r.predicted_s),
                       ms(r.measured_s), ms(r.wait_s), ms(r.send_s));
  }
  out += "per batch; predicted from the profiles (- without), measured on the last "
         "committed "
         "batch\n";
  return out;
}

std::string split_metrics(const job_status& s) {
  std::string out;
  out += fmt::format("rounds         {} of {} ({})\n", s.rounds.round, s.rounds.total,
                     s.rounds.strategy);
  out += fmt::format(
      "accuracy       {:.2f}% (test split{})\n", 100 * std::max(0.0, s.test_accuracy),
      s.rounds.strategy == "adasplit" ? ", each client's model, averaged" : "");
  out += fmt::format("bytes          {} up, {} down\n", bytes_text(s.rounds.bytes_up),
                     bytes_text(s.rounds.bytes_down));
  out += fmt::format(
      "compute        {:.2f} GFLOP on clients, {:.2f} GFLOP on the server\n",
      s.rounds.client_flops / 1e9, s.rounds.server_flops / 1e9);
  return out;
}

std::string federated_metrics(const job_status& s) {
  std::string out;
  out += fmt::format("rounds         {} of {} ({})\n", s.rounds.round, s.rounds.total,
                     s.rounds.strategy);
  out += fmt::format("accuracy       {:.2f}% (global model, test split)\n",
                     100 * std::max(0.0, s.test_accuracy));
  out += fmt::format("last round     {:.2f} s (pace {:.2f} s), {} clients took part\n",
                     s.rounds.round_s, s.rounds.pace_s, s.rounds.contributed);
  out += fmt::format("dropped        {} update(s), late or failed\n",
                     s.rounds.dropped_updates);
  return out;
}

std::string serving_metrics(const job_status& s) {
  std::string out;
  out += fmt::format("requests       {} answered, {} failed, {} refused (queue full)\n",
                     s.serving.requests, s.serving.failed_requests, s.serving.rejected);
  out += fmt::format("rate           {:.1f} requests/s (last 5 s)\n",
                     s.serving.requests_per_s);
  out += fmt::format("latency        p50 {} p95 {} p99 {} (recent requests)\n",
                     ms(s.serving.latency_p50_s), ms(s.serving.latency_p95_s),
                     ms(s.serving.latency_p99_s));
  out += fmt::format("queue          {} waiting, {} micro-batches in flight\n",
                     s.serving.queue_depth, s.serving.in_flight);
  out += fmt::format("failures       {} recoveries (last {:.3f} s), {} micro-batches "
                     "sent again, {} late copies dropped\n",
                     s.pipeline.recoveries, s.pipeline.last_recovery_s,
                     s.serving.resent, s.serving.duplicates);
  out += fmt::format("re-plans       {}\n", s.pipeline.replans);
  return out;
}

std::string training_metrics(const job_status& s) {
  std::string out;
  out += fmt::format("schedule       {}\n", s.pipeline.schedule);
  out += fmt::format("throughput     {:.0f} samples/s recent, {:.0f} this epoch\n",
                     s.training.recent_samples_per_s, s.training.samples_per_s);
  out += fmt::format("loss           {:.4f}\n", s.loss);
  bool once = true;
  for (size_t i = 0; i < s.training.lineage.size(); ++i) {
    once = once && s.training.lineage[i] == i;
  }
  out += fmt::format(
      "lineage        {} batches in the current weights, each exactly once: {}\n",
      s.training.lineage.size(), once ? "yes" : "NO");
  auto c = static_cast<double>(std::max<int64_t>(1, s.pipeline.plan_batches));
  for (size_t i = 0; i < s.pipeline.stage_compute_s.size(); ++i) {
    out += fmt::format(
        "stage {}        compute {} wait {} send {} (mean per batch of plan v{})\n", i,
        ms(s.pipeline.stage_compute_s[i] / c), ms(s.pipeline.stage_wait_s[i] / c),
        ms(s.pipeline.stage_send_s[i] / c), s.pipeline.plan_version);
  }
  out += fmt::format("recoveries     {}", s.pipeline.recoveries);
  if (s.pipeline.recoveries > 0) {
    out += fmt::format(" (last {:.3f} s, rolled back to version {}); {} batches redone",
                       s.pipeline.last_recovery_s, s.pipeline.rollback_version,
                       s.training.redone_batches);
  }
  out += "\n";
  out += fmt::format("re-plans       {}", s.pipeline.replans);
  if (s.pipeline.replans > 0) {
    out += fmt::format(" (last paused training {:.3f} s, moved {})",
                       s.pipeline.last_replan_s,
                       mb(static_cast<double>(s.pipeline.last_replan_moved_bytes)));
  }
  out += "\n";
  if (s.training.replicated_version >= 0) {
    out += fmt::format("replicate      forced at version {}\n",
                       s.training.replicated_version);
  }
  return out;
}

// `metrics`: the mode's figures, then the lost nodes and the metrics log.
std::string show_metrics(const job_status& s) {
  std::string out = s.mode == job_mode::split      ? split_metrics(s)
                    : s.mode == job_mode::federate ? federated_metrics(s)
                    : s.mode == job_mode::serve    ? serving_metrics(s)
                                                   : training_metrics(s);
  if (!s.dead_nodes.empty()) {
    out += fmt::format("lost nodes     {}\n", fmt::join(s.dead_nodes, ", "));
  }
  out += fmt::format("metrics log    {}\n", s.metrics_path.empty() ? "(none)" : s.metrics_path);
  return out;
}

/// How a command went: done, failed (the rest still run), or the supervisor
/// is gone (nothing more can run).
enum class outcome { ok, failed, gone };

// The supervisor's down message, turned into an error for the request the
// console is waiting on (the way CAF answers a request to an actor that is
// already gone), and for every later one.
struct supervisor_watch {
  std::mutex mutex;
  caf::strong_actor_ptr waiter; ///< the console's scoped actor
  caf::message_id pending;      ///< the response it waits for, if any
  bool down = false;

  void await(caf::message_id id) {
    std::lock_guard<std::mutex> lock(mutex);
    pending = id;
    if (down) {
      bounce();
    }
  }

  void on_down() {
    std::lock_guard<std::mutex> lock(mutex);
    down = true;
    bounce();
  }

private:
  // answers the awaited response id, as CAF's request bouncer would
  void bounce() {
    if (pending.is_response() && waiter) {
      waiter->get()->enqueue(
          nullptr, pending,
          caf::make_message(caf::make_error(caf::sec::request_receiver_down)), nullptr);
      pending = caf::message_id{};
    }
  }
};

class session {
public:
  session(caf::actor_system& sys, cluster_actor sup, std::string address,
          std::chrono::milliseconds timeout)
      : sys_(sys), sup_(std::move(sup)), address_(std::move(address)), timeout_(timeout),
        self_(sys), watch_(std::make_shared<supervisor_watch>()) {
    watch_->waiter = caf::actor_cast<caf::strong_actor_ptr>(self_.ptr());
    auto watch = watch_;
    watcher_ =
        sys_.spawn([watch, sup = sup_](caf::event_based_actor* self) -> caf::behavior {
          self->monitor(sup);
          self->set_down_handler([=](caf::down_msg&) {
            watch->on_down();
            self->quit();
          });
          return {[](caf::get_atom) {}};
        });
  }

  ~session() { caf::anon_send_exit(watcher_, caf::exit_reason::user_shutdown); }

  session(const session&) = delete;
  session& operator=(const session&) = delete;

  /// Proves the cluster secret to the supervisor (needed to change a job
  /// that has one). Returns "" or what went wrong.
  std::string authenticate(const std::string& secret) {
    std::string why;
    auto challenge = ask<std::string>(why, auth_atom_v);
    if (!challenge) {
      return why;
    }
    ask<std::string>(why, auth_atom_v,
                     actors::prove(secret, "console", "console", *challenge));
    return why;
  }

  /// Runs one command; errors are printed to stderr.
  outcome run(const console_command& c) {
    switch (c.op) {
    case console_op::status:
      return with_status(show_status);
    case console_op::nodes:
      return with_status(show_nodes);
    case console_op::plan:
      return with_status(show_plan);
    case console_op::metrics:
      return with_status(show_metrics);
    case console_op::kill_stage:
    case console_op::kill_node:
    case console_op::slow_node:
    case console_op::cut_node:
    case console_op::repartition:
    case console_op::replicate:
    case console_op::checkpoint_save:
    case console_op::pause:
    case console_op::resume:
      return *send_command(c, [this](auto&&... xs) { return say(xs...); });
    case console_op::help:
      if (!c.args.empty()) {
        auto u = console_usage(c.args[0]);
        if (u.empty()) {
          std::fprintf(stderr, "error: no command '%s' (help lists them)\n",
                       c.args[0].c_str());
          return outcome::failed;
        }
        std::printf("%s\n", u.c_str());
      } else {
        std::printf("commands (separate several with ';'):\n%s", console_help().c_str());
      }
      return outcome::ok;
    case console_op::quit:
      return outcome::ok;
    }
    return outcome::failed;
  }

  bool gone() const { return gone_; }

private:
  // Asks the supervisor and waits at most the timeout, or until it is
  // known to be gone: CAF 0.17 lets a request to a peer whose process died
  // wait its whole timeout, so the watch fails it at the down message.
  template <class Reply, class... Ts>
  std::optional<Reply> ask(std::string& why, Ts&&... xs) {
    std::optional<Reply> out;
    auto handle = self_->request(sup_, timeout_, std::forward<Ts>(xs)...);
    watch_->await(handle.id());
    handle.receive([&](Reply& reply) { out = std::move(reply); },
                   [&](caf::error& err) { why = explain(err); });
    watch_->await(caf::message_id{});
    return out;
  }

  template <class Show> outcome with_status(Show show) {
    std::string why;
    auto s = ask<job_status>(why, caf::get_atom_v);
    if (s) {
      std::fputs(show(*s).c_str(), stdout);
    }
    return finish(s.has_value(), why);
  }

  template <class... Ts> outcome say(Ts&&... xs) {
    std::string why;
    auto reply = ask<std::string>(why, std::forward<Ts>(xs)...);
    if (reply) {
      std::printf("%s\n", reply->c_str());
    }
    return finish(reply.has_value(), why);
  }

  outcome finish(bool ok, const std::string& why) {
    std::fflush(stdout);
    if (ok) {
      return outcome::ok;
    }
    std::fprintf(stderr, "error: %s\n", why.c_str());
    return gone_ ? outcome::gone : outcome::failed;
  }

  std::string gone_text() const {
    return "the supervisor at " + address_ +
           " is gone (the job ended or its process died)";
  }

  std::string explain(const caf::error& err) {
    if (err == caf::sec::request_timeout) {
      return "the supervisor did not answer within " +
             std::to_string(timeout_.count() / 1000) + " s";
    }
    if (err == caf::sec::request_receiver_down) {
      gone_ = true;
      return gone_text();
    }
    return error_text(sys_, err);
  }

  caf::actor_system& sys_;
  cluster_actor sup_;
  std::string address_;
  std::chrono::milliseconds timeout_;
  caf::scoped_actor self_;
  std::shared_ptr<supervisor_watch> watch_;
  caf::actor watcher_;
  bool gone_ = false;
};

caf::expected<cluster_actor> attach(caf::actor_system& sys, const std::string& address) {
  auto [host, port] = actors::parse_address(address);
  return actors::remote_actor<cluster_actor>(sys, host, port);
}

// readline completion: command words first, then their sub-words.
char* complete_word(const char* text, int state) {
  static std::vector<std::string> matches;
  static size_t next = 0;
  if (state == 0) {
    matches.clear();
    next = 0;
    std::string line(rl_line_buffer, static_cast<size_t>(rl_point));
    std::vector<std::string> words;
    try {
      words = split_words(line.substr(0, line.size() - std::strlen(text)));
    } catch (const std::exception&) {
      return nullptr; // an open quote: nothing to complete
    }
    std::vector<std::string> pool;
    if (words.empty()) {
      pool = console_words();
    } else if (words.size() == 1 && words[0] == "kill") {
      pool = {"stage", "node"};
    } else if (words.size() == 1 && (words[0] == "slow" || words[0] == "cut")) {
      pool = {"node"};
    } else if (words.size() == 1 && words[0] == "checkpoint") {
      pool = {"save"};
    } else if (words.size() == 1 && words[0] == "help") {
      pool = console_words();
    }
    for (auto& p : pool) {
      if (p.rfind(text, 0) == 0) {
        matches.push_back(p);
      }
    }
  }
  if (next < matches.size()) {
    return strdup(matches[next++].c_str());
  }
  return nullptr;
}

char** complete(const char* text, int, int) {
  rl_attempted_completion_over = 1; // no file names
  return rl_completion_matches(text, complete_word);
}

std::string history_file() {
  if (const char* h = std::getenv("SALAMANDER_HISTORY")) {
    return h;
  }
  if (const char* home = std::getenv("HOME")) {
    return std::string(home) + "/.salamander_history";
  }
  return "";
}

int interactive(session& s, const std::string& address) {
  auto history = history_file();
  using_history();
  if (!history.empty() && read_history(history.c_str()) != 0) {
    write_history(history.c_str()); // append_history needs the file to exist
  }
  rl_attempted_completion_function = complete;
  std::printf("attached to the supervisor at %s; help lists the commands, quit or Ctrl-D "
              "leaves (the job goes on)\n",
              address.c_str());
  auto prompt = "salamander " + address + "> ";
  while (true) {
    char* raw = readline(prompt.c_str());
    if (!raw) {
      std::printf("\n");
      break;
    }
    std::string line(raw);
    std::free(raw);
    if (line.find_first_not_of(" \t") == std::string::npos) {
      continue;
    }
    add_history(line.c_str());
    if (!history.empty()) {
      append_history(1, history.c_str());
      history_truncate_file(history.c_str(), 1000);
    }
    auto parsed = parse_console(line);
    if (!parsed.error.empty()) {
      std::fprintf(stderr, "error: %s\n", parsed.error.c_str());
      continue;
    }
    for (auto& c : parsed.commands) {
      if (c.op == console_op::quit) {
        return 0;
      }
      if (s.run(c) == outcome::gone) {
        return 1; // nothing more can run: say so now, not one timeout per command
      }
    }
  }
  return 0;
}

int run_console(const console_cli& cli) {
  auto log = logger("console");
  parse_result script;
  if (!cli.exec.empty()) {
    script = parse_console(cli.exec);
    if (!script.error.empty()) {
      log->error("{}", script.error);
      return 2; // nothing was run
    }
  }
  caf::actor_system_config cfg;
  actors::configure(cfg);
  try {
    actors::configure_tls(cfg, actors::checked_tls(cli.tls));
  } catch (const std::invalid_argument& e) {
    log->error("{}", e.what());
    return 2;
  }
  caf::actor_system sys{cfg};
  auto sup = attach(sys, cli.supervisor);
  if (!sup) {
    log->error(
        "no supervisor at {}: {} (start the job with supervisor --listen HOST:PORT)",
        cli.supervisor, error_text(sys, sup.error()));
    return 1;
  }
  session s(sys, *sup, cli.supervisor,
            std::chrono::milliseconds(static_cast<int64_t>(cli.timeout_s * 1000)));
  if (auto secret = actors::load_secret(cli.secret_file)) {
    if (auto why = s.authenticate(*secret); !why.empty()) {
      log->error("the supervisor at {} refused this console: {}", cli.supervisor, why);
      return 1;
    }
  }
  if (cli.exec.empty()) {
    if (!::isatty(STDIN_FILENO)) {
      log->warn("stdin is not a terminal; for scripts use --exec 'status; nodes'");
    }
    return interactive(s, cli.supervisor);
  }
  int rc = 0;
  for (auto& c : script.commands) {
    if (c.op == console_op::quit) {
      break;
    }
    auto done = s.run(c);
    if (done == outcome::gone) {
      return 1;
    }
    if (done == outcome::failed) {
      rc = 1; // go on: a script asking for status after a failed kill still wants it
    }
  }
  return rc;
}

int run_chaos(const chaos_cli& cli) {
  auto log = logger("chaos");
  std::string line;
  const auto& a = cli.args;
  if (cli.command == "status" && a.empty()) {
    line = "status";
  } else if (cli.command == "kill-stage" && a.size() == 1) {
    line = "kill stage " + a[0];
  } else if (cli.command == "kill-node" && a.size() == 1) {
    line = "kill node " + a[0];
  } else if (cli.command == "slow-node" && a.size() == 2) {
    line = "slow node " + a[0] + " " + a[1];
  } else if (cli.command == "cut-node" && a.size() == 2) {
    line = "cut node " + a[0] + " " + a[1];
  } else {
    log->error(
        "unknown chaos command '{}' with {} argument(s); use: status | kill-stage N | "
        "kill-node NAME | slow-node NAME FACTOR | cut-node NAME SECONDS (or salamander console "
        "--exec)",
        cli.command, a.size());
    return 2;
  }
  console_cli c;
  c.supervisor = cli.supervisor;
  c.exec = line;
  c.timeout_s = 10;
  return run_console(c);
}

} // namespace

command add_chaos(CLI::App& app) {
  auto cli = std::make_shared<chaos_cli>();
  auto* sub = app.add_subcommand(
      "chaos",
      "drive failures by hand against a running job whose supervisor was started "
      "with --listen: status | kill-stage N | kill-node NAME | slow-node NAME FACTOR | "
      "cut-node NAME SECONDS");
  sub->add_option("--supervisor", cli->supervisor, "HOST:PORT of the supervisor")
      ->required();
  sub->add_option("command", cli->command, "status, kill-stage, kill-node, slow-node or cut-node")
      ->required();
  sub->add_option("args", cli->args, "the command's arguments");
  return {sub, [cli] { return run_chaos(*cli); }};
}

command add_console(CLI::App& app) {
  auto cli = std::make_shared<console_cli>();
  auto* sub = app.add_subcommand(
      "console",
      "attach to a running job (supervisor --listen HOST:PORT): status, nodes, plan, "
      "metrics, kill, slow, repartition, replicate, checkpoint save, pause, resume; "
      "interactive, or --exec 'cmd; cmd' for scripts");
  sub->add_option("supervisor", cli->supervisor, "HOST:PORT of the supervisor")
      ->required();
  sub->add_option("--exec,-e", cli->exec,
                  "run these commands (separated by ';') and exit; exit code 1 if one "
                  "failed, 2 if one does not parse (then none runs)");
  add_secret_file(*sub, cli->secret_file,
                  "cluster secret, to be allowed to change the job (default: "
                  "$SALAMANDER_SECRET; without it only status, nodes, plan and metrics "
                  "work on a job that has a secret)");
  add_tls(*sub, cli->tls);
  sub->add_option("--timeout", cli->timeout_s, "seconds to wait for each answer")
      ->check(number(0, 86400, true, "seconds"))
      ->capture_default_str();
  return {sub, [cli] { return run_console(*cli); }};
}

} // namespace salamander::apps
