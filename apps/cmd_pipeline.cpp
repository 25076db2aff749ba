// `salamander train` and `salamander supervisor` (their options, and
// pipeline training over actors: embedded with --stages, or on the nodes of
// a cluster file), and `salamander node`.
#include "actors/cluster/auth.hpp"
#include "actors/cluster/cluster_file.hpp"
#include "actors/train/train_job.hpp"
#include "actors/node/network.hpp"
#include "actors/node/port_probe.hpp"
#include "actors/node/profiler.hpp"
#include "actors/node/system.hpp"
#include "actors/node/tls.hpp"
#include "actors/train/stream.hpp"
#include "apps/cli_options.hpp"
#include "apps/commands.hpp"
#include "apps/dashboard/dashboard_cli.hpp"
#include "apps/preflight.hpp"
#include "apps/progress.hpp"
#include "apps/runtime_env.hpp"
#include "apps/status_text.hpp"
#include "apps/train_cli.hpp"
#include "messages/checkpoint.hpp"

#include <caf/io/middleman.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <malloc.h>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace salamander::apps {

namespace {

// SIGINT/SIGTERM -> a byte on a pipe (all a handler may safely do).
int stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  auto b = static_cast<unsigned char>(sig);
  ssize_t ignored = ::write(stop_pipe[1], &b, 1);
  (void)ignored;
}

} // namespace

void watch_stop_signals() {
  if (stop_pipe[0] < 0 && ::pipe(stop_pipe) != 0) {
    throw std::runtime_error("cannot make a pipe for signals");
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler != SIG_IGN) { // (nohup, a background job: left ignored)
      sigaction(sig, &sa, nullptr);
    }
  }
}

// The next signal's number; 0 once end_stop_watch() was called.
int next_stop_signal() {
  unsigned char b = 0;
  while (::read(stop_pipe[0], &b, 1) < 0 && errno == EINTR) {
  }
  return b;
}

void end_stop_watch() {
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler == on_stop_signal) {
      signal(sig, SIG_DFL);
    }
  }
  unsigned char zero = 0;
  ssize_t ignored = ::write(stop_pipe[1], &zero, 1);
  (void)ignored;
}

std::string default_metrics_path() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("runs/job-{}-{}/metrics.jsonl", stamp, ::getpid());
}

std::string metrics_path_of(const std::string& option) {
  return option == "none" ? "" : option.empty() ? default_metrics_path() : option;
}

namespace {

// RUN_DIR/job.json: the command line of a job that can be resumed, and the
// directory it ran in (its paths may be relative).
void write_job_file(const std::string& dir, const std::vector<std::string>& argv) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  nlohmann::json j = {{"format", 1},
                      {"argv", argv},
                      {"cwd", std::filesystem::current_path().string()}};
  messages::write_file_atomically(
      dir + "/job.json", j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace),
      "job description");
}

struct job_file {
  std::vector<std::string> argv;
  std::string cwd;
};

// Reads what write_job_file wrote; throws (nlohmann's exceptions) when it is
// not that.
job_file read_job_file(std::istream& in) {
  auto j = nlohmann::json::parse(in);
  return {j.at("argv").get<std::vector<std::string>>(), j.at("cwd").get<std::string>()};
}

// The nodes of a resumed job: those that do not answer are lost (the job
// recovers without them, and they are dialled again), not a reason to stop.
std::vector<actors::remote_node>
connect_for_resume(caf::actor_system& sys, const std::vector<actors::cluster_node>& listed,
                   const std::shared_ptr<spdlog::logger>& log) {
  std::vector<actors::remote_node> out;
  for (auto& n : listed) {
    auto one = actors::connect_nodes(sys, {n});
    if (one) {
      out.push_back(std::move(one->front()));
    } else {
      log->warn("{}; the resumed job goes on without it until it answers",
                sys.render(one.error()));
      out.push_back({n.name, node_actor{}, n.host, n.port});
    }
  }
  return out;
}

// "The same command again" after its supervisor died: the run directory of
// an earlier run of exactly this command line, in this directory, whose job
// neither ended nor was stopped (its job_state.json says so), the newest if
// several; "" if none. Looked for where this run's state would go: beside
// --metrics when given (the same directory: starting afresh there would
// overwrite what the dead supervisor left), else in runs/job-*.
std::string unfinished_run_of(const std::vector<std::string>& argv,
                              const std::string& metrics) {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  std::error_code ec;
  if (!metrics.empty()) {
    auto dir = fs::path(metrics).parent_path();
    dirs.push_back(dir.empty() ? fs::path(".") : dir);
  } else {
    for (auto& e : fs::directory_iterator("runs", ec)) {
      if (e.path().filename().string().rfind("job-", 0) == 0) {
        dirs.push_back(e.path());
      }
    }
  }
  auto here = fs::current_path(ec).string();
  std::string found;
  fs::file_time_type newest{};
  for (auto& dir : dirs) {
    try {
      std::ifstream job(dir / "job.json"), state(dir / "job_state.json");
      if (!job || !state) {
        continue;
      }
      auto recorded = read_job_file(job);
      if (recorded.argv != argv || recorded.cwd != here) {
        continue;
      }
      auto s = nlohmann::json::parse(state);
      auto phase = s.at("phase").get<std::string>();
      if (phase == "finished" || phase == "failed" || !s.value("stopped", "").empty()) {
        continue;
      }
      auto when = fs::last_write_time(dir / "job_state.json", ec);
      if (found.empty() || when > newest) {
        found = dir.string();
        newest = when;
      }
    } catch (const std::exception& e) {
      // not what a supervisor wrote: not ours to carry on
      spdlog::debug("{} is not a run to resume: {}", dir.string(), e.what());
      continue;
    }
  }
  return found;
}

} // namespace

std::vector<std::string> resume_arguments(const std::string& run_dir,
                                          const std::vector<std::string>& given) {
  auto sub = std::find(given.begin(), given.end(), "supervisor");
  for (auto it = sub == given.end() ? sub : std::next(sub); it != given.end(); ++it) {
    if (*it == "--resume") {
      ++it; // its value
      if (it == given.end()) {
        break;
      }
    } else if (it->rfind("--resume=", 0) != 0) {
      throw std::runtime_error("supervisor --resume RUN_DIR takes no other option (" +
                               *it + "): the job's options are those recorded in " +
                               run_dir + "/job.json");
    }
  }
  auto dir = std::filesystem::absolute(run_dir).lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') {
    dir.pop_back();
  }
  std::ifstream in(dir + "/job.json");
  if (!in) {
    throw std::runtime_error("cannot resume from " + run_dir + ": there is no " + dir +
                             "/job.json (the run directory of a supervisor --cluster "
                             "job with a metrics log)");
  }
  std::vector<std::string> args;
  std::string cwd;
  try {
    auto recorded = read_job_file(in);
    args = std::move(recorded.argv);
    cwd = std::move(recorded.cwd);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot resume from " + run_dir + ": " + dir +
                             "/job.json is not what a supervisor wrote: " + e.what());
  }
  if (std::find(args.begin(), args.end(), "supervisor") == args.end()) {
    // `train --cluster FILE` is the same job as `supervisor --cluster FILE`
    auto train = std::find(args.begin(), args.end(), "train");
    if (train == args.end() || std::find(args.begin(), args.end(), "--cluster") == args.end()) {
      throw std::runtime_error("cannot resume from " + run_dir +
                               ": job.json records no supervisor --cluster command");
    }
    *train = "supervisor";
  }
  if (::chdir(cwd.c_str()) != 0) {
    throw std::runtime_error("cannot resume from " + run_dir + ": the job ran in " + cwd +
                             ", which is gone (" + std::strerror(errno) + ")");
  }
  args.push_back("--resume");
  args.push_back(dir);
  return args;
}

