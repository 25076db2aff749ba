#include "algorithms/schedule.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

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

TEST_CASE("async segments end at multiples of the replication interval",
          "[unit][schedule][async]") {
  // (batch, start, every) -> segment
  struct row {
    uint64_t batch, start, every, first, end;
  };
  for (auto r : std::vector<row>{{0, 0, 10, 0, 10},
                                 {9, 0, 10, 0, 10},
                                 {10, 0, 10, 10, 20},
                                 {13, 12, 10, 12, 20}, // began at 12 (a re-plan)
                                 {25, 12, 10, 20, 30},
                                 {7, 3, 0, 3, UINT64_MAX}}) {
    INFO("batch " << r.batch << " start " << r.start << " every " << r.every);
    CHECK(async_segment(r.batch, r.start, r.every) ==
          std::pair<uint64_t, uint64_t>{r.first, r.end});
  }
  // a segment's first d batches use its first version, then b - d
  // epochs end segments too (the job flushes there to evaluate), as does
  // the job's last batch
  CHECK(async_segment(13, 0, 10, 16, 25) == std::pair<uint64_t, uint64_t>{10, 16});
  CHECK(async_segment(16, 0, 10, 16, 25) == std::pair<uint64_t, uint64_t>{16, 20});
  CHECK(async_segment(22, 0, 10, 16, 25) == std::pair<uint64_t, uint64_t>{20, 25});
  CHECK(async_version(10, 10, 2) == 10);
  CHECK(async_version(11, 10, 2) == 10);
  CHECK(async_version(12, 10, 2) == 10);
  CHECK(async_version(13, 10, 2) == 11);
  CHECK(async_version(13, 10, 0) == 13); // no delay: synchronous
  CHECK(async_delay(1, 4) == 0);
  CHECK(async_delay(4, 4) == 1);
  CHECK(async_delay(4, 1) == 3);
  CHECK(async_delay(5, 2) == 2);
  CHECK_THROWS_WITH(parse_schedule("asink"), Catch::Contains("async"));
  CHECK(parse_schedule("async") == schedule_kind::async);
  CHECK_THROWS_AS(stage_order(schedule_kind::async, 2, 4, 0), std::invalid_argument);
}

TEST_CASE("async rows never need a version a stage has not stepped to, and never deadlock",
          "[unit][schedule][async]") {
  for (int stages = 1; stages <= 6; ++stages) {
    for (int micro = 1; micro <= 5; ++micro) {
      for (uint64_t delay : {async_delay(stages, micro), async_delay(stages, micro) + 1,
                             uint64_t{1}}) {
        for (int slack : {1, 2, 3}) {
          for (uint64_t batches : {1u, 3u, 10u}) {
            INFO(stages << " stages, " << micro << " micro-batches, delay " << delay
                        << ", slack " << slack << ", " << batches << " batches");
            uint64_t first = 5; // a segment that does not start at 0
            for (int s = 0; s < stages; ++s) {
              auto row =
                  async_order(stages, s, micro, first, first + batches, delay, slack);
              REQUIRE(row.size() == 2 * batches * static_cast<uint64_t>(micro));
              std::map<std::pair<uint64_t, int>, int> fwd;
              std::map<uint64_t, int> backwarded; // micro-batches of a batch done
              uint64_t stepped = first;           // the stage's own version
              size_t in_flight = 0, most = 0;
              for (auto& op : row) {
                auto version = async_version(op.batch, first, delay);
                if (op.op == F) {
                  // in order, and at a version this stage has
                  CHECK(fwd.count({op.batch, op.micro}) == 0);
                  fwd[{op.batch, op.micro}] = 1;
                  // (a smaller delay than the rows need would ask for a
                  // version this stage only reaches later)
                  if (delay >= async_delay(stages, micro)) {
                    CHECK(version <= stepped);
                  }
                  most = std::max(most, ++in_flight);
                } else {
                  CHECK(fwd.count({op.batch, op.micro}) == 1);
                  in_flight--;
                  if (++backwarded[op.batch] == micro) {
                    CHECK(op.batch == stepped); // batches step in order
                    stepped++;
                  }
                }
              }
              CHECK(stepped == first + batches);
              // the warm-up and one more; with slack 1, FTPipeHD's
              // batch_diff: at most S - s forwards in flight
              auto warm = async_warmup(stages, s, micro, delay, slack);
              CHECK(warm <= static_cast<uint64_t>(slack * (stages - s - 1)));
              CHECK(warm <= delay * static_cast<uint64_t>(micro));
              CHECK(most == std::min<uint64_t>(warm + 1, batches * micro));
              // each stage runs ahead of the next (equal rows take turns)
              if (s + 1 < stages && delay >= async_delay(stages, micro)) {
                CHECK(warm > async_warmup(stages, s + 1, micro, delay, slack));
              }
              if (slack == 1) {
                CHECK(most <= static_cast<size_t>(stages - s));
              }
            }
            if (delay >= async_delay(stages, micro)) {
              auto table = async_clock_table(stages, micro, batches, delay, slack);
              CHECK(table.size() == 2 * batches * static_cast<uint64_t>(micro * stages));
            }
          }
        }
      }
    }
  }
  CHECK_THROWS_WITH(async_warmup(4, 0, 4, 1, 0), Catch::Contains("at least 1"));
}

TEST_CASE("an async segment idles only at its ends", "[unit][schedule][async]") {
  // 4 stages, 4 micro-batches: a flushed batch takes 2(M+S-1) = 14 clocks
  // for 8 operations a stage; a segment of 10 batches runs back to back
  int stages = 4, micro = 4;
  auto delay = async_delay(stages, micro);
  CHECK(delay == 1);
  int ops = 2 * 10 * micro;
  for (int slack : {1, 2}) {
    INFO("slack " << slack);
    auto table = async_clock_table(stages, micro, 10, delay, slack);
    CHECK(makespan(table) == ops + 2 * (stages - 1));
    double idle = 1.0 - static_cast<double>(ops) / makespan(table);
    CHECK(idle < 0.1);
  }
  CHECK(1.0 - 8.0 / makespan(clock_table(schedule_kind::one_f_one_b, stages, micro)) >
        0.4);
}
