#include "algorithms/stats.hpp"

#include <array>
#include <cmath>
#include <stdexcept>

namespace salamander::algorithms {

double t_critical_95(size_t df) {
  // t(0.975, df), df = 1..30
  static constexpr std::array<double, 30> table = {
      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df == 0) {
    throw std::invalid_argument("Student's t needs at least one degree of freedom");
  }
  if (df <= table.size()) {
    return table[df - 1];
  }
  if (df <= 40) {
    return 2.021;
  }
  if (df <= 60) {
    return 2.000;
  }
  if (df <= 120) {
    return 1.980;
  }
  return 1.960;
}

mean_interval interval_95(const std::vector<double>& values) {
  if (values.empty()) {
    throw std::invalid_argument("no values to average");
  }
  mean_interval m;
  m.n = values.size();
  double sum = 0;
  for (auto v : values) {
    sum += v;
  }
  m.mean = sum / static_cast<double>(m.n);
  m.low = m.high = m.mean;
  if (m.n < 2) {
    return m;
  }
  double ss = 0;
  for (auto v : values) {
    ss += (v - m.mean) * (v - m.mean);
  }
  m.sd = std::sqrt(ss / static_cast<double>(m.n - 1));
  auto half = t_critical_95(m.n - 1) * m.sd / std::sqrt(static_cast<double>(m.n));
  m.low = m.mean - half;
  m.high = m.mean + half;
  return m;
}

std::string verdict(const mean_interval& m, const goal& g) {
  if (g.at_least) {
    return m.low >= g.bound ? "clears" : m.high < g.bound ? "misses" : "undecided";
  }
  return m.high <= g.bound ? "clears" : m.low > g.bound ? "misses" : "undecided";
}

} // namespace salamander::algorithms