namespace {

// The job's configuration: the options bound into cli.job, and what the
// others (plan, balance, forced re-plan, metrics, pause) mean for it.
actors::job_config config_of(const train_cli& cli, const models::model_desc& desc) {
  actors::job_config jc = cli.job;
  jc.model = desc.spec.canonical();
  jc.balance = actors::parse_balance(cli.balance);
  jc.weight_prediction = !cli.no_weight_prediction;
  jc.auto_plan = (cli.plan == "auto" || cli.plan == "pipeline") && jc.balance.empty();
  jc.allow_data_parallel = cli.plan == "auto";
  jc.data_parallel = cli.plan == "dp";
  if (cli.stages > 0 && cli.cluster.empty() && jc.auto_plan) {
    jc.stages = static_cast<size_t>(cli.stages); // `--stages N` means N stages
  }
  if (jc.data_parallel && !jc.balance.empty()) {
    throw std::invalid_argument(
        "--plan dp and --balance contradict each other: data-parallel "
        "members hold every layer");
  }
  if (cli.replan_at > 0) {
    jc.replan_at[static_cast<uint64_t>(cli.replan_at)] = cli.replan_balance;
  }
  if (jc.weight_aggregation > 0 && jc.schedule != "async" && jc.schedule != "auto") {
    throw std::invalid_argument("--weight-aggregation averages the weight versions of the "
                                "async schedule; --schedule " +
                                jc.schedule + " keeps one version (use --schedule async)");
  }
  jc.metrics_path = metrics_path_of(cli.metrics);
  jc.pause_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(cli.pause_timeout_s * 1000));
  return jc;
}

// A supervisor --cluster job keeps what a restarted supervisor needs in its
// run directory (beside the metrics log): `jc` with that directory, and
// with what it left there when this job carries on one whose supervisor
// died (--resume, or the same command line again).
actors::job_config with_run_dir(const train_cli& cli, const models::model_desc& desc,
                                actors::job_config jc) {
  auto log = logger("supervisor");
  auto resume_dir = cli.resume;
  if (resume_dir.empty() && !cli.cluster.empty() && cli.stream.empty() &&
      cli.metrics != "none") {
    resume_dir = unfinished_run_of(cli.argv, cli.metrics);
    if (!resume_dir.empty()) {
      log->warn("this same command ran in {} and its supervisor stopped before the job "
                "ended: carrying that job on, as `salamander supervisor --resume {}` "
                "would (remove {}/job_state.json to start it afresh instead)",
                resume_dir, resume_dir, resume_dir);
    }
  }
  if (!resume_dir.empty()) {
    if (!cli.stream.empty()) {
      throw std::invalid_argument(
          "a --stream job cannot be resumed by --resume yet (its stream log carries "
          "on from its last batch: start the same command again)");
    }
    auto resume = std::make_shared<actors::resume_point>(
        actors::read_resume_point(resume_dir, desc));
    jc.state_dir = resume_dir;
    jc.metrics_path =
        fmt::format("{}/metrics-resume{}.jsonl", resume_dir, resume->resumes + 1);
    jc.resume = resume;
    log->warn("resuming the job in {} (its supervisor stopped: {} batches committed, "
              "the central replica {}); metrics: {}",
              resume_dir, resume->committed,
              resume->weights ? "at version " + std::to_string(resume->weights->version)
                              : std::string("never written: from the seed"),
              jc.metrics_path);
  } else if (!cli.cluster.empty() && !jc.metrics_path.empty() && cli.stream.empty()) {
    jc.state_dir = std::filesystem::path(jc.metrics_path).parent_path().string();
    if (jc.state_dir.empty()) {
      jc.state_dir = ".";
    }
    write_job_file(jc.state_dir, cli.argv);
  }
  return jc;
}

// --stream: the samples the job trains on, as they arrive (null: a data set).
std::shared_ptr<actors::sample_stream> stream_of(const train_cli& cli,
                                                 const actors::job_config& jc) {
  if (cli.stream.empty()) {
    return nullptr;
  }
  if (cli.job.dataset != "fashion-mnist") {
    throw std::invalid_argument("--stream carries Fashion-MNIST-shaped samples (a label "
                                "byte, 28x28 pixel bytes): drop --dataset " +
                                cli.job.dataset);
  }
  actors::stream_options so;
  so.source = cli.stream;
  auto runs_dir = std::filesystem::path(jc.metrics_path.empty() ? default_metrics_path()
                                                                : jc.metrics_path)
                      .parent_path();
  so.log_dir = cli.stream_log.empty() ? (runs_dir / "stream").string() : cli.stream_log;
  so.batch_size = jc.batch_size;
  so.seed = jc.seed;
  so.data_dir = jc.data_dir;
  // a rollback goes back at most to the oldest version every layer still has a
  // replica of: two replication periods (one of them global) and the window
  so.keep =
      std::max<uint64_t>(cli.stream_keep, 2ull * jc.replicate_every * jc.global_every +
                                              static_cast<uint64_t>(jc.window) + 1);
  so.idle_end_s = cli.stream_idle_end_s;
  auto stream = std::make_shared<actors::sample_stream>(so);
  logger("supervisor")
      ->info("stream {}: batches of {} logged in {} (keeping {}), {} there already",
             cli.stream, jc.batch_size, so.log_dir, so.keep, stream->arrived());
  return stream;
}

// The job's nodes: local ones (--stages), or those of the cluster file
// (none if they cannot all be reached, unless the job is resumed).
std::optional<std::vector<actors::remote_node>>
nodes_of(caf::actor_system& sys, const train_cli& cli,
         const std::vector<actors::cluster_node>& listed, bool resuming) {
  auto log = logger("supervisor");
  if (cli.cluster.empty()) {
    return actors::local_nodes(sys, cli.stages, cli.job.threads);
  }
  log->info("connecting to {} nodes from {}", listed.size(), cli.cluster);
  if (resuming) {
    return connect_for_resume(sys, listed, log);
  }
  auto connected = actors::connect_nodes(sys, listed);
  if (!connected) {
    log->error("{}", sys.render(connected.error()));
    return std::nullopt;
  }
  return std::move(*connected);
}

