// The recovery and re-planning decisions of algorithms/recovery.hpp and
// algorithms/replan.hpp, against literal tables.
#include "algorithms/recovery.hpp"
#include "algorithms/replan.hpp"
#include "algorithms/sampling.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>

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

TEST_CASE("a stage's layers come from its own node first, then spread over the nearest "
          "replicas so that the pulls end soonest",
          "[unit][recovery]") {
  std::vector<recovery_source> found = {
      holder(9, {{0, 10}, {1, 10}, {2, 10}, {3, 10}}, true), // central
      holder(1, {{0, 10}, {1, 10}, {2, 10}, {3, 10}}),       // node 1's holder
      stage(2, 1, 2, {{1, 10}}),                             // a survivor on node 2
  };
  std::vector<int64_t> mb(4, 1'000'000);
  auto sources_of = [](const std::optional<std::vector<layer_pick>>& picks) {
    std::vector<size_t> out;
    for (auto& p : *picks) {
      CHECK(p.version == 10);
      out.push_back(p.source);
    }
    return out;
  };
  using v = std::vector<size_t>;
  // equal links: the three sources share the layers (the survivor has only
  // layer 1), a node's copy before the central one on a tie
  CHECK(sources_of(spread_pulls(found, 0, 4, 10, 5, mb, {1e6, 1e6, 1e6})) ==
        v{1, 2, 0, 1});
  // the stage's own node serves what it has, whatever the links
  CHECK(sources_of(spread_pulls(found, 0, 2, 10, 2, mb, {1e6, 1e6, 1e6})) == v{1, 2});
  CHECK(sources_of(spread_pulls(found, 0, 2, 10, 1, mb, {1e9, 1e6, 1e9})) == v{1, 1});
  // a link 4x faster serves four layers before the slower one takes the
  // fifth: (4 + 1) MB at 4 MB/s would end after 1.25 s, 1 MB at 1 MB/s
  // ends after 1 s
  std::vector<recovery_source> two = {
      holder(9, {{0, 10}, {1, 10}, {2, 10}, {3, 10}, {4, 10}}, true),
      holder(1, {{0, 10}, {1, 10}, {2, 10}, {3, 10}, {4, 10}})};
  std::vector<int64_t> five(5, 1'000'000);
  CHECK(sources_of(spread_pulls(two, 0, 5, 10, 3, five, {1e6, 4e6})) == v{1, 1, 1, 1, 0});
  // a source of unknown rate only when nothing else has the layer
  CHECK(sources_of(spread_pulls(two, 0, 3, 10, 3, five, {0, 1e6})) == v{1, 1, 1});
  CHECK(sources_of(spread_pulls({two[0]}, 0, 2, 10, 3, five, {0})) == v{0, 0});
  // no source at that version
  CHECK_FALSE(spread_pulls(found, 0, 2, 20, 1, mb, {1e6, 1e6, 1e6}));
}

TEST_CASE("pulls merge consecutive layers from one source at one version",
          "[unit][recovery]") {
  std::vector<layer_pick> picks = {
      {0, 10}, {0, 10}, {1, 10}, {1, version_now}, {1, version_now}};
  std::vector<pull> expect = {{0, 4, 6, 10}, {1, 6, 7, 10}, {1, 7, 9, version_now}};
  CHECK(merge_pulls(picks, 4) == expect);
  CHECK(merge_pulls({}, 0).empty());
}

