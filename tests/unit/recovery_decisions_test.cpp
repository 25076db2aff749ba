// The recovery and re-planning decisions of algorithms/recovery.hpp and
// algorithms/replan.hpp, against literal tables.
#include "algorithms/recovery.hpp"
#include "algorithms/replan.hpp"

#include <catch2/catch.hpp>

using namespace salamander::algorithms;

namespace {

// A holder on `node` with (layer, version) pairs.
recovery_source holder(size_t node, std::vector<std::pair<uint64_t, uint64_t>> held,
                       bool central = false) {
  recovery_source s;
  s.node = node;
  s.central = central;
  s.held = std::move(held);
  return s;
}

// A surviving stage on `node` that ran [begin, end) and kept these snapshots.
recovery_source stage(size_t node, uint64_t begin, uint64_t end,
                      std::vector<std::pair<uint64_t, uint64_t>> held) {
  auto s = holder(node, std::move(held));
  s.stage = true;
  s.begin = begin;
  s.end = end;
  return s;
}

} // namespace

TEST_CASE("rollback picks the newest version every layer has", "[unit][recovery]") {
  // 3 layers; version 20 lacks layer 2 (its holder died), 10 is complete
  std::vector<recovery_source> found = {
      holder(9, {{0, 10}, {1, 10}, {2, 10}, {0, 20}, {1, 20}}, true),
      holder(1, {{0, 20}}),
  };
  CHECK(rollback_version(found, 3, 25) == 10);
  found.push_back(stage(2, 2, 3, {{2, 20}})); // a survivor kept layer 2 at 20
  CHECK(rollback_version(found, 3, 25) == 20);
}

TEST_CASE("rollback ignores versions past the commit and falls back to the seed",
          "[unit][recovery]") {
  // a stage ran ahead to 30 before the failure; 30 is not committed
  std::vector<recovery_source> found = {holder(0, {{0, 30}, {1, 30}})};
  CHECK(rollback_version(found, 2, 25) == 0);
  CHECK(rollback_version(found, 2, 30) == 30);
  CHECK(rollback_version({}, 4, 100) == 0);
  CHECK(rollback_version({holder(0, {{0, 10}})}, 2, 100) == 0);
}

TEST_CASE("fast policy keeps survivors' weights and takes lost layers' newest replica",
          "[unit][recovery]") {
  // layers 0-1 ran on a survivor; layers 2-3 were lost, replicas at 10 and 20
  std::vector<recovery_source> found = {
      holder(9, {{2, 10}, {3, 10}, {2, 20}}, true),
      stage(0, 0, 2, {{0, 10}, {1, 10}}),
  };
  auto c = fast_sources(found, 4);
  REQUIRE_FALSE(c.missing);
  std::vector<layer_pick> expect = {{1, version_now}, {1, version_now}, {0, 20}, {0, 10}};
  CHECK(c.picks == expect);
  // committed 25: layer 2 misses 5 updates, layer 3 misses 15
  CHECK(missed_updates(c.picks, 25) == 20);
  // a replica newer than the commit misses nothing
  CHECK(missed_updates({{0, 30}}, 25) == 0);
}

TEST_CASE("fast policy names a lost layer that has no copy", "[unit][recovery]") {
  std::vector<recovery_source> found = {stage(0, 0, 2, {}), holder(9, {{3, 10}}, true)};
  auto c = fast_sources(found, 4);
  REQUIRE(c.missing);
  CHECK(*c.missing == 2);
  CHECK(c.picks.empty());
}

TEST_CASE("a layer comes from the stage's own node first, the central holder last",
          "[unit][recovery]") {
  std::vector<recovery_source> found = {
      holder(9, {{0, 10}, {1, 10}}, true), // central
      holder(1, {{0, 10}, {1, 10}}),       // node 1's holder
      stage(2, 1, 2, {{1, 10}}),           // a survivor on node 2
  };
  CHECK(pick_source(found, 0, 10, 1) == std::optional<size_t>(1));
  CHECK(pick_source(found, 1, 10, 2) == std::optional<size_t>(2));
  CHECK(pick_source(found, 1, 10, 5) ==
        std::optional<size_t>(1)); // a neighbour before central
  CHECK(pick_source({found[0]}, 1, 10, 5) == std::optional<size_t>(0));
  CHECK_FALSE(pick_source(found, 1, 20, 1));
}

TEST_CASE("pulls merge consecutive layers from one source at one version",
          "[unit][recovery]") {
  std::vector<layer_pick> picks = {
      {0, 10}, {0, 10}, {1, 10}, {1, version_now}, {1, version_now}};
  std::vector<pull> expect = {{0, 4, 6, 10}, {1, 6, 7, 10}, {1, 7, 9, version_now}};
  CHECK(merge_pulls(picks, 4) == expect);
  CHECK(merge_pulls({}, 0).empty());
}

