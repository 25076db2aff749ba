// The benchmarks of salamander_bench; bench/run.sh NAME runs one.
#pragma once

#include "algorithms/sampling.hpp"
#include "models/data.hpp"

#include <string>

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

int training_overhead(const bench_args& args);
int codec(const bench_args& args);
int pipeline_overhead(const bench_args& args);
int bubble(const bench_args& args);
int transfer(const bench_args& args);
int planner_speed(const bench_args& args);
int hetero(const bench_args& args);
int recovery(const bench_args& args);
int replan_stability(const bench_args& args);

} // namespace salamander::bench