TEST_CASE("a pull is cut into parts of whole layers of at most the part size",
          "[unit][recovery]") {
  std::vector<int64_t> bytes = {10, 30, 20, 50, 5, 5, 100};
  // [1, 7) in parts of 60: 30+20, 50+5+5, 100 alone (larger than a part)
  std::vector<pull> expect = {{2, 1, 3, 7}, {2, 3, 6, 7}, {2, 6, 7, 7}};
  CHECK(split_pull({2, 1, 7, 7}, bytes, 60) == expect);
  // every layer alone once parts are smaller than any; one part when all fit
  CHECK(split_pull({0, 0, 7, 1}, bytes, 1).size() == 7);
  CHECK(split_pull({0, 0, 7, 1}, bytes, 220) == std::vector<pull>{{0, 0, 7, 1}});
  CHECK(split_pull({0, 3, 3, 1}, bytes, 60).empty());
  CHECK_THROWS_WITH(split_pull({0, 5, 8, 1}, bytes, 60),
                    "a pull of layers 5..8 from a model of 7 layers");
  CHECK_THROWS_AS(split_pull({0, 0, 2, 1}, bytes, 0), std::invalid_argument);
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
  CHECK(pairs_to_dial({2, 0, 3}, {}, yes, yes) == pairs{{0, 2}, {0, 3}});
  CHECK(pairs_to_dial({2, 0, 3}, {{0, 2}}, yes, yes) == pairs{{0, 3}});
  CHECK(pairs_to_dial({1, 2, 1, 2}, {}, yes, yes) == pairs{{1, 2}});
  CHECK(pairs_to_dial({0, 0, 1}, {}, yes, yes) == pairs{{0, 1}});
  // data-parallel members too: they sum their gradients along the chain
  CHECK(pairs_to_dial({0, 1, 2}, {}, yes, yes) == pairs{{0, 1}, {1, 2}});
  std::vector<bool> in_process = {false, true, true, true, true}; // node 0 cannot dial
  CHECK(pairs_to_dial({0, 1, 2}, {}, in_process, yes) == pairs{{1, 2}});
  std::vector<bool> no_address = {true, true, false, true, true}; // node 2 has no address
  CHECK(pairs_to_dial({0, 1, 2}, {}, yes, no_address) == pairs{{0, 1}});
}

namespace {

// A look at commit `committed`: the plan that runs is predicted at
// `current` s per batch, the alternatives the planner weighs at `alts`.
// The job passes the best of them and the prediction, at this look, of the
// candidate it remembers.
replan_inputs look(uint64_t committed, double current,
                   const std::map<std::string, double>& alts,
                   const replan_memory& memory) {
  replan_inputs in;
  in.committed = committed;
  in.current_s = current;
  in.min_gain = 0.15;
  in.min_batches = 20;
  in.window = 8;
  in.look_every_s = 0; // (every call is a look: these tests step by commits)
  for (auto& [name, t] : alts) {
    if (t < current && (in.best_s == 0 || t < in.best_s)) {
      in.best_s = t;
      in.best_plan = name;
    }
  }
  if (auto it = alts.find(memory.candidate); it != alts.end()) {
    in.candidate_s = it->second;
  }
  return in;
}

// A uniform draw in [-width, width].
double noise(splitmix64& g, double width) {
  return width * (2 * g.unit() - 1);
}

} // namespace

TEST_CASE("re-plans are weighed every half second of wall time, once measurements settled",
          "[unit][replan]") {
  replan_memory none;
  auto in = look(0, 1.0, {{"b", 0.8}}, none);
  in.look_every_s = 0.5;
  // (committed, seconds now, seconds at the last look; -1: none) -> due?
  struct row {
    uint64_t committed;
    double now_s, last_look_s;
    bool due;
  };
  std::vector<row> table = {
      {5, 100, -1, false},    // measurements not settled: 20 commits first
      {19, 100, -1, false},   //
      {20, 100, -1, true},    // never looked: due
      {20, 100.2, 100, false}, // 0.2 s since the last look
      {21, 100.5, 100, true},  // 0.5 s: due, whatever the commits
      {21, 107, 100, true},    // no commit for seconds (a stage slowed 10x): due
      {400, 100.49, 100, false}, // many commits, too soon: not due
  };
  for (auto& r : table) {
    in.committed = r.committed;
    in.now_s = r.now_s;
    in.last_look_s = r.last_look_s;
    INFO("committed " << r.committed << ", now " << r.now_s << ", last look "
                      << r.last_look_s);
    CHECK(replan_check_due(in) == r.due);
  }
  in.last_look_s = 90;
  in.now_s = 100;
  in.last_replan_batch = 20;
  in.committed = 35;
  CHECK_FALSE(replan_check_due(in));
  in.committed = 40;
  CHECK(replan_check_due(in));
  in.look_every_s = 0; // tests that step by commits: every call is due
  in.last_look_s = in.now_s;
  CHECK(replan_check_due(in));
  in.min_gain = 0; // off
  CHECK_FALSE(replan_check_due(in));
  in.min_gain = 0.15;
  in.user_plan = true; // the user's plan holds
  CHECK_FALSE(replan_check_due(in));
}