// The running job's supervisor, for the stop-signal watcher.
class job_handle {
public:
  void set(cluster_actor s) {
    std::lock_guard<std::mutex> lock(mutex_);
    sup_ = std::move(s);
  }
  cluster_actor get() {
    std::lock_guard<std::mutex> lock(mutex_);
    return sup_;
  }

private:
  std::mutex mutex_;
  cluster_actor sup_;
};

// The first SIGINT or SIGTERM stops the job at the next flush (the final
// checkpoint is written, with --save, and the `end` event); a second one
// stops at once. The handler only writes the signal's number to a pipe
// (threads that OpenBLAS starts before main() would take a blocked signal's
// default action; a handler runs on any of them); this, on a thread of its
// own, reads it and asks the job. Returns once end_stop_watch() was called.
void stop_on_signals(caf::actor_system& sys, job_handle& job, progress_line& progress,
                     const std::string& save) {
  auto log = logger("supervisor");
  for (int count = 0;; ++count) {
    int sig = next_stop_signal();
    if (sig == 0) {
      return; // the job is over
    }
    const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    progress.finish();
    if (count > 0) {
      log->error("{} again: stopping at once; nothing more is saved", name);
      std::_Exit(128 + sig);
    }
    log->warn("{}: stopping at the next flush{}; {} again stops at once", name,
              save.empty() ? "" : ", then saving " + save,
              sig == SIGINT ? "Ctrl-C" : "SIGTERM");
    auto sup = job.get();
    if (!sup) {
      log->error("{} before the job started: stopping at once", name);
      std::_Exit(128 + sig);
    }
    // a job too busy to answer is asked again; one that never answers
    // does not keep the process: a signal to stop is never lost
    caf::scoped_actor self{sys};
    bool answered = false;
    for (int ask = 0; ask < 6 && !answered; ++ask) {
      self->request(sup, std::chrono::seconds(10), stop_atom_v, std::string(name))
          .receive(
              [&](std::string& answer) {
                log->info("{}", answer);
                answered = true;
              },
              [&](caf::error& err) {
                log->warn("stop: {}", sys.render(err));
                answered = err != caf::sec::request_timeout;
              });
    }
    if (!answered) {
      log->error("{}: the job did not answer a stop in a minute: stopping at once", name);
      std::_Exit(128 + sig);
    }
  }
}

// --listen: publishes the job's supervisor; the port bound (0: none).
uint16_t publish_supervisor(caf::actor_system& sys, const cluster_actor& sup,
                            const std::string& listen) {
  auto log = logger("supervisor");
  if (listen.empty()) {
    return 0;
  }
  auto [host, port] = actors::parse_address(listen);
  // reuse: a supervisor resumed after a crash binds the same port (its
  // joined nodes offer themselves there again) although the dead one's
  // connections linger in TIME_WAIT; Linux still lets only one listen
  auto bound = actors::publish(sup, port, host, true);
  if (!bound) {
    log->error("cannot listen on {}: {}", listen, sys.render(bound.error()));
    return 0;
  }
  log->info("supervisor listening on {}:{} (salamander console {}:{}; salamander node "
            "--join {}:{})",
            host, *bound, host, *bound, host, *bound);
  return *bound;
}

// What the job's status shows as log lines above the progress line:
// the metrics log, failures, recoveries and plans, each once.
class status_log {
public:
  explicit status_log(progress_line& progress) : progress_(progress) {}

  void operator()(const job_status& s) {
    auto log = logger("supervisor");
    if (!shown_metrics_ && !s.metrics_path.empty()) {
      shown_metrics_ = true;
      log->info("metrics: {} (salamander plot {} -o run.png)", s.metrics_path,
                s.metrics_path);
    }
    // the last failure stays in the status after a recovery, so a failure
    // recovered from between two polls is still reported
    if (!s.error.empty() && s.error != shown_error_ && s.phase != status_phase::failed) {
      shown_error_ = s.error;
      progress_.finish();
      log->warn("FAILURE: {}", s.error);
    }
    if (s.pipeline.recoveries != shown_recoveries_) {
      shown_recoveries_ = s.pipeline.recoveries;
      progress_.finish();
      log->info(
          "RECOVERED in {:.2f} s: rolled back to version {}, {} batches redone so far",
          s.pipeline.last_recovery_s, s.pipeline.rollback_version,
          s.training.redone_batches);
    }
    if (s.pipeline.plan_version != shown_plan_ && !s.plan.empty()) {
      shown_plan_ = s.pipeline.plan_version;
      progress_.finish();
      log->info("plan v{}: {}", s.pipeline.plan_version, s.plan);
    }
    progress_.update(status_fields(s, &eta_), s.finished());
  }

private:
  progress_line& progress_;
  eta_clock eta_; // runs only while the job trains
  int64_t shown_recoveries_ = 0;
  std::string shown_error_;
  bool shown_metrics_ = false;
  int64_t shown_plan_ = 0;
};

// Runs the job, with its progress line, --listen and the stop signals.
actors::job_result run_watched(caf::actor_system& sys, const train_cli& cli,
                               const actors::job_config& jc,
                               const std::vector<actors::remote_node>& nodes,
                               std::shared_ptr<models::dataset> train,
                               std::shared_ptr<models::dataset> test) {
  progress_line progress(logger("supervisor"));
  job_handle job;
  uint16_t listening = 0;
  watch_stop_signals();
  std::thread watcher([&] { stop_on_signals(sys, job, progress, cli.save); });
  auto end_watcher = [&] {
    if (watcher.joinable()) {
      end_stop_watch();
      watcher.join();
    }
  };
  struct at_exit {
    std::function<void()> f;
    ~at_exit() { f(); }
  } watcher_guard{end_watcher}; // (also when the job throws)
  auto dash =
      open_dashboard(sys, cli.dashboard, {cli.secret_file, cli.tls, jc.metrics_path, false, {}});
  actors::job_options opts;
  opts.fetch_weights = !cli.save.empty();
  opts.on_start = [&](cluster_actor s) {
    job.set(s);
    if (dash) {
      dash->attach(s);
    }
    listening = publish_supervisor(sys, s, cli.listen);
  };
  status_log show(progress);
  opts.on_status = [&](const job_status& s) { show(s); };
  auto result = actors::run_job(sys, jc, nodes, std::move(train), std::move(test), opts);
  if (dash) {
    dash->show_final(result.status);
  }
  end_watcher();
  progress.finish();
  if (listening != 0) {
    actors::unpublish(job.get(), listening);
  }
  return result;
}

// --save: the weights the job ended with, `epoch` epochs trained.
void save_weights(const train_cli& cli, const actors::job_result& result,
                  models::weight_snapshot weights, uint64_t epoch) {
  messages::checkpoint ckpt;
  ckpt.snapshot = std::move(weights);
  ckpt.epoch = epoch;
  ckpt.seed = cli.job.seed;
  ckpt.note = fmt::format("pipeline {}, {}", result.status.plan, cli.job.schedule);
  messages::save_checkpoint(cli.save, ckpt);
  logger("supervisor")->info("saved checkpoint {}", cli.save);
}