TEST_CASE("moved bytes count the layers whose node changes", "[unit][recovery]") {
  std::vector<int64_t> bytes = {100, 200, 300, 400};
  // node 0 held [0,2), node 1 [2,4); now node 0 holds [0,3), node 2 [3,4)
  auto moved = moved_bytes({{0, 2}, {2, 4}}, {0, 1}, {{0, 3}, {3, 4}}, {0, 2}, bytes, 3);
  CHECK(moved == (300 + 400) * 3);
  CHECK(moved_bytes({{0, 4}}, {0}, {{0, 4}}, {0}, bytes, 2) == 0);
  // same ranges, stages swapped between nodes: everything moves
  CHECK(moved_bytes({{0, 2}, {2, 4}}, {0, 1}, {{0, 2}, {2, 4}}, {1, 0}, bytes, 2) ==
        2000);
}

TEST_CASE("chain replicas go to the next stage's node, the last to the central holder",
          "[unit][recovery]") {
  std::vector<size_t> nodes = {3, 1, 2};
  constexpr size_t central = 99;
  CHECK(chain_holder_node(0, nodes, false, central) == 1);
  CHECK(chain_holder_node(1, nodes, false, central) == 2);
  CHECK(chain_holder_node(2, nodes, false, central) == central);
  CHECK(chain_holder_node(0, {4}, false, central) == central);
  // data parallel: the second member's node keeps the (shared) replica
  CHECK(chain_holder_node(0, nodes, true, central) == 1);
  CHECK(chain_holder_node(0, {4}, true, central) == central);
}

TEST_CASE("data-parallel micro-batches go to the member whose block has them",
          "[unit][recovery]") {
  // 5 + 2 + 1 micro-batches over three members (README: 10:4:2:1 devices)
  std::vector<int> split = {5, 2, 1};
  std::vector<size_t> expect = {0, 0, 0, 0, 0, 1, 1, 2};
  for (size_t m = 0; m < expect.size(); ++m) {
    CHECK(member_of_micro(split, m) == expect[m]);
  }
  CHECK(member_of_micro(split, 12) == 2); // past the split: the last member
  CHECK(member_of_micro({0, 3}, 0) == 1); // a member with no share runs nothing
}

TEST_CASE("neighbours dial once, lower node first, only where they can",
          "[unit][recovery]") {
  std::vector<bool> yes(5, true);
  using pairs = std::vector<std::pair<size_t, size_t>>;
  CHECK(pairs_to_dial({2, 0, 3}, false, {}, yes, yes) == pairs{{0, 2}, {0, 3}});
  CHECK(pairs_to_dial({2, 0, 3}, false, {{0, 2}}, yes, yes) == pairs{{0, 3}});
  CHECK(pairs_to_dial({1, 2, 1, 2}, false, {}, yes, yes) == pairs{{1, 2}});
  CHECK(pairs_to_dial({0, 0, 1}, false, {}, yes, yes) == pairs{{0, 1}});
  CHECK(pairs_to_dial({0, 1, 2}, true, {}, yes, yes).empty());
  std::vector<bool> in_process = {false, true, true, true, true}; // node 0 cannot dial
  CHECK(pairs_to_dial({0, 1, 2}, false, {}, in_process, yes) == pairs{{1, 2}});
  std::vector<bool> no_address = {true, true, false, true, true}; // node 2 has no address
  CHECK(pairs_to_dial({0, 1, 2}, false, {}, yes, no_address) == pairs{{0, 1}});
}

TEST_CASE("re-plans are weighed every few commits, once measurements settled",
          "[unit][replan]") {
  replan_inputs in;
  in.current_s = 1.0;
  in.best_s = 0.8; // 20% faster
  in.min_gain = 0.15;
  in.min_batches = 20;
  in.check_every = 5;
  in.last_replan_batch = 0;
  // committed -> re-plan?
  std::vector<std::pair<uint64_t, bool>> table = {{5, false},  {19, false}, {20, true},
                                                  {21, false}, {25, true},  {40, true}};
  for (auto [committed, expect] : table) {
    in.committed = committed;
    INFO("committed " << committed);
    CHECK(decide_replan(in).replan == expect);
  }
  in.last_replan_batch = 20;
  in.committed = 35;
  CHECK_FALSE(decide_replan(in).replan);
  in.committed = 40;
  CHECK(decide_replan(in).replan);
}

TEST_CASE("re-plans need the stated gain, and gain 0 turns them off", "[unit][replan]") {
  replan_inputs in;
  in.committed = 100;
  in.current_s = 1.0;
  // best -> re-plan at 15%?
  std::vector<std::pair<double, bool>> table = {
      {0.9, false}, {0.86, false}, {0.84, true}, {0.5, true}, {1.2, false}, {0.0, false}};
  for (auto [best, expect] : table) {
    in.best_s = best;
    INFO("best " << best);
    CHECK(decide_replan(in).replan == expect);
  }
  in.best_s = 0.5;
  CHECK(decide_replan(in).gain == Approx(0.5));
  in.min_gain = 0;
  CHECK_FALSE(decide_replan(in).replan);
  CHECK_FALSE(replan_check_due(in));
}