TEST_CASE(
    "a steady gain re-plans after a window of fresh looks at the candidate, a small one "
    "never",
    "[unit][replan]") {
  // best -> re-plan at the ninth look (one picks the candidate, eight judge it)?
  std::vector<std::pair<double, bool>> table = {
      {0.9, false}, {0.86, false}, {0.84, true}, {0.5, true}, {1.2, false}};
  for (auto [best, expect] : table) {
    INFO("best " << best);
    replan_memory memory;
    for (int i = 0; i < 8; ++i) {
      CHECK_FALSE(
          decide_replan(look(20 + 5 * i, 1.0, {{"b", best}}, memory), memory).replan());
    }
    auto v = decide_replan(look(60, 1.0, {{"b", best}}, memory), memory);
    CHECK(v.replan() == expect);
    if (expect) {
      CHECK(v.gain == Approx(1 - best));
    }
  }
  // a candidate that no longer fits (no prediction) is replaced
  replan_memory memory;
  for (int i = 0; i < 3; ++i) {
    decide_replan(look(20 + 5 * i, 1.0, {{"b", 0.5}}, memory), memory);
  }
  CHECK(memory.gains.size() == 2);
  decide_replan(look(35, 1.0, {{"c", 0.5}}, memory), memory);
  CHECK(memory.candidate == "c");
  CHECK(memory.gains.empty());
  // the user's plan holds, whatever the gain
  memory.clear();
  for (int i = 0; i < 10; ++i) {
    auto in = look(20 + 5 * i, 1.0, {{"b", 0.1}}, memory);
    in.user_plan = true;
    CHECK_FALSE(decide_replan(in, memory).replan());
  }
}

TEST_CASE("a re-plan must repay its measured cost over the batches ahead",
          "[unit][replan]") {
  auto run = [](double move_cost_s, uint64_t batches_left) {
    replan_memory memory;
    replan_verdict v;
    for (int i = 0; i < 9; ++i) {
      auto in = look(20 + 5 * i, 1.0, {{"b", 0.7}}, memory); // saves 0.3 s a batch
      in.move_cost_s = move_cost_s;
      in.batches_left = batches_left;
      v = decide_replan(in, memory);
    }
    return v.replan();
  };
  CHECK(run(0.05, 1000));
  CHECK(run(15, 1000));       // 0.3 x 200 (the horizon) = 60 >= 3 x 15
  CHECK_FALSE(run(25, 1000)); // 60 < 75
  CHECK_FALSE(run(1, 5));     // 1.5 s saved in the 5 batches left < 3 s
}

TEST_CASE("constant capacity with 30% noise never re-plans over thousands of looks",
          "[unit][replan]") {
  // Every look predicts the plan that runs and three alternatives, each
  // around the same true batch time (1 s) with independent +/-30% noise;
  // the best of them (biased towards a gain, as a planner's choice is) is
  // what the job sees.
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
    splitmix64 g(seed);
    replan_memory memory;
    int replans = 0, looks = 0;
    double biggest_gain = 0;
    for (uint64_t committed = 20; committed < 20 + 5 * 4000; committed += 5) {
      double current = 1.0 + noise(g, 0.3);
      std::map<std::string, double> alts;
      for (int c = 0; c < 3; ++c) {
        alts["alt" + std::to_string(c)] = 1.0 + noise(g, 0.3);
      }
      auto v = decide_replan(look(committed, current, alts, memory), memory);
      biggest_gain = std::max(biggest_gain, v.gain);
      replans += v.replan() ? 1 : 0;
      looks++;
    }
    INFO("seed " << seed << ": largest single-look gain " << biggest_gain);
    CHECK(looks == 4000);
    CHECK(biggest_gain > 0.4); // the noise alone shows big gains at single looks
    CHECK(replans == 0);
  }
}