// The job's outcome, in the log and on stdout; the exit code.
int report(const train_cli& cli, actors::job_result& result) {
  auto log = logger("supervisor");
  auto& s = result.status;
  if (s.phase != status_phase::finished) {
    log->error("job failed: {}", s.error);
    if (!cli.save.empty() && result.weights) {
      // it gave up waiting for nodes: what it kept is saved all the same
      save_weights(cli, result, std::move(*result.weights),
                   s.training.batches > 0
                       ? static_cast<uint64_t>(s.training.committed / s.training.batches)
                       : 0);
    }
    return 1;
  }
  double samples = static_cast<double>(s.training.committed * cli.job.batch_size);
  log->info("{}: {} batches in {:.1f} s ({:.0f} samples/s overall){}",
            s.stopped.empty() ? "done" : "stopped", s.training.committed, s.elapsed_s,
            samples / s.elapsed_s,
            s.test_accuracy >= 0
                ? fmt::format(", test accuracy {:.2f}%", 100.0 * s.test_accuracy)
                : std::string());
  if (s.pipeline.recoveries > 0) {
    log->info(
        "recovered from {} failure(s) without a restart (lost: {}); last rolled back to "
        "version {} and took {:.2f} s; {} batches redone in all",
        s.pipeline.recoveries, fmt::join(s.dead_nodes, ", "), s.pipeline.rollback_version,
        s.pipeline.last_recovery_s, s.training.redone_batches);
    if (!s.training.exact) {
      log->warn("fast recovery policy: the result is NOT exact; lost layers missed {} "
                "(layer, batch) updates",
                s.training.missed_layer_updates);
    }
  }
  if (s.pipeline.replans > 0) {
    log->info("re-planned {} time(s) while training; final plan {}", s.pipeline.replans,
              s.plan);
  }
  std::printf("throughput: %.0f samples/s\n", samples / s.elapsed_s);
  if (s.pipeline.recoveries > 0) {
    std::printf("recoveries: %lld\n", static_cast<long long>(s.pipeline.recoveries));
  }
  if (s.test_accuracy >= 0) {
    std::printf("test accuracy: %.4f\n", s.test_accuracy);
  }
  if (!cli.save.empty() && result.weights) {
    // a stopped job saves the epochs it completed
    save_weights(cli, result, std::move(*result.weights),
                 s.stopped.empty() || s.training.batches <= 0
                     ? static_cast<uint64_t>(cli.job.epochs)
                     : static_cast<uint64_t>(s.training.committed / s.training.batches));
  }
  return 0;
}

} // namespace

int run_pipeline(const train_cli& cli) {
  auto log = logger("supervisor");
  auto desc = check_job(cli, cli.cluster.empty() ? job_place::here : job_place::cluster,
                        actors::memory_available());
  std::vector<actors::cluster_node> listed;
  if (!cli.cluster.empty()) {
    listed =
        actors::read_cluster_file(cli.cluster); // its mistakes before any data is read
  }
  set_threads(cli.job.threads);
  check_blas();
  auto jc = with_run_dir(cli, desc, config_of(cli, desc));
  if (!cli.cluster.empty()) {
    // nodes in this process (--stages) are trusted; remote ones prove the secret
    if (auto secret = actors::load_secret(cli.secret_file)) {
      jc.secret = *secret;
      if (auto w = actors::secret_file_warning(cli.secret_file); !w.empty()) {
        log->warn("{}", w);
      }
    }
  }
  jc.stream = stream_of(cli, jc);
  auto train = std::make_shared<models::dataset>(
      models::load_dataset(jc.dataset, true, desc, jc.data_dir));
  auto test = std::make_shared<models::dataset>(
      models::load_dataset(jc.dataset, false, desc, jc.data_dir));
  caf::actor_system_config cfg;
  actors::system_options sopts;
  // a stopped or cut-off node sends no heartbeats: its connection times out
  sopts.connection_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(cli.hang_timeout_s * 1000));
  actors::configure(cfg, sopts);
  actors::configure_tls(cfg, actors::checked_tls(cli.tls));
  caf::actor_system sys{cfg};
  auto reached = nodes_of(sys, cli, listed, jc.resume != nullptr);
  if (!reached) {
    return 1;
  }
  auto& nodes = *reached;
  log->info("pipeline: model {} ({} layers), {} nodes from {}, schedule {}, {} "
            "micro-batches of a {}-example batch",
            jc.model, desc.layers.size(), nodes.size(),
            cli.cluster.empty() ? "local nodes (embedded)" : cli.cluster, jc.schedule,
            jc.micro_batches, jc.batch_size);
  auto result = run_watched(sys, cli, jc, nodes, std::move(train), std::move(test));
  if (!result.status.metrics_path.empty()) {
    std::printf("metrics: %s\n", result.status.metrics_path.c_str());
  }
  int code = report(cli, result);
  if (cli.cluster.empty()) {
    for (auto& n : nodes) {
      caf::anon_send(n.handle, leave_atom_v);
    }
  }
  auto& s = result.status;
  if (code == 0 && !s.stopped.empty()) {
    log->warn("stopped by {} after {} batches{}", s.stopped, s.training.committed,
              cli.save.empty() ? " (no --save: the weights were not kept)" : "");
    return s.stopped == "SIGTERM" ? 128 + SIGTERM : 128 + SIGINT;
  }
  return code;
}

