// The benchmarks of salamander_bench; bench/run.sh NAME runs one.
#pragma once

#include "actors/cluster/cluster_file.hpp"
#include "algorithms/sampling.hpp"
#include "models/data.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sched.h>
#include <stdexcept>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace salamander::bench {

struct bench_args {
  std::string out;    ///< JSON results path
  bool quick = false; ///< fewer rounds, for smoke tests
  /// The run's seed (data split, initialisation, straggler draw) for the
  /// benchmarks that take one (seeded_benches); --seeds N runs 1..N.
  uint64_t seed = 1;
};

/// The benchmarks whose figures vary with bench_args::seed.
inline bool seeded_bench(const std::string& name) {
  return name == "federated" || name == "federated_niid" || name == "federated_fedrs" ||
         name == "federated_aggregation" || name == "split" || name == "async_accuracy" ||
         name == "async_accuracy_vit" || name == "async_accuracy_vit_warmup";
}

/// The mean of the last `n` values (all of them, if fewer; 0 if none): an
/// accuracy over several evaluations, never one point.
inline double mean_of_last(const std::vector<double>& values, size_t n = 5) {
  size_t k = std::min(n, values.size());
  double sum = 0;
  for (size_t i = values.size() - k; i < values.size(); ++i) {
    sum += values[i];
  }
  return k ? sum / static_cast<double>(k) : 0;
}

/// The median: the middle value, or the mean of the two middle ones for an
/// even count; 0 if none.
inline double median(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

inline int64_t algorithms_batches(int64_t n, int64_t batch_size) {
  return algorithms::batches_per_epoch(n, batch_size, false);
}

/// One epoch (or `batches` batches) of the zoo CNN written as a plain
/// LibTorch Sequential, same initial weights and batches as the layered
/// model; seconds.
double plain_epoch_seconds(const models::model_desc& desc, const models::dataset& data,
                           uint64_t seed, int64_t batch_size, int64_t batches, double lr);

/// `salamander node` arguments that EMULATE devices of these CPU shares, one
/// list a node: by a cgroup quota where the host lets us write one (else
/// dilation), or with `dilate` always by compute-time dilation. A quota caps
/// a process's average: a pipeline stage that waits part of the time then
/// computes at a full core's speed, which a slow device does not.
inline std::vector<std::vector<std::string>>
emulated_shares(const std::vector<double>& shares, bool dilate) {
  std::vector<std::vector<std::string>> out;
  for (auto s : shares) {
    out.push_back({"--cpu-share", fmt::format("{}", s)});
    if (dilate) {
      out.back().push_back("--dilate");
    }
  }
  return out;
}
inline std::vector<std::vector<std::string>> quotas(const std::vector<double>& shares) {
  return emulated_shares(shares, false);
}

/// One core's worth of load on the host for as long as this object lives:
/// benchmarks that must hold on a loaded host. `spread` 0: one busy child
/// process, unpinned (the kernel moves it between cores as it likes, so a
/// measurement depends on where it happened to run); N > 0: N children,
/// child i pinned to CPU i, each busy 1/N of the time in 2 ms slices, so
/// that every core carries the same steady load.
class cpu_hog {
public:
  explicit cpu_hog(int spread = 0) {
    int children = std::max(spread, 1);
    for (int i = 0; i < children; ++i) {
      pid_t parent = ::getpid();
      pid_t pid = ::fork();
      if (pid == 0) {
        // dies with the benchmark, however it ends (a crash leaves no hog)
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) {
          ::_exit(0);
        }
        if (spread > 0) {
          cpu_set_t set;
          CPU_ZERO(&set);
          CPU_SET(i, &set);
          ::sched_setaffinity(0, sizeof set, &set);
        }
        spin(spread > 0 ? 1.0 / spread : 1.0);
      }
      pids_.push_back(pid);
    }
  }
  ~cpu_hog() {
    for (auto pid : pids_) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  }
  cpu_hog(const cpu_hog&) = delete;
  cpu_hog& operator=(const cpu_hog&) = delete;

private:
  [[noreturn]] static void spin(double duty) {
    using clock = std::chrono::steady_clock;
    const auto slice = std::chrono::milliseconds(2);
    volatile unsigned long x = 0;
    for (;;) {
      auto until =
          clock::now() + std::chrono::duration_cast<clock::duration>(slice * duty);
      while (clock::now() < until) {
        x = x + 1;
      }
      if (duty < 1.0) {
        std::this_thread::sleep_for(slice * (1.0 - duty));
      }
    }
  }
  std::vector<pid_t> pids_;
};