TEST_CASE("a sustained 5x slow-down re-plans within a bounded number of looks",
          "[unit][replan]") {
  // Before: as above. From commit 500 the plan that runs takes 5x longer
  // (its fastest device slowed); the plan that moves work off it (alt0) is
  // predicted at 1.6 s, the others keep the slow device busy; the same
  // +/-30% noise on everything.
  for (uint64_t seed : {5u, 6u, 7u, 8u, 9u, 10u}) {
    splitmix64 g(seed);
    replan_memory memory;
    int64_t replanned_at = -1, replans_before = 0;
    for (uint64_t committed = 20; committed < 1000 && replanned_at < 0; committed += 5) {
      bool slow = committed >= 500;
      double current = (slow ? 5.0 : 1.0) * (1.0 + noise(g, 0.3));
      std::map<std::string, double> alts;
      for (int c = 0; c < 3; ++c) {
        double scale = !slow ? 1.0 : c == 0 ? 1.6 : 5.0;
        alts["alt" + std::to_string(c)] = scale * (1.0 + noise(g, 0.3));
      }
      auto v = decide_replan(look(committed, current, alts, memory), memory);
      if (v.replan()) {
        if (slow) {
          replanned_at = static_cast<int64_t>(committed);
          CHECK(memory.candidate == "alt0");
        } else {
          replans_before++;
        }
      }
    }
    INFO("seed " << seed);
    CHECK(replans_before == 0);
    REQUIRE(replanned_at >= 500);
    // at worst a window that began before the slow-down is judged, then a
    // pick and a whole window after it: 2 x 8 + 1 looks, 5 commits apart
    CHECK(replanned_at <= 500 + 5 * (2 * 8 + 1));
  }
}

TEST_CASE("a candidate must look better for a sustained time, not only for enough looks",
          "[unit][replan]") {
  // fast batches: a look every 0.1 s; the window asks for 10 s
  auto run = [](uint64_t bad_look) {
    replan_memory memory;
    for (uint64_t committed = 20; committed < 2000; committed += 5) {
      auto in = look(committed, 1.0, {{"b", committed == bad_look ? 0.95 : 0.5}}, memory);
      in.sustain_s = 10;
      in.now_s = 0.02 * static_cast<double>(committed);
      if (decide_replan(in, memory).replan()) {
        return static_cast<int64_t>(committed);
      }
    }
    return int64_t{-1};
  };
  // picked at commit 20 (0.4 s): judged once 10 s have passed (commit 520)
  CHECK(run(0) == 520);
  // one bad look within those 10 s and the candidate starts again
  CHECK(run(300) > 520);
}

TEST_CASE("a model that mispredicted the last re-plan must promise more",
          "[unit][replan]") {
  auto run = [](double prediction_error) {
    replan_memory memory;
    replan_verdict v;
    for (int i = 0; i < 9; ++i) {
      auto in = look(20 + 5 * i, 1.0, {{"b", 0.7}}, memory); // 30% faster predicted
      in.prediction_error = prediction_error;
      v = decide_replan(in, memory);
    }
    return v.replan();
  };
  CHECK(run(1.0));
  CHECK(run(1.2));       // 0.7 x 1.2 = 0.84: still 16% faster
  CHECK_FALSE(run(1.3)); // 0.91: 9%, not enough
  CHECK_FALSE(run(2.0)); // the last one measured at twice its prediction

  // the error fades: its logarithm halves every half-life
  CHECK(faded_error(2.2, 0, 120) == Approx(2.2));
  CHECK(faded_error(2.2, 120, 120) == Approx(std::sqrt(2.2)));
  CHECK(faded_error(2.2, 240, 120) == Approx(std::pow(2.2, 0.25)));
  CHECK(faded_error(2.2, 70, 0) == Approx(2.2)); // no half-life: held in full
  CHECK(faded_error(0.8, 10, 120) == 1.0);       // faster than predicted: no error
  // replan_stability's run of 12-06: a pipeline predicted 33% faster
  // measured 2.2x its prediction; 70 s later another was predicted 46%
  // faster (0.54 s). With the error faded, not forgotten, it is not made.
  CHECK_FALSE(run(faded_error(2.2, 70, 120) * 0.54 / 0.7));
  CHECK(run(faded_error(2.2, 1200, 120) * 0.54 / 0.7)); // twenty minutes on
}

