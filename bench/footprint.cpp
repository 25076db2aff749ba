// footprint: what a node process costs a small device (issue 16, item 2).
//
// Measured on `salamander node` processes started as a user starts them:
//   - the binary's size on disk;
//   - start-up: fork/exec to the "listening" line, median of several starts,
//     beside the same for a program that only loads LibTorch and runs one
//     matmul (bench/libtorch_alone.cpp), so the ratio says what salamander
//     adds to what LibTorch costs anyway;
//   - idle: resident memory (VmRSS) a few seconds after start, beside the
//     LibTorch-alone program's; CPU time and context switches (every thread's
//     voluntary + involuntary: each is a wake-up) over a quiet window;
//   - holding a stage: two nodes run a short training job of the CNN and
//     then of ViT-Small (an even two-stage split, `salamander supervisor`),
//     and each node's peak RSS (VmHWM) is read after the job; its RSS once
//     the job is gone is read too (a node that serves job after job should
//     return near its idle size).
// Devices are not emulated here: these are this host's figures for a node
// process, and the memory ones carry over to a board of the same word size.
#include "actors/elapsed.hpp"
#include "actors/node/node_process.hpp"
#include "bench/benches.hpp"
#include "bench/report.hpp"

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <sys/stat.h>

namespace salamander::bench {

namespace {

using clock_type = std::chrono::steady_clock;

/// A field of /proc/PID/status in kB ("VmRSS", "VmHWM"), or -1.
double status_kb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::stod(line.substr(field.size() + 1));
    }
  }
  return -1;
}

/// Context switches of every thread of `pid`, voluntary and not.
int64_t context_switches(pid_t pid) {
  int64_t total = 0;
  std::error_code ec;
  for (auto& t : std::filesystem::directory_iterator(
           "/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(t.path() / "status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0 ||
          line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) {
        total += std::stoll(line.substr(line.find(':') + 1));
      }
    }
  }
  return total;
}

/// User + system CPU seconds of `pid` (every thread).
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')'); // the command name may hold spaces
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) {
      utime = std::stod(field);
    } else if (i == 15) {
      stime = std::stod(field);
    }
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

/// Starts `args`, waits for its first line on stdout; stops it with the
/// object (SIGTERM, then SIGKILL).
class child {
public:
  explicit child(std::vector<std::string> args) {
    auto name = args[0];
    auto c = actors::spawn_piped(std::move(args), SIGKILL);
    pid_ = c.pid;
    char line[256] = {0};
    bool ok = c.out && std::fgets(line, sizeof line, c.out);
    if (c.out) {
      std::fclose(c.out);
    }
    if (!ok) {
      stop();
      throw std::runtime_error(name + " printed nothing and ended");
    }
  }
  child(const child&) = delete;
  child& operator=(const child&) = delete;
  ~child() { stop(); }
  pid_t pid() const { return pid_; }

private:
  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  pid_t pid_ = -1;
};

/// Waits until the process's RSS has stopped growing (lazy pages, thread
/// stacks) for a second, at most `limit_s`; returns it in MB.
double settled_rss_mb(pid_t pid, double limit_s) {
  auto t0 = clock_type::now();
  double last = status_kb(pid, "VmRSS");
  while (actors::since(t0) < limit_s) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    double now = status_kb(pid, "VmRSS");
    if (std::abs(now - last) < 256) { // within 256 kB
      return now / 1024.0;
    }
    last = now;
  }
  return last / 1024.0;
}

struct idle_figures {
  double cpu_percent = 0;
  double wakeups_per_s = 0;
};

idle_figures idle_over(pid_t pid, double window_s) {
  double cpu0 = cpu_seconds(pid);
  int64_t sw0 = context_switches(pid);
  auto t0 = clock_type::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(window_s));
  double secs = actors::since(t0);
  return {100.0 * (cpu_seconds(pid) - cpu0) / secs,
          static_cast<double>(context_switches(pid) - sw0) / secs};
}

/// Runs `salamander supervisor` over the two nodes; true if it ended well.
bool run_job(const std::string& bin, const std::string& cluster_file, const std::string& model,
             const std::string& balance, int64_t batches, const std::string& log) {
  std::string cmd = bin + " --log-level warn supervisor --cluster " + cluster_file +
                    " --model " + model + " --balance " + balance +
                    " --dataset synthetic --batch-size 32 --micro-batches 4"
                    " --metrics none --max-batches " +
                    std::to_string(batches) + " >" + log + " 2>&1";
  return std::system(cmd.c_str()) == 0;
}

} // namespace

