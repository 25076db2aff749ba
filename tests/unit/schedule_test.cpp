#include "algorithms/schedule.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace salamander::algorithms;

namespace {
constexpr auto F = op_kind::forward;
constexpr auto B = op_kind::backward;
} // namespace

TEST_CASE("GPipe clock table for 3 stages and 4 micro-batches", "[unit][schedule]") {
  // the table drawn in schedule.hpp
  std::vector<clocked_op> expect = {
      {0, 0, 0, F}, {1, 0, 1, F}, {1, 1, 0, F}, {2, 0, 2, F}, {2, 1, 1, F}, {2, 2, 0, F},
      {3, 0, 3, F}, {3, 1, 2, F}, {3, 2, 1, F}, {4, 1, 3, F}, {4, 2, 2, F}, {5, 2, 3, F},
      {6, 2, 3, B}, {7, 1, 3, B}, {7, 2, 2, B}, {8, 0, 3, B}, {8, 1, 2, B}, {8, 2, 1, B},
      {9, 0, 2, B}, {9, 1, 1, B}, {9, 2, 0, B}, {10, 0, 1, B}, {10, 1, 0, B}, {11, 0, 0, B},
  };
  auto table = clock_table(schedule_kind::gpipe, 3, 4);
  CHECK(table == expect);
  CHECK(makespan(table) == 12);
}

TEST_CASE("1F1B clock table for 3 stages and 4 micro-batches", "[unit][schedule]") {
  std::vector<clocked_op> expect = {
      {0, 0, 0, F}, {1, 0, 1, F}, {1, 1, 0, F}, {2, 0, 2, F}, {2, 1, 1, F}, {2, 2, 0, F},
      {3, 2, 0, B}, {4, 1, 0, B}, {4, 2, 1, F}, {5, 0, 0, B}, {5, 1, 2, F}, {5, 2, 1, B},
      {6, 0, 3, F}, {6, 1, 1, B}, {6, 2, 2, F}, {7, 0, 1, B}, {7, 1, 3, F}, {7, 2, 2, B},
      {8, 1, 2, B}, {8, 2, 3, F}, {9, 0, 2, B}, {9, 2, 3, B}, {10, 1, 3, B}, {11, 0, 3, B},
  };
  auto table = clock_table(schedule_kind::one_f_one_b, 3, 4);
  CHECK(table == expect);
  CHECK(makespan(table) == 12);
}

TEST_CASE("stage orders run every micro-batch forward then backward once",
          "[unit][schedule]") {
  for (auto kind : {schedule_kind::gpipe, schedule_kind::one_f_one_b}) {
    for (int s = 1; s <= 5; ++s) {
      for (int m = 1; m <= 9; ++m) {
        auto table = clock_table(kind, s, m);
        CHECK(table.size() == static_cast<size_t>(2 * s * m));
        CHECK(makespan(table) == 2 * (m + s - 1));
        for (int st = 0; st < s; ++st) {
          auto order = stage_order(kind, s, m, st);
          std::vector<int> fwd(static_cast<size_t>(m), 0), bwd(static_cast<size_t>(m), 0);
          for (auto& op : order) {
            if (op.op == F) {
              fwd[static_cast<size_t>(op.micro)]++;
            } else {
              REQUIRE(fwd[static_cast<size_t>(op.micro)] == 1); // backward after forward
              bwd[static_cast<size_t>(op.micro)]++;
            }
          }
          CHECK(std::all_of(fwd.begin(), fwd.end(), [](int c) { return c == 1; }));
          CHECK(std::all_of(bwd.begin(), bwd.end(), [](int c) { return c == 1; }));
        }
      }
    }
  }
}

TEST_CASE("1F1B holds fewer activations than GPipe", "[unit][schedule]") {
  CHECK(max_in_flight(schedule_kind::gpipe, 4, 8, 0) == 8);
  CHECK(max_in_flight(schedule_kind::one_f_one_b, 4, 8, 0) == 4);
  CHECK(max_in_flight(schedule_kind::one_f_one_b, 4, 8, 3) == 1);
  CHECK(bubble_fraction_model(4, 8) == Approx(3.0 / 11.0));
}

TEST_CASE("schedules reject bad shapes and names", "[unit][schedule]") {
  CHECK_THROWS_AS(clock_table(schedule_kind::gpipe, 0, 4), std::invalid_argument);
  CHECK_THROWS_AS(stage_order(schedule_kind::gpipe, 2, 4, 2), std::invalid_argument);
  CHECK_THROWS_WITH(parse_schedule("zigzag"), Catch::Contains("zigzag"));
  CHECK(parse_schedule("1f1b") == schedule_kind::one_f_one_b);
}

TEST_CASE("even split and balances", "[unit][schedule]") {
  CHECK(even_split(4, 4) == layer_ranges{{0, 1}, {1, 2}, {2, 3}, {3, 4}});
  CHECK(even_split(7, 3) == layer_ranges{{0, 3}, {3, 5}, {5, 7}});
  CHECK(even_split(5, 1) == layer_ranges{{0, 5}});
  CHECK_THROWS_WITH(even_split(3, 4), Catch::Contains("3 layers into 4 stages"));
  CHECK_THROWS_AS(even_split(3, 0), std::invalid_argument);
  CHECK(ranges_from_balance({1, 1, 2}, 4) == layer_ranges{{0, 1}, {1, 2}, {2, 4}});
  CHECK_THROWS_WITH(ranges_from_balance({3, 0, 2}, 5), Catch::Contains("[3, 0, 2]"));
  CHECK_THROWS_WITH(ranges_from_balance({1, 2}, 4), Catch::Contains("covers 3 layers"));
}