TEST_CASE("a plan measured slower than the one it replaced goes back", "[unit][replan]") {
  replan_memory memory;
  auto in = look(40, 1.0, {{"b", 0.9}}, memory);
  in.last_replan_batch = 20;
  in.replaced_measured_s = 1.0;
  in.measured_s = 1.3; // predicted faster, measured 30% slower
  auto v = decide_replan(in, memory);
  CHECK(v.action == replan_action::revert);
  in.measured_s = 1.1; // within the gain's margin: noise, it stays
  CHECK(decide_replan(in, memory).action == replan_action::keep);
  in.measured_s = 1.3;
  in.replaced_measured_s = 0; // a plan the job started with: nothing to go back to
  CHECK(decide_replan(in, memory).action == replan_action::keep);
  // a device of the replaced plan has slowed since: the model, from what the
  // stages measured since, predicts that plan at 2 s now: it stays
  in.replaced_measured_s = 1.0;
  in.replaced_predicted_s = 2.0;
  CHECK(decide_replan(in, memory).action == replan_action::keep);
  in.replaced_predicted_s = 1.0; // predicted as it measured: back it goes
  CHECK(decide_replan(in, memory).action == replan_action::revert);
}

TEST_CASE("recent capacity moves raise the gain the next re-plan must show",
          "[unit][replan]") {
  // the gain asked after w recent moves: 1 - 0.85^(2^w)
  CHECK(required_gain(0.15, 0) == Approx(0.15));
  CHECK(required_gain(0.15, 1) == Approx(0.2775));
  CHECK(required_gain(0.15, 2) == Approx(0.4780).epsilon(1e-3));
  CHECK(required_gain(0, 3) == 0); // re-planning off stays off

  // a move weighs 1 when made, half as much a half-life later; moves add up
  replan_history moves;
  CHECK(moves.weight_at(50, 120) == 0);
  moves.record(100, 120);
  CHECK(moves.weight_at(100, 120) == Approx(1.0));
  CHECK(moves.weight_at(220, 120) == Approx(0.5));
  moves.record(220, 120);
  CHECK(moves.weight_at(220, 120) == Approx(1.5));
  CHECK(moves.weight_at(460, 120) == Approx(0.375));
  CHECK(moves.weight_at(460, 0) == 0); // no half-life: no damping

  // (recent moves, predicted batch time of the candidate; the plan that
  // runs takes 1 s) -> re-planned after a whole window?
  struct row {
    double recent_moves, best;
    bool replan;
  };
  std::vector<row> table = {
      {0, 0.70, true},    // 30% faster, nothing moved lately
      {1, 0.70, true},    // 30% >= 27.75% after one move
      {1.5, 0.70, false}, // 30% < 37% (two moves, the first 2 minutes ago)
      {2, 0.70, false},   // 30% < 48%
      {2, 0.20, true},    // a 5x slow-down answered all the same
      {4, 0.20, false},   // 80% < 93%: four moves just made
  };
  for (auto& r : table) {
    INFO("recent moves " << r.recent_moves << ", best " << r.best);
    replan_memory memory;
    replan_verdict v;
    for (int i = 0; i < 9; ++i) {
      auto in = look(20 + 5 * i, 1.0, {{"b", r.best}}, memory);
      in.recent_moves = r.recent_moves;
      v = decide_replan(in, memory);
    }
    CHECK(v.replan() == r.replan);
  }
}
