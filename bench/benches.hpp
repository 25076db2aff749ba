// The benchmarks of salamander_bench; bench/run.sh NAME runs one.
#pragma once

#include "actors/cluster/cluster_file.hpp"
#include "algorithms/sampling.hpp"
#include "models/data.hpp"

#include <csignal>
#include <stdexcept>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace salamander::bench {

struct bench_args {
  std::string out;    ///< JSON results path
  bool quick = false; ///< fewer rounds, for smoke tests
};

inline int64_t algorithms_batches(int64_t n, int64_t batch_size) {
  return algorithms::batches_per_epoch(n, batch_size, false);
}

/// One epoch (or `batches` batches) of the zoo CNN written as a plain
/// LibTorch Sequential, same initial weights and batches as the layered
/// model; seconds.
double plain_epoch_seconds(const models::model_desc& desc, const models::dataset& data,
                           uint64_t seed, int64_t batch_size, int64_t batches, double lr);

/// A busy child process (one core's worth of load on the host) for as long
/// as this object lives: benchmarks that must hold on a loaded host.
class cpu_hog {
public:
  cpu_hog() {
    pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      // dies with the benchmark, however it ends (a crash leaves no hog)
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) {
        ::_exit(0);
      }
      volatile unsigned long x = 0;
      for (;;) {
        x = x + 1;
      }
    }
  }
  ~cpu_hog() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  cpu_hog(const cpu_hog&) = delete;
  cpu_hog& operator=(const cpu_hog&) = delete;

private:
  pid_t pid_ = -1;
};

/// Connects to every node of a benchmark's cluster, or throws the error
/// (which names the node that could not be reached).
inline std::vector<actors::remote_node>
connected_nodes(caf::actor_system& sys, const std::vector<actors::cluster_node>& listed) {
  auto nodes = actors::connect_nodes(sys, listed);
  if (!nodes) {
    throw std::runtime_error(sys.render(nodes.error()));
  }
  return std::move(*nodes);
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
int replan_stability(const bench_args& args);

} // namespace salamander::bench