namespace {

// The training options, shared by train and supervisor.
void add_training_options(CLI::App& sub, train_cli& cli) {
  auto& job = cli.job;
  sub.add_option("--model", job.model, model_help)->capture_default_str();
  add_dataset(sub, job.dataset);
  add_data_dir(sub, job.data_dir,
               "directory with the Fashion-MNIST IDX files (default: $SALAMANDER_DATA, "
               "then /usr/share/datasets/fashion-mnist)");
  sub.add_option("--epochs", job.epochs, "epochs to train")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  sub.add_option("--batch-size", job.batch_size,
                 "examples per batch (one optimizer step)")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  sub.add_option("--micro-batches", job.micro_batches,
                 "micro-batches per batch (gradients accumulate; same maths as a "
                 "pipeline); default 1 on one device, 4 in a pipeline")
      ->check(whole<int64_t>(1));
  sub.add_option("--max-batches", job.max_batches,
                 "stop each epoch after N batches (0: all)")
      ->check(whole<int64_t>(0))
      ->capture_default_str();
  sub.add_option("--optimizer", job.optimizer, "adam or sgd")
      ->check(CLI::IsMember({"adam", "sgd"}))
      ->capture_default_str();
  sub.add_option("--lr", job.lr, "learning rate")
      ->check(number(0, unbounded, true))
      ->capture_default_str();
  sub.add_option("--warmup-batches", job.warmup_batches,
                 "raise the learning rate linearly over the job's first N batches "
                 "(batch b steps at lr x (b+1)/N), as vision transformers are trained; "
                 "0: the full rate from the first batch")
      ->check(whole<uint32_t>(0))
      ->capture_default_str();
  sub.add_option("--seed", job.seed, "seed for weights and data order")
      ->check(whole<uint64_t>(0))
      ->capture_default_str();
  add_threads(sub, job.threads,
              "compute threads for this process (0: LibTorch's default; on 2 cores one "
              "thread trains the CNN fastest)");
  sub.add_option("--save", cli.save, "write a checkpoint here when training ends");
}

// How the pipeline is planned, replicated and recovered.
void add_planning_options(CLI::App& sub, train_cli& cli) {
  auto& job = cli.job;
  sub.add_option("--schedule", job.schedule,
                 "pipeline schedule: gpipe (fill-drain), 1f1b (fewer activations held), "
                 "both flushed every batch; async (FTPipeHD's asynchronous 1F1B: no "
                 "flush, batch b trains on the weights of batch b - d, pipelines only); "
                 "or auto (what the planner predicts faster)")
      ->check(CLI::IsMember({"gpipe", "1f1b", "async", "auto"}))
      ->capture_default_str();
  sub.add_option("--async-delay", job.async_delay,
                 "async schedule: the delay d in batches (each stage keeps d + 1 copies "
                 "of its weights); 0: ceil((stages-1)/micro-batches), at least 1")
      ->capture_default_str();
  sub.add_option("--async-slack", job.async_slack,
                 "async schedule: stage s of S runs S-s-1 forwards before its first "
                 "backward, and up to (K-1)(S-s-1) more as far as d x micro-batches "
                 "allows; 1 is FTPipeHD's bound (S-s micro-batches in flight), 2 "
                 "absorbs message delays of about one operation at the cost of more "
                 "activations held (the planner counts them); the weights are the same "
                 "whatever K")
      ->check(whole<uint32_t>(1))
      ->capture_default_str();
  sub.add_option("--weight-aggregation", job.weight_aggregation,
                 "async schedule: every K updates a stage's newest weights become the mean "
                 "of the versions its batches in flight use (FTPipeHD's weight "
                 "aggregation; it uses 5); 0: off")
      ->capture_default_str();
  sub.add_flag("--no-weight-prediction", cli.no_weight_prediction,
               "async schedule: run batch b on the weights of batch b - d as they were "
               "(FTPipeHD's plain stashing); by default they are moved d steps on by the "
               "optimizer's running direction (Adam's moments, SGD's momentum), where "
               "the batch's update will land (XPipe's weight prediction)");
  sub.add_option("--balance", cli.balance,
                 "layers per stage, e.g. 1,1,2 (default: an even split)");
  sub.add_option("--window", job.window, "batches in flight in the pipeline")
      ->check(whole<int>(1))
      ->capture_default_str();
  sub.add_option("--plan", cli.plan,
                 "auto: profile every node and plan by capacity, as a pipeline or data "
                 "parallel, whichever is predicted faster (slow nodes may be left out); "
                 "pipeline: the same, pipelines only; even: an even split, stage i on "
                 "node i; dp: data parallel, every node holds the model and runs an even "
                 "share of each batch's micro-batches")
      ->check(CLI::IsMember({"auto", "pipeline", "even", "dp"}))
      ->capture_default_str();
  sub.add_option("--dp-reduce", job.dp_reduce,
                 "how data-parallel members sum their gradients: supervisor (each sends "
                 "its gradients to the supervisor, which sends back the sum: two hops, "
                 "but the supervisor's link carries the weights twice per member) or "
                 "chain (node to node along the members in 1 MB chunks: each link "
                 "carries the weights once each way, at 2 x (members - 1) hops; for "
                 "slow links)")
      ->check(CLI::IsMember({"supervisor", "chain"}))
      ->capture_default_str();
  sub.add_option("--replan-gain", job.replan_gain,
                 "re-plan live when profiles predict at least this throughput gain (0: "
                 "never)")
      ->check(number(0, unbounded))
      ->capture_default_str();
  sub.add_option("--replan-at", cli.replan_at,
                 "force a re-plan after this many batches (with --replan-balance, or by "
                 "the planner)")
      ->check(whole<int64_t>(0));
  sub.add_option("--replan-balance", cli.replan_balance,
                 "layers per stage for the forced re-plan, e.g. 1,1,2");
  sub.add_option("--replicate-every", job.replicate_every,
                 "replicate every stage's weights (chain + global) every K batches; 0: "
                 "never (recovery then restarts from the seed)")
      ->check(whole<uint32_t>(0))
      ->capture_default_str();
  add_hang_timeout(sub, cli.hang_timeout_s,
                   "seconds without a heartbeat after which a node counts as hung or cut "
                   "off and is recovered from (nodes send one every second)");
  sub.add_option("--pause-timeout", cli.pause_timeout_s,
                 "seconds a job paused for too little capacity (every node lost, or the "
                 "survivors cannot hold the model) waits for nodes to come back or join; "
                 "then it ends, failed, saving (with --save) the newest complete weights "
                 "it keeps; 0: wait for ever")
      ->check(number(0.0, 86400.0, false, "seconds"))
      ->capture_default_str();
  sub.add_option("--global-every", job.global_every,
                 "of the replications, every G-th also goes to the central (global) "
                 "holder; the others only along the chain (FTPipeHD)")
      ->check(whole<uint32_t>(1))
      ->capture_default_str();
  sub.add_option("--central-link-mbps", job.central_link_mbps,
                 "EMULATION: the link rate of the supervisor's process in Mbit/s; the "
                 "central holder's answers to recovering stages are spaced to it, as a "
                 "node's sends are by its --link-mbps")
      ->check(number(0, unbounded, false, "Mbit/s"));
  sub.add_option("--recovery-policy", job.recovery_policy,
                 "exact: roll back to a replicated version and replay (equals a "
                 "fault-free run); fast: survivors keep their newer weights, lost layers "
                 "come back from their newest replica, nothing replays (not exact)")
      ->check(CLI::IsMember({"exact", "fast"}))
      ->capture_default_str();
}

// The rest of the pipeline options: the job's log, its cluster's secret and
// TLS, and continual learning.
void add_pipeline_options(CLI::App& sub, train_cli& cli) {
  add_planning_options(sub, cli);
  add_metrics(sub, cli.metrics,
              "JSON-lines metrics log of the job (default: "
              "runs/job-DATE-TIME-PID/metrics.jsonl; none: off); see README, Metrics");
  add_secret_file(sub, cli.secret_file,
                  "cluster secret the nodes must prove (default: $SALAMANDER_SECRET; "
                  "none: an open cluster)");
  add_tls(sub, cli.tls);
  add_dashboard(sub, cli.dashboard);
  sub.add_option(
         "--stream", cli.stream,
         "continual learning: train on samples as they arrive, batch after batch "
         "in arrival order, instead of a data set. replay:RATE replays "
         "Fashion-MNIST's training split at RATE samples/s (EMULATED arrival); "
         "file:PATH reads a file as it grows; tcp:HOST:PORT takes a producer's "
         "connection. Records: a label byte and 784 pixel bytes. An epoch is "
         "--max-batches batches of the stream (default 100), evaluated at its end")
      ->check([](const std::string& s) {
        try {
          actors::check_stream_source(s);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  sub.add_option("--stream-log", cli.stream_log,
                 "where the stream's batches are logged for exact replay after a failure "
                 "(default: beside the metrics log; a restarted job given the same "
                 "directory carries on from its last batch)");
  sub.add_option(
         "--stream-keep", cli.stream_keep,
         "batches the stream log keeps behind the newest committed one (raised to "
         "what a rollback can need)")
      ->check(whole<uint64_t>(1))
      ->capture_default_str();
  sub.add_option("--stream-idle-end", cli.stream_idle_end_s,
                 "file and tcp streams end after this many seconds without data (0: "
                 "never; the job then runs its --epochs)")
      ->check(number(0.0, 1e7, false, "seconds"))
      ->capture_default_str();
}

} // namespace

command add_train(CLI::App& app, const std::vector<std::string>& args) {
  auto cli = std::make_shared<train_cli>();
  auto* sub = app.add_subcommand(
      "train", "train a model; on one device unless a pipeline is asked");
  add_training_options(*sub, *cli);
  sub->add_option("--stages", cli->stages,
                  "run a pipeline of N stages on N local nodes in this process (embedded "
                  "mode); without it, train on one device")
      ->check(whole<int>(1));
  sub->add_option("--cluster", cli->cluster,
                  "run a pipeline on the nodes of this cluster file (see deploy/)");
  add_pipeline_options(*sub, *cli);
  return {sub, [cli, sub, given = &args] {
            cli->argv = *given;
            bool pipeline = cli->stages > 0 || !cli->cluster.empty();
            // A pipeline with one micro-batch per batch idles all but one stage.
            if (pipeline && sub->count("--micro-batches") == 0) {
              cli->job.micro_batches = 4;
            }
            if (pipeline) {
              return run_pipeline(*cli);
            }
            if (!cli->stream.empty()) {
              throw std::invalid_argument(
                  "--stream trains a pipeline: give --stages N (1 for one device) or run "
                  "`salamander supervisor --cluster FILE`");
            }
            if (!cli->dashboard.address.empty()) {
              throw std::invalid_argument(
                  "--dashboard shows a job of nodes: give --stages N (1 for one device) or "
                  "run `salamander supervisor --cluster FILE`");
            }
            return run_train(*cli);
          }};
}

command add_supervisor(CLI::App& app, const std::vector<std::string>& args) {
  auto cli = std::make_shared<train_cli>();
  auto* sub = app.add_subcommand(
      "supervisor", "run a pipeline training job on the nodes of a cluster file; takes "
                    "every train option");
  sub->add_option("--cluster", cli->cluster,
                  "cluster file (TOML, [[node]] name + address)")
      ->required()
      ->check(CLI::ExistingFile);
  add_training_options(*sub, *cli);
  sub->add_option(
      "--resume", cli->resume,
      "carry on the job whose supervisor died, from its run directory (where its "
      "metrics log is: runs/job-...); alone, as the job's options are those it "
      "recorded there; the nodes must have kept waiting (node --supervisor-grace). "
      "The same command line again, in the same directory, also carries on a job "
      "whose supervisor died (not one that finished, failed or was stopped)");
  sub->add_option("--listen", cli->listen,
                  "HOST:PORT where `salamander console` attaches and nodes started later "
                  "join the running job (node --join)");
  add_pipeline_options(*sub, *cli);
  return {sub, [cli, sub, given = &args] {
            cli->argv = *given;
            if (sub->count("--micro-batches") == 0) {
              cli->job.micro_batches = 4; // a pipeline: see add_train
            }
            return run_pipeline(*cli);
          }};
}

std::vector<std::string> with_resumed_job(const std::vector<std::string>& args) {
  auto sub = std::find(args.begin(), args.end(), std::string("supervisor"));
  for (auto it = sub; it != args.end(); ++it) {
    std::string dir;
    if (*it == "--resume" && std::next(it) != args.end()) {
      dir = *std::next(it);
    } else if (it->rfind("--resume=", 0) == 0) {
      dir = it->substr(9);
    }
    if (!dir.empty()) {
      return resume_arguments(dir, args);
    }
  }
  return args;
}

namespace {

struct node_cli {
  std::string name;
  std::string listen = "127.0.0.1:0";
  int threads = 1;
  // emulation (tests, benchmarks, trying a cluster on one machine)
  double cpu_share = 1.0;
  int64_t mem_mb = 0;
  double link_mbps = 0;
  std::string capacity_trace;
  bool dilate = false;
  std::string cpus; ///< "0" or "1,2": pin to these host CPUs
  std::string device_type; ///< "": the processor, threads and emulation
  std::string join; ///< a running supervisor to offer this node to
  std::string secret_file;
  std::string tls;      ///< deploy/make-certs.sh's; else $SALAMANDER_TLS; none: off
  std::string data_dir; ///< federated clients here train on this data
  /// Seconds a node whose supervisor went away keeps its stages and replicas
  /// for a supervisor to come back (README, "When the supervisor dies").
  double supervisor_grace_s = 120;
  bool leave_without_supervisor = false; ///< after the grace: exit, not idle
};

struct join_outcome {
  cluster_actor supervisor; ///< invalid: not joined
  std::string outcome;      ///< the supervisor's answer
  std::string error;        ///< why not
  bool unanswered = false;  ///< the offer got no answer in time (may be retried)
  explicit operator bool() const { return static_cast<bool>(supervisor); }
};

// `node --join HOST:PORT`: offers the node to the supervisor listening there.
join_outcome offer_node(caf::actor_system& sys, const node_cli& cli,
                        const caf::actor& node) {
  join_outcome out;
  auto [shost, sport] = actors::parse_address(cli.join);
  if (!actors::port_accepts(shost, sport, std::chrono::seconds(5))) {
    out.error = "nothing accepts connections at " + cli.join;
    return out;
  }
  auto sup = actors::remote_actor<cluster_actor>(sys, shost, sport);
  if (!sup) {
    out.error =
        "supervisor at " + cli.join + " is unreachable: " + sys.render(sup.error());
    return out;
  }
  caf::scoped_actor self{sys};
  self->request(*sup, std::chrono::seconds(30), join_atom_v, node, cli.name)
      .receive(
          [&](std::string& reply) {
            out.outcome = std::move(reply);
            out.supervisor = *sup;
          },
          [&](caf::error& err) {
            out.error = sys.render(err);
            out.unanswered = err == caf::sec::request_timeout;
          });
  return out;
}

// A node that joined is in no cluster file, so a supervisor restarted after
// a crash (`supervisor --resume`) cannot dial it. When the supervisor it
// joined goes away without ending its job, the node offers itself to the
// same address again, every 2 s for --supervisor-grace (the time it keeps
// its stages and replicas for a supervisor to come back). Runs on its own
// thread for the node's life.
void offer_again_after_crash(caf::actor_system& sys, node_cli cli, caf::actor node,
                             cluster_actor sup) {
  auto log = logger("node");
  auto grace = std::chrono::duration<double>(cli.supervisor_grace_s);
  for (;;) {
    caf::error reason;
    {
      caf::scoped_actor self{sys};
      self->monitor(sup);
      self->receive([&](caf::down_msg& dm) { reason = std::move(dm.reason); });
    }
    if (reason == caf::exit_reason::normal || reason == caf::exit_reason::user_shutdown) {
      return; // the job ended and said so: nothing to come back for
    }
    log->warn("node {}: the supervisor at {} that this node joined went away ({}); "
              "offering the node to it again every 2 s for {:.0f} s (--supervisor-grace)",
              cli.name, cli.join, sys.render(reason), grace.count());
    auto until = std::chrono::steady_clock::now() + grace;
    join_outcome again;
    std::string last_error;
    while (!again && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::seconds(2));
      again = offer_node(sys, cli, node);
      if (!again && again.error != last_error) {
        last_error = again.error;
        log->debug("node {}: not joined again yet: {}", cli.name, again.error);
      }
    }
    if (!again) {
      log->warn(
          "node {}: the supervisor at {} did not take this node back within {:.0f} s",
          cli.name, cli.join, grace.count());
      return;
    }
    log->info("node {}: joined again: {}", cli.name, again.outcome);
    sup = again.supervisor;
  }
}

// The device this node emulates (--cpu-share, --mem-mb, ...), its CPUs
// pinned (before CAF starts its threads).
actors::node_emulation emulation_of(const node_cli& cli) {
  actors::node_emulation emulation;
  emulation.config.cpu_share = cli.cpu_share;
  emulation.config.mem_mb = cli.mem_mb;
  emulation.config.link_mbps = cli.link_mbps;
  emulation.config.trace = actors::parse_trace(cli.capacity_trace);
  emulation.config.force_dilation = cli.dilate;
  emulation.config.count_cpu_time = cli.dilate;
  emulation.config.cpus = actors::parse_cpus(cli.cpus);
  actors::pin_to_cpus(emulation.config.cpus);
  emulation.limiter = std::make_shared<actors::cpu_limiter>(emulation.config);
  if (cli.link_mbps > 0) {
    emulation.link = std::make_shared<actors::link_shaper>(cli.link_mbps);
  }
  if (emulation.config.any()) {
    logger("node")->warn("node {} is EMULATING a device: {} (cpu via {})", cli.name,
                         emulation.config.describe(), emulation.limiter->method());
  }
  return emulation;
}

caf::actor_system_config& node_system_config(caf::actor_system_config& cfg,
                                             const node_cli& cli) {
  // CAF's automatic connections would send tensors node to node instead of
  // through the supervisor, but in CAF 0.17.6 two nodes that learn of each
  // other at once connect both ways and can stall the pipeline for good (a
  // chaos seed did, under load): off until we connect neighbours ourselves.
  actors::system_options sopts;
  // A peer that sent a frame header and then stalls (half a frame, or the
  // rest of a huge claimed payload) is dropped after this; every salamander
  // process beats each second. But CAF 0.17 counts a peer as seen only when
  // a whole message has arrived, so a large frame on a slow link must arrive
  // within this too: at 10 s the four ~90 MB stages of the ViT-Base serving
  // test, sent by a TSan-slowed supervisor, were cut off (all four links at
  // once, twice in a row). 60 s is 150 MB at 20 Mbit/s.
  sopts.connection_timeout = std::chrono::seconds(60);
  actors::configure(cfg, sopts);
  actors::configure_tls(cfg, actors::checked_tls(cli.tls));
  return cfg;
}

actors::node_config node_config_of(const node_cli& cli, const std::string& host,
                                   actors::node_emulation emulation) {
  actors::node_config ncfg;
  ncfg.name = cli.name;
  ncfg.host = host;
  if ((host == "0.0.0.0" || host == "::") && !cli.join.empty()) {
    // a supervisor cannot dial "0.0.0.0" back: tell it the address this
    // host reaches it from, so that it takes the node back after a restart
    auto [shost, sport] = actors::parse_address(cli.join);
    if (auto outward = actors::outward_address(shost, sport); !outward.empty()) {
      ncfg.host = outward;
      logger("node")->info("node {} listens on every address; it tells the supervisor "
                           "at {} to dial it at {}",
                           cli.name, cli.join, outward);
    }
  }
  ncfg.threads = cli.threads;
  ncfg.device_type = cli.device_type;
  ncfg.data_dir = cli.data_dir;
  ncfg.emulation = std::move(emulation);
  ncfg.port = std::make_shared<std::atomic<uint16_t>>(0);
  ncfg.supervisor_grace =
      std::chrono::milliseconds(static_cast<int64_t>(cli.supervisor_grace_s * 1000));
  if (cli.leave_without_supervisor) {
    ncfg.leave = [] { ::kill(::getpid(), SIGUSR1); };
  }
  if (auto secret = actors::load_secret(cli.secret_file)) {
    ncfg.secret = *secret;
    if (auto w = actors::secret_file_warning(cli.secret_file); !w.empty()) {
      logger("node")->warn("{}", w);
    }
  } else {
    logger("node")->warn("node {}: no cluster secret set (--secret-file or "
                         "SALAMANDER_SECRET): any supervisor that can reach this node "
                         "can use it",
                         cli.name);
  }
  return ncfg;
}

// A node serves job after job and should go back to its idle size after
// each.
void keep_node_memory_small() {
  // glibc's default raises its mmap threshold to the largest block
  // freed (up to 32 MB): once LibTorch freed its first tensors, later ones
  // came from the per-thread arenas, whose free memory malloc_trim does not
  // give back (measured: 163 MB idle, 212 / 214 / 249 MB after three CNN
  // jobs, two arenas holding 88 MB with 1 MB in use). A fixed threshold
  // keeps blocks of 256 KB and more in their own mappings, returned when
  // freed (163 MB idle, 187 / 188 / 189 MB after the same three jobs, of
  // which 15 MB are LibTorch's code pages the first job touched):
  // keep_freed_memory below fixes it, at 256 KB whenever a job's tensors go.
  //
  // One arena (glibc's default is 8 per core), unless the user set glibc's
  // own tunable. An arena other than the main one gives back the free
  // memory at its top only when one of its chunks is freed, and
  // malloc_trim does not shrink it: a thread that freed nothing after a
  // job's end kept what the job had touched (malloc_stats after a CNN job:
  // six arenas of 64 MB, a few KB in use, 46 MB resident; with three
  // arenas, one run in five still kept 40 MB). The main arena alone is
  // trimmed whole by malloc_trim (measured: 1.6 MB of anonymous memory over
  // idle after the CNN, six runs of six; a 4-stage pipeline of node
  // processes, one stage each, ran at the same samples/s).
  auto tunables = std::getenv("GLIBC_TUNABLES");
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr &&
      (tunables == nullptr || std::strstr(tunables, "arena_max") == nullptr)) {
    mallopt(M_ARENA_MAX, 1);
  }
  actors::keep_freed_memory(true);
}

int run_node(const node_cli& cli) {
  auto log = logger("node");
  keep_node_memory_small();
  // SIGTERM and SIGINT are taken synchronously by this thread (sigwait), so
  // they must be blocked before CAF starts its threads, which inherit the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1); // the node itself: no supervisor came back
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  set_threads(cli.threads);
  auto [host, port] = actors::parse_address(cli.listen);
  auto emulation = emulation_of(cli);
  caf::actor_system_config cfg;
  caf::actor_system sys{node_system_config(cfg, cli)};
  auto ncfg = node_config_of(cli, host, emulation);
  auto n = sys.spawn(actors::node, ncfg);
  // reuse: a node started again on its port after a crash binds it although
  // the old connections linger in TIME_WAIT (it does not let two listen)
  auto bound = actors::publish(n, port, host, true);
  if (!bound) {
    log->error("node {} cannot listen on {}: {}", cli.name, cli.listen,
               sys.render(bound.error()));
    caf::anon_send_exit(n, caf::exit_reason::user_shutdown);
    return 1;
  }
  ncfg.port->store(*bound); // hello tells the supervisor, for neighbours to dial
  // scripts and tests read this line to learn the port
  std::printf("node %s listening on %s:%u\n", cli.name.c_str(), host.c_str(),
              static_cast<unsigned>(*bound));
  std::fflush(stdout);
  log->info("node {} ready ({} compute thread(s)), protocol {}", cli.name, cli.threads,
            protocol_version);
  if (!cli.join.empty()) {
    auto joined = offer_node(sys, cli, caf::actor_cast<caf::actor>(n));
    // A supervisor busy enough (or an answer lost) to leave an offer
    // unanswered is asked again: a second offer of the node it admitted
    // meanwhile is answered "already in the cluster", so retrying is safe.
    for (int offers = 1; !joined && joined.unanswered && offers < 3; ++offers) {
      log->warn("node {}: the supervisor at {} did not answer the offer within 30 s; "
                "offering again",
                cli.name, cli.join);
      joined = offer_node(sys, cli, caf::actor_cast<caf::actor>(n));
    }
    if (!joined) {
      log->error("node {} could not join {}: {}", cli.name, cli.join, joined.error);
      caf::anon_send(n, leave_atom_v);
      actors::unpublish(n, *bound);
      return 1;
    }
    log->info("{}", joined.outcome);
    // (detached: the process ends in _Exit, and a dial may block)
    std::thread(offer_again_after_crash, std::ref(sys), cli,
                caf::actor_cast<caf::actor>(n), joined.supervisor)
        .detach();
  }
  int sig = 0;
  sigwait(&signals, &sig);
  log->info("node {} leaving ({})", cli.name,
            sig == SIGTERM  ? "SIGTERM"
            : sig == SIGINT ? "SIGINT"
                            : "no supervisor came back within --supervisor-grace");
  caf::anon_send(n, leave_atom_v);
  actors::unpublish(n, *bound);
  // Exit without the actor_system's destructor: CAF's automatic-connection
  // helper may wait minutes for a peer that died (actors/system.hpp). The
  // node holds nothing that outlives it; its cgroup is removed here.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  emulation.limiter->release();
  spdlog::shutdown();
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(0);
}

} // namespace

command add_node(CLI::App& app) {
  auto cli = std::make_shared<node_cli>();
  auto* sub = app.add_subcommand(
      "node", "run one device's node: listens for a supervisor and runs the stages it is "
              "given; SIGTERM leaves cleanly");
  sub->add_option("--name", cli->name, "this device's name, as in the cluster file")
      ->required();
  sub->add_option("--listen", cli->listen,
                  "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  add_threads(*sub, cli->threads, "compute threads on this device", 1);
  sub->add_option("--cpu-share", cli->cpu_share,
                  "EMULATION: run at this share of one core (cgroup quota where "
                  "writable, else compute-time dilation)")
      ->check(number(0.001, 1.0));
  sub->add_option(
         "--mem-mb", cli->mem_mb,
         "EMULATION: memory cap; the planner plans with it and stages that would "
         "not fit are refused")
      ->check(whole<int64_t>(0));
  sub->add_option("--link-mbps", cli->link_mbps,
                  "EMULATION: link rate in Mbit/s; sends are spaced to it")
      ->check(number(0, unbounded, false, "Mbit/s"));
  sub->add_option("--capacity-trace", cli->capacity_trace,
                  "EMULATION: SECONDS:FACTOR,... e.g. 30:0.2 runs at 0.2 of the share "
                  "from 30 s on (throttling)");
  sub->add_option("--join", cli->join,
                  "offer this node to the supervisor listening at HOST:PORT (a new "
                  "device, or one back after a failure); it is planned in at the next "
                  "flush. If that supervisor dies, the node offers itself there again "
                  "every 2 s for --supervisor-grace, for a resumed one");
  sub->add_option("--cpus", cli->cpus,
                  "EMULATION: pin this node to these host CPUs, e.g. 0 or 1,2 (devices "
                  "emulated on one host then do not take each other's cores)");
  sub->add_option("--device-type", cli->device_type,
                  "nodes of one type are planned from one profile, the median of "
                  "theirs, so that identical boards get identical shares (default: the "
                  "processor, the CPUs this node may use, --threads and the emulation); "
                  "a name per node plans each from its own profile")
      ->type_name("NAME")
      ->check([](const std::string& name) {
        return name.find_first_not_of(" \t") == std::string::npos
                   ? "must name a type, got '" + name + "'"
                   : std::string();
      });
  sub->add_flag("--dilate", cli->dilate,
                "EMULATION: use compute-time dilation even where a cgroup quota is "
                "possible; the device's time is its CPU time over --cpu-share, at a "
                "share of 1 too (the host's other load is not counted as the device's)");
  add_data_dir(*sub, cli->data_dir,
               "federated learning: clients on this node train on the Fashion-MNIST "
               "training split in this directory (this device's own data) instead of a "
               "shard of the experiment's");
  add_secret_file(*sub, cli->secret_file,
                  "cluster secret to prove to the supervisor (default: "
                  "$SALAMANDER_SECRET); a supervisor that cannot prove it gets no work "
                  "from this node");
  add_tls(*sub, cli->tls);
  sub->add_option("--supervisor-grace", cli->supervisor_grace_s,
                  "seconds this node keeps its stages and replicas after its supervisor "
                  "went away, for it (or `supervisor --resume`) to come back; then it "
                  "drops them")
      ->check(number(0, 86400, false, "seconds"))
      ->capture_default_str();
  sub->add_flag("--leave-without-supervisor", cli->leave_without_supervisor,
                "when the grace is over with no supervisor back, leave (exit 0) instead "
                "of waiting idle for the next one");
  return {sub, [cli] { return run_node(*cli); }};
}

} // namespace salamander::apps
