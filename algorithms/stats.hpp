// Means over repeated runs with their 95% confidence interval (Student t),
// for benchmarks run over several seeds (bench/run.sh NAME --seeds N): a
// claim about accuracy is a mean with its interval, never one run.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace salamander::algorithms {

struct mean_interval {
  size_t n = 0;
  double mean = 0;
  double sd = 0;   ///< sample standard deviation (n - 1); 0 for one value
  double low = 0;  ///< 95% interval: mean -/+ t(0.975, n-1) sd / sqrt(n)
  double high = 0; ///< (one value: low = high = mean, no interval)
};

/// The two-sided 95% critical value of Student's t with `df` degrees of
/// freedom (df >= 1; 1.96 in the limit).
double t_critical_95(size_t df);

/// Mean and 95% interval of `values` (at least one).
mean_interval interval_95(const std::vector<double>& values);

/// A goal on a figure: "at least" or "at most" a bound.
struct goal {
  bool at_least = true;
  double bound = 0;
};

/// Whether the whole interval is on the goal's side: "clears" (low above an
/// at-least bound, high below an at-most one), "misses" (the whole interval
/// on the wrong side), or "undecided" (the bound lies inside the interval).
std::string verdict(const mean_interval& m, const goal& g);

} // namespace salamander::algorithms
