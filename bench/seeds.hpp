// bench/run.sh NAME --seeds N: one run per seed, then each headline
// figure's mean, n and 95% interval (Student t), judged against its goal.
#pragma once

#include "bench/benches.hpp"

#include <functional>
#include <string>

namespace salamander::bench {

/// Runs `run` with seeds 1..`seeds` (each writing NAME.seedK.json beside
/// args.out), then writes args.out: the first seed's results with every
/// headline figure replaced by its mean and joined by KEY_n, KEY_sd,
/// KEY_ci_low, KEY_ci_high, KEY_values and, where the benchmark set a goal,
/// KEY_goal and KEY_verdict (clears, misses, undecided). Prints the means
/// and intervals last. A seed that fails stops the series (its files stay).
/// Seeds below `first_seed` are not run: their NAME.seedK.json, from an
/// earlier series, is read (a series extended from 5 seeds to 10, or one
/// broken off). Only valid when the build that wrote them trains the same
/// figures: the caller vouches for that; the output lists them in
/// seeds_read_not_run.
int run_seeds(const std::string& name, const std::function<int(const bench_args&)>& run,
              const bench_args& args, int seeds, int first_seed = 1);

} // namespace salamander::bench