/// TLS material from deploy/make-certs.sh for `names`, in a temporary
/// directory removed with this object (benchmarks that compare TLS links
/// with plaintext ones).
class bench_certs {
public:
  explicit bench_certs(const std::vector<std::string>& names) {
    char tmpl[] = "/tmp/salamander-bench-certs-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      throw std::runtime_error("cannot make a temporary directory for certificates");
    }
    dir_ = tmpl;
    std::string cmd = SALAMANDER_SOURCE_DIR "/deploy/make-certs.sh -o " + dir_;
    for (auto& n : names) {
      cmd += " " + n;
    }
    cmd += " >/dev/null";
    if (std::system(cmd.c_str()) != 0) {
      throw std::runtime_error("deploy/make-certs.sh failed (is the openssl tool installed?)");
    }
  }
  ~bench_certs() {
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  bench_certs(const bench_certs&) = delete;
  bench_certs& operator=(const bench_certs&) = delete;
  /// the --tls directory of `name`
  std::string of(const std::string& name) const {
    return dir_ + "/" + name;
  }

private:
  std::string dir_;
};

/// Connects to every node of a benchmark's cluster, or throws the error
/// (which names the node that could not be reached). A node process just
/// started under a small quota (0.05 core) can miss the handshake within the
/// system's connection timeout while it is still starting (seen once in
/// `serve`, 2026-12-07), so the connection is tried three times.
inline std::vector<actors::remote_node>
connected_nodes(caf::actor_system& sys, const std::vector<actors::cluster_node>& listed) {
  for (int attempt = 1;; ++attempt) {
    auto nodes = actors::connect_nodes(sys, listed);
    if (nodes) {
      return std::move(*nodes);
    }
    auto why = sys.render(nodes.error());
    if (attempt == 3) {
      throw std::runtime_error(why);
    }
    std::fprintf(stderr, "connecting (attempt %d of 3): %s\n", attempt, why.c_str());
    // (a node still starting may refuse at once rather than time out)
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
}

/// A directory of its own under the system's temporary one (NAME-PID),
/// removed with everything in it when this object goes.
class scratch_dir {
public:
  explicit scratch_dir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              (name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

/// Writes `dir`/cluster.toml naming `nodes` and returns its path.
inline std::string write_cluster_file(const std::filesystem::path& dir,
                                      const std::vector<actors::cluster_node>& nodes) {
  auto path = (dir / "cluster.toml").string();
  std::ofstream f(path);
  for (auto& n : nodes) {
    f << "[[node]]\nname = \"" << n.name << "\"\naddress = \"" << n.host << ":" << n.port
      << "\"\n\n";
  }
  return path;
}

int training_overhead(const bench_args& args);
int codec(const bench_args& args);
int pipeline_overhead(const bench_args& args);
int bubble(const bench_args& args);
int transfer(const bench_args& args);
int planner_speed(const bench_args& args);
int hetero(const bench_args& args);
int recovery(const bench_args& args);
int failure_during_recovery(const bench_args& args);
int recovery_large(const bench_args& args);
int replan_stability(const bench_args& args);
int serve(const bench_args& args);
int serve_failure(const bench_args& args);
int serve_grpc(const bench_args& args);
int federated(const bench_args& args);
int federated_niid(const bench_args& args);
int federated_fedrs(const bench_args& args);
int federated_aggregation(const bench_args& args);
int split(const bench_args& args);
int footprint(const bench_args& args);
int continual(const bench_args& args);
int train_scaling(const bench_args& args);
int async_accuracy(const bench_args& args);
int async_accuracy_vit(const bench_args& args);
int async_accuracy_vit_warmup(const bench_args& args);
int scale(const bench_args& args);
int serve_scale(const bench_args& args);

/// PipeEdge's planning case: the median ms of plan_partition for inference
/// over 16 devices of 4 types (4 of each, within 3% of their type) and
/// `layers` layers, over `instances` random instances; `exact` counts the
/// plans that were exact over the 4 types.
double planner_16dev_4types_ms(size_t layers, int instances, int& exact);

} // namespace salamander::bench