int footprint(const bench_args& args) {
  namespace fs = std::filesystem;
  report r("footprint");
  auto bin = actors::salamander_bin();
  auto alone_bin = (fs::path(bin).parent_path().parent_path() / "bench" /
                    "salamander_libtorch_alone")
                       .string();
  r.detail("emulation", "none: a node process on this host");
  double binary_mb = static_cast<double>(fs::file_size(bin)) / 1e6;
  r.detail("binary_mb", binary_mb);
  std::printf("binary: %.1f MB (%s)\n", binary_mb, bin.c_str());

  // ---- start-up, side by side with LibTorch alone, alternating
  int starts = args.quick ? 3 : 7;
  std::vector<double> node_s, alone_s;
  for (int i = 0; i < starts; ++i) {
    auto t0 = clock_type::now();
    {
      actors::node_process n("fp" + std::to_string(i));
      node_s.push_back(actors::since(t0));
    }
    t0 = clock_type::now();
    {
      child a({alone_bin});
      alone_s.push_back(actors::since(t0));
    }
  }
  r.detail("libtorch_alone_start_s", median(alone_s));
  std::printf("start-up (median of %d): node %.3f s, LibTorch alone %.3f s\n", starts,
              median(node_s), median(alone_s));

  // ---- idle, side by side
  double window = args.quick ? 3 : 10;
  actors::process_cluster nodes(2, "fp");
  child alone({alone_bin});
  // each node is measured against its own idle reading: two nodes started
  // alike still differ by a few hundred kB (thread stacks, connections)
  std::vector<double> idle_rss;
  for (size_t i = 0; i < nodes.nodes().size(); ++i) {
    idle_rss.push_back(settled_rss_mb(nodes[i].pid(), 10));
  }
  double node_rss = idle_rss[0];
  double alone_rss = settled_rss_mb(alone.pid(), 10);
  auto idle = idle_over(nodes[0].pid(), window);
  auto alone_idle = idle_over(alone.pid(), window);
  r.detail("over_idle_measure",
           "each node against its own idle reading (since 2026-12-07)");
  r.detail("node_idle_rss_mb", node_rss);
  r.detail("node2_idle_rss_mb", idle_rss[1]);
  r.detail("node_idle_rss_anon_mb", status_kb(nodes[0].pid(), "RssAnon") / 1024.0);
  r.detail("node_idle_rss_file_mb", status_kb(nodes[0].pid(), "RssFile") / 1024.0);
  r.detail("libtorch_alone_rss_mb", alone_rss);
  r.detail("node_idle_cpu_percent", idle.cpu_percent);
  r.detail("libtorch_alone_wakeups_per_s", alone_idle.wakeups_per_s);
  std::printf("idle: node %.1f MB (the other %.1f MB), LibTorch alone %.1f MB; node CPU %.3f%%, %.2f wake-ups/s "
              "(LibTorch alone %.2f) over %.0f s\n",
              node_rss, idle_rss[1], alone_rss, idle.cpu_percent, idle.wakeups_per_s,
              alone_idle.wakeups_per_s, window);

  // ---- holding a stage: an even two-stage split over both nodes
  scratch_dir scratch("salamander-footprint");
  const auto& dir = scratch.path();
  auto cluster_file = write_cluster_file(dir, nodes.nodes());
  struct job {
    std::string key, model, balance;
  };
  // the most a node holds above idle once a job is gone (goal: 20 MB)
  double after_over_idle = -std::numeric_limits<double>::infinity();
  // ViT-Small: embed, 12 blocks, head
  for (auto& [key, model, balance] : {job{"cnn", "cnn", "2,2"},
                                      job{"vit_small", "vit:size=small", "7,7"}}) {
    auto log = (dir / (key + ".log")).string();
    if (!run_job(bin, cluster_file, model, balance, args.quick ? 5 : 20, log)) {
      std::ifstream in(log);
      std::string text((std::istreambuf_iterator<char>(in)),
                       std::istreambuf_iterator<char>());
      throw std::runtime_error("the " + model + " job failed:\n" + text);
    }
    // VmHWM is a high-water mark since start: the ViT job runs second, so its
    // peak is the larger of the two (ViT-Small's stages are the larger).
    double peak = std::max(status_kb(nodes[0].pid(), "VmHWM"),
                           status_kb(nodes[1].pid(), "VmHWM")) / 1024.0;
    // a node frees its connections' buffers twice after a job, the second
    // time 3.5 s on (actors/node/node.cpp, trim_later): read after it
    std::this_thread::sleep_for(std::chrono::seconds(5));
    // the node that grew most over its own idle reading (a node may also
    // end below it)
    double after = 0;
    double over_idle = -std::numeric_limits<double>::infinity();
    pid_t grew_most = nodes[0].pid();
    for (size_t i = 0; i < idle_rss.size(); ++i) {
      double rss = settled_rss_mb(nodes[i].pid(), 15);
      if (rss - idle_rss[i] > over_idle) {
        over_idle = rss - idle_rss[i];
        after = rss;
        grew_most = nodes[i].pid();
      }
    }
    // what stays on it, by kind: anonymous (heap, buffers) and file-backed
    // (code pages of the libraries the job touched)
    double anon = status_kb(grew_most, "RssAnon") / 1024.0;
    double file = status_kb(grew_most, "RssFile") / 1024.0;
    r.detail("node_stage_peak_rss_mb_" + key, peak);
    r.detail("node_rss_after_job_mb_" + key, after);
    r.detail("node_rss_anon_after_job_mb_" + key, anon);
    r.detail("node_rss_file_after_job_mb_" + key, file);
    r.detail("node_after_job_over_idle_mb_" + key, over_idle);
    after_over_idle = std::max(after_over_idle, over_idle);
    std::printf("holding a stage of %s: peak %.1f MB; %.1f MB once the job is gone, "
                "%.1f MB over its node's idle (anonymous %.1f, file-backed %.1f)\n",
                model.c_str(), peak, after, over_idle, anon, file);
  }

  r.headline("node_start_s", median(node_s));
  r.headline("node_idle_rss_over_libtorch", node_rss / alone_rss);
  r.headline("node_idle_wakeups_per_s", idle.wakeups_per_s);
  r.headline("node_after_job_over_idle_mb", after_over_idle);
  r.headline("node_binary_mb", binary_mb);
  r.finish(args.out);
  return 0;
}

} // namespace salamander::bench
