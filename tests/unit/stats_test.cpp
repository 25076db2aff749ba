// Means over seeds with a Student-t interval (algorithms/stats.hpp).
#include "algorithms/stats.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace salamander::algorithms;

TEST_CASE("a mean over seeds carries its Student-t 95% interval", "[unit][stats]") {
  // 5 values: mean 3, sd sqrt(2.5), t(0.975, 4) = 2.776
  auto m = interval_95({1, 2, 3, 4, 5});
  CHECK(m.n == 5);
  CHECK(m.mean == Approx(3));
  CHECK(m.sd == Approx(1.5811388));
  CHECK(m.high - m.mean == Approx(2.776 * 1.5811388 / std::sqrt(5.0)));
  CHECK(m.mean - m.low == Approx(m.high - m.mean));
  // two values: t(0.975, 1) = 12.706, a wide interval
  auto two = interval_95({10, 12});
  CHECK(two.low == Approx(11 - 12.706 * std::sqrt(2.0) / std::sqrt(2.0)));
  // one value: no interval, and no pretence of one
  auto one = interval_95({7});
  CHECK(one.sd == 0);
  CHECK(one.low == 7);
  CHECK(one.high == 7);
  CHECK_THROWS(interval_95({}));
  CHECK(t_critical_95(30) == Approx(2.042));
  CHECK(t_critical_95(1000) == Approx(1.96));
  CHECK_THROWS(t_critical_95(0));
}

TEST_CASE("an interval clears a goal only when all of it lies on the goal's side",
          "[unit][stats]") {
  mean_interval m;
  m.n = 5;
  m.mean = 2.5;
  m.low = 2.1;
  m.high = 2.9;
  CHECK(verdict(m, {true, 2.0}) == "clears");
  CHECK(verdict(m, {true, 2.5}) == "undecided");
  CHECK(verdict(m, {true, 3.0}) == "misses");
  CHECK(verdict(m, {false, 3.0}) == "clears");
  CHECK(verdict(m, {false, 2.5}) == "undecided");
  CHECK(verdict(m, {false, 2.0}) == "misses");
}
