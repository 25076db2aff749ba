// Federated strategies and width slicing against literal tables. The
// expected values were worked out by hand (index maps, merges, time model)
// or, for the seeded draws, by an independent Python rendering of
// splitmix64 and mix_seed; a change to a pinned draw changes which units
// and clients past rounds used, so it must be deliberate.
#include "algorithms/federated.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

using namespace salamander::algorithms::fed;
using Catch::Matchers::Contains;

namespace {

// conv (4 channels) -> dense (3 units, reads 4 channels x 2 spatial) ->
// head (2 units, never sliced)
model_layout tiny_layout() {
  model_layout m;
  m.layers = {{"conv", 4, true}, {"dense", 3, true}, {"head", 2, false}};
  m.params = {{"conv.weight", {4, 1, 3, 3}, 0, -1, 1}, {"conv.bias", {4}, 0, -1, 1},
              {"dense.weight", {3, 8}, 1, 0, 2},       {"dense.bias", {3}, 1, -1, 1},
              {"head.weight", {2, 3}, 2, 1, 1},        {"head.bias", {2}, 2, -1, 1}};
  return m;
}

// dense (4 units, 2 inputs) -> head (1 unit): small enough to merge by hand
model_layout merge_layout() {
  model_layout m;
  m.layers = {{"dense", 4, true}, {"head", 1, false}};
  m.params = {{"dense.weight", {4, 2}, 0, -1, 1},
              {"dense.bias", {4}, 0, -1, 1},
              {"head.weight", {1, 4}, 1, 0, 1},
              {"head.bias", {1}, 1, -1, 1}};
  return m;
}

// one 16-unit hidden layer: room for random masks to differ
model_layout wide_layout() {
  model_layout m;
  m.layers = {{"hidden", 16, true}, {"out", 2, false}};
  m.params = {{"hidden.weight", {16, 5}, 0, -1, 1},
              {"hidden.bias", {16}, 0, -1, 1},
              {"out.weight", {2, 16}, 1, 0, 1},
              {"out.bias", {2}, 1, -1, 1}};
  return m;
}

flat_params merge_global() {
  return {{1, 2, 3, 4, 5, 6, 7, 8}, {0, 0, 0, 0}, {1, 1, 1, 1}, {0}};
}

// A keeps dense units {0, 1}, B keeps {1, 2}; unit 3 is nobody's.
update update_a() {
  update u;
  u.client = 1;
  u.samples = 1;
  u.keep = 0.25;
  u.kept = {{0, 1}, {0}};
  u.delta = {{1, 2, 3, 4}, {1, 1}, {3, 3}, {3}};
  return u;
}

update update_b() {
  update u;
  u.client = 2;
  u.samples = 1;
  u.keep = 0.75;
  u.kept = {{1, 2}, {0}};
  u.delta = {{5, 5, 7, 7}, {2, 2}, {7, 7}, {7}};
  return u;
}

time_model linear(double full_s) {
  time_model t;
  t.keep = {0.25, 0.5, 1.0};
  t.seconds = {full_s / 4, full_s / 2, full_s};
  return t;
}

// Three similar clients and one 10x slower; full-width epochs 4, 5, 6, 40 s.
std::vector<client_view> four_clients() {
  return {{1, true, 100, linear(4)},
          {2, true, 200, linear(5)},
          {3, true, 300, linear(6)},
          {4, true, 400, linear(40)}};
}

settings two_epochs() {
  settings s;
  s.local_epochs = 2;
  return s;
}

std::vector<double> keeps_of(const round_plan& plan) {
  std::vector<double> v;
  for (const auto& t : plan.tasks) {
    v.push_back(t.keep);
  }
  return v;
}

std::vector<uint32_t> clients_of(const round_plan& plan) {
  std::vector<uint32_t> v;
  for (const auto& t : plan.tasks) {
    v.push_back(t.client);
  }
  return v;
}

} // namespace

TEST_CASE("kept count rounds the fraction up and keeps at least one unit",
          "[unit][federated]") {
  struct row {
    int64_t units;
    double keep;
    int64_t kept;
  };
  const std::vector<row> table = {{4, 1.0, 4},  {4, 0.5, 2},      {4, 0.3, 2},
                                  {4, 0.25, 1}, {4, 0.01, 1},     {4, 0.0, 1},
                                  {3, 0.5, 2},  {3, 1.0 / 3, 1},  {10, 0.7, 7},
                                  {4, 1.5, 4},  {100, 0.0625, 7}, {16, 0.125, 2}};
  for (const auto& r : table) {
    INFO("units " << r.units << " keep " << r.keep);
    CHECK(kept_count(r.units, r.keep) == r.kept);
  }
  CHECK_THROWS_AS(kept_count(0, 0.5), std::invalid_argument);
  CHECK_THROWS_AS(kept_count(4, -0.1), std::invalid_argument);
}

TEST_CASE("a layout counts its elements and lists every unit", "[unit][federated]") {
  auto m = tiny_layout();
  CHECK(m.elements() == 36 + 4 + 24 + 3 + 6 + 2);
  CHECK(all_units(m) == unit_sets{{0, 1, 2, 3}, {0, 1, 2}, {0, 1}});
  CHECK(merge_layout().elements() == 17);
}

TEST_CASE("prefix masks keep the first units of each sliced layer", "[unit][federated]") {
  auto m = tiny_layout();
  CHECK(mask_prefix(m, 1.0) == unit_sets{{0, 1, 2, 3}, {0, 1, 2}, {0, 1}});
  CHECK(mask_prefix(m, 0.5) == unit_sets{{0, 1}, {0, 1}, {0, 1}});
  CHECK(mask_prefix(m, 0.25) == unit_sets{{0}, {0}, {0, 1}});
  CHECK(mask_prefix(m, 0.125) == unit_sets{{0}, {0}, {0, 1}});
  CHECK(mask_prefix(m, 0.75) == unit_sets{{0, 1, 2}, {0, 1, 2}, {0, 1}});
}

TEST_CASE("rolling masks move one unit per round and wrap around", "[unit][federated]") {
  auto m = tiny_layout();
  // keep 0.5: 2 of 4 conv channels, 2 of 3 dense units
  const std::vector<unit_sets> half = {
      {{0, 1}, {0, 1}, {0, 1}}, // round 1
      {{1, 2}, {1, 2}, {0, 1}}, // round 2
      {{2, 3}, {0, 2}, {0, 1}}, // round 3: dense wraps 2, 0
      {{0, 3}, {0, 1}, {0, 1}}, // round 4: conv wraps 3, 0
      {{0, 1}, {1, 2}, {0, 1}}, // round 5
  };
  for (uint64_t r = 1; r <= 5; ++r) {
    INFO("round " << r);
    CHECK(mask_rolling(m, 0.5, r) == half[r - 1]);
  }
  CHECK(mask_rolling(m, 0.5, 0) == half[0]);
  CHECK(mask_rolling(m, 0.75, 4) == unit_sets{{0, 1, 3}, {0, 1, 2}, {0, 1}});
  CHECK(mask_rolling(m, 0.25, 7) == unit_sets{{2}, {0}, {0, 1}});
}

TEST_CASE("random masks are pinned per seed, round and client", "[unit][federated]") {
  auto m = tiny_layout();
  CHECK(mask_random(m, 0.5, 1, 1, 1) == unit_sets{{0, 3}, {1, 2}, {0, 1}});
  CHECK(mask_random(m, 0.5, 1, 2, 1) == unit_sets{{1, 2}, {0, 1}, {0, 1}});
  CHECK(mask_random(m, 0.5, 1, 1, 2) == unit_sets{{0, 2}, {0, 1}, {0, 1}});
  CHECK(mask_random(m, 0.5, 7, 3, 4) == unit_sets{{0, 3}, {0, 1}, {0, 1}});

  auto w = wide_layout();
  CHECK(mask_random(w, 0.25, 1, 1, 1) == unit_sets{{1, 2, 9, 15}, {0, 1}});
  CHECK(mask_random(w, 0.25, 1, 2, 1) == unit_sets{{1, 5, 10, 14}, {0, 1}});
  CHECK(mask_random(w, 0.25, 1, 3, 1) == unit_sets{{6, 9, 11, 15}, {0, 1}});
  CHECK(mask_random(w, 0.25, 1, 1, 2) == unit_sets{{3, 6, 9, 14}, {0, 1}});
}

TEST_CASE("random masks are sorted, distinct, of the kept size and fit the model",
          "[unit][federated]") {
  auto w = wide_layout();
  std::set<int64_t> seen;
  for (uint64_t round = 1; round <= 20; ++round) {
    auto k = mask_random(w, 0.3, 9, round, 3);
    REQUIRE(k.size() == 2);
    CHECK(k[0].size() == 5);
    CHECK(std::is_sorted(k[0].begin(), k[0].end()));
    CHECK(std::adjacent_find(k[0].begin(), k[0].end()) == k[0].end());
    CHECK(k[1] == std::vector<int64_t>{0, 1});
    CHECK(k == mask_random(w, 0.3, 9, round, 3));
    CHECK_NOTHROW(sub_dims(w, k));
    seen.insert(k[0].begin(), k[0].end());
  }
  // fresh draws each round: over 20 rounds every hidden unit gets trained
  CHECK(seen.size() == 16);
}

TEST_CASE("sub-model dims follow the kept units, spatial inputs included",
          "[unit][federated]") {
  auto m = tiny_layout();
  const unit_sets kept = {{1, 3}, {0, 2}, {0, 1}};
  const std::vector<std::vector<int64_t>> want = {{2, 1, 3, 3}, {2},    {2, 4},
                                                  {2},          {2, 2}, {2}};
  CHECK(sub_dims(m, kept) == want);
  const std::vector<std::vector<int64_t>> whole = {{4, 1, 3, 3}, {4},    {3, 8},
                                                   {3},          {2, 3}, {2}};
  CHECK(sub_dims(m, {}) == whole);
}

TEST_CASE("sub-model elements map to their global indices", "[unit][federated]") {
  auto m = tiny_layout();
  const unit_sets kept = {{1, 3}, {0, 2}, {0, 1}};
  // conv.weight: channels 1 and 3, 9 elements each
  CHECK(sub_to_global(m, 0, kept) == std::vector<int64_t>{9, 10, 11, 12, 13, 14, 15, 16,
                                                          17, 27, 28, 29, 30, 31, 32, 33,
                                                          34, 35});
  CHECK(sub_to_global(m, 1, kept) == std::vector<int64_t>{1, 3});
  // dense.weight: rows 0 and 2 of 8 columns; input channels 1 and 3 span
  // columns {2, 3} and {6, 7}
  CHECK(sub_to_global(m, 2, kept) == std::vector<int64_t>{2, 3, 6, 7, 18, 19, 22, 23});
  CHECK(sub_to_global(m, 3, kept) == std::vector<int64_t>{0, 2});
  // head.weight: both rows, dense units 0 and 2 of 3 columns
  CHECK(sub_to_global(m, 4, kept) == std::vector<int64_t>{0, 2, 3, 5});
  CHECK(sub_to_global(m, 5, kept) == std::vector<int64_t>{0, 1});
  CHECK(sub_to_global(m, 3, {}) == std::vector<int64_t>{0, 1, 2});
  CHECK_THROWS_AS(sub_to_global(m, 6, kept), std::invalid_argument);
}

TEST_CASE("params not sliced along a dimension keep it whole", "[unit][federated]") {
  model_layout m;
  m.layers = {{"a", 3, true}, {"out", 2, false}};
  // an embedding-like table whose columns index layer a, rows unsliced
  m.params = {{"table", {2, 3}, -1, 0, 1}, {"scale", {2}, -1, -1, 1}};
  const unit_sets kept = {{0, 2}, {0, 1}};
  CHECK(sub_dims(m, kept) == std::vector<std::vector<int64_t>>{{2, 2}, {2}});
  CHECK(sub_to_global(m, 0, kept) == std::vector<int64_t>{0, 2, 3, 5});
  CHECK(sub_to_global(m, 1, kept) == std::vector<int64_t>{0, 1});
}

TEST_CASE("slicing cuts the kept values out of the global model", "[unit][federated]") {
  auto m = tiny_layout();
  flat_params global;
  for (size_t p = 0; p < m.params.size(); ++p) {
    std::vector<float> v;
    int64_t n = 1;
    for (auto d : m.params[p].dims) {
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) {
      v.push_back(static_cast<float>(100 * static_cast<int64_t>(p) + i));
    }
    global.push_back(v);
  }
  auto sub = slice(m, global, {{1, 3}, {0, 2}, {0, 1}});
  REQUIRE(sub.size() == 6);
  CHECK(sub[0][0] == 9);
  CHECK(sub[0][9] == 27);
  CHECK(sub[1] == std::vector<float>{101, 103});
  CHECK(sub[2] == std::vector<float>{202, 203, 206, 207, 218, 219, 222, 223});
  CHECK(sub[3] == std::vector<float>{300, 302});
  CHECK(sub[4] == std::vector<float>{400, 402, 403, 405});
  CHECK(sub[5] == std::vector<float>{500, 501});
  CHECK(slice(m, global, {}) == global);
  global[3].pop_back();
  CHECK_THROWS_AS(slice(m, global, {}), std::invalid_argument);
}

TEST_CASE("masks that do not fit the model are rejected", "[unit][federated]") {
  auto m = tiny_layout();
  auto ok = sub_dims(m, {{1, 3}, {0, 2}, {0, 1}});
  flat_params values;
  for (const auto& d : ok) {
    int64_t n = 1;
    for (auto x : d) {
      n *= x;
    }
    values.emplace_back(static_cast<size_t>(n), 0.0f);
  }
  CHECK_NOTHROW(check_sub(m, {{1, 3}, {0, 2}, {0, 1}}, values));
  CHECK_THROWS_WITH(check_sub(m, {{0}, {0}}, values), Contains("2 layers"));
  CHECK_THROWS_WITH(check_sub(m, {{1, 4}, {0, 2}, {0, 1}}, values), Contains("unit 4"));
  CHECK_THROWS_WITH(check_sub(m, {{3, 1}, {0, 2}, {0, 1}}, values), Contains("sorted"));
  CHECK_THROWS_WITH(check_sub(m, {{1, 1}, {0, 2}, {0, 1}}, values), Contains("distinct"));
  CHECK_THROWS_WITH(check_sub(m, {{1, 3}, {0, 2}, {0}}, values), Contains("unsliced"));
  CHECK_THROWS_WITH(check_sub(m, {{}, {0, 2}, {0, 1}}, values), Contains("no unit"));
  CHECK_THROWS_WITH(check_sub(m, {{1, 3}, {-1, 2}, {0, 1}}, values), Contains("unit -1"));
  values[2].pop_back();
  CHECK_THROWS_WITH(check_sub(m, {{1, 3}, {0, 2}, {0, 1}}, values),
                    Contains("dense.weight") && Contains("7 values, expected 8"));
  values.pop_back();
  CHECK_THROWS_WITH(check_sub(m, {{1, 3}, {0, 2}, {0, 1}}, values), Contains("5 params"));
}

TEST_CASE("layouts whose params disagree with their layers are rejected",
          "[unit][federated]") {
  auto m = tiny_layout();
  m.params[2].dims = {3, 4}; // forgot the 2 spatial elements per channel
  CHECK_THROWS_WITH(sub_dims(m, {}),
                    Contains("dense.weight") && Contains("dims[1] must be 8"));
  m = tiny_layout();
  m.params[0].out_layer = 5;
  CHECK_THROWS_WITH(sub_dims(m, {}), Contains("out_layer 5"));
}

TEST_CASE("merging averages each element over the clients that held it",
          "[unit][federated]") {
  auto m = merge_layout();
  auto out = weighted_merge(m, merge_global(), {update_a(), update_b()}, {1.0, 3.0});
  // dense unit 0: A only; unit 1: (1 x A + 3 x B) / 4; unit 2: B only;
  // unit 3: nobody, stays global
  const flat_params want = {
      {2, 4, 7.5, 8.75, 12, 13, 7, 8}, {1, 1.75, 2, 0}, {4, 7, 8, 1}, {6}};
  CHECK(out == want);
}

TEST_CASE("an element held only by zero-weight updates keeps its global value",
          "[unit][federated]") {
  auto m = merge_layout();
  auto out = weighted_merge(m, merge_global(), {update_a(), update_b()}, {0.0, 3.0});
  const flat_params want = {{1, 2, 8, 9, 12, 13, 7, 8}, {0, 2, 2, 0}, {1, 8, 8, 1}, {7}};
  CHECK(out == want);
  CHECK(weighted_merge(m, merge_global(), {}, {}) == merge_global());
}

TEST_CASE("merging with a divisor steps by server_lr times the weighted sum",
          "[unit][federated]") {
  auto m = merge_layout();
  // each element: global + 0.5 x (1 x A + 3 x B) / 2
  auto out =
      weighted_merge(m, merge_global(), {update_a(), update_b()}, {1.0, 3.0}, 2, 0.5);
  const flat_params want = {{1.25, 2.5, 7.5, 8.75, 10.25, 11.25, 7, 8},
                            {0.25, 1.75, 1.5, 0},
                            {1.75, 7, 6.25, 1},
                            {6}};
  CHECK(out == want);
}

TEST_CASE("merging rejects bad weights and updates that do not fit",
          "[unit][federated]") {
  auto m = merge_layout();
  auto g = merge_global();
  CHECK_THROWS_WITH(weighted_merge(m, g, {update_a(), update_b()}, {1.0}),
                    Contains("1 weights for 2 updates"));
  CHECK_THROWS_WITH(weighted_merge(m, g, {update_a()}, {-1.0}), Contains("client 1"));
  auto short_delta = update_a();
  short_delta.delta[0].pop_back();
  CHECK_THROWS_AS(weighted_merge(m, g, {short_delta}, {1.0}), std::invalid_argument);
  auto bad_mask = update_a();
  bad_mask.kept = {{0, 4}, {0}};
  CHECK_THROWS_AS(weighted_merge(m, g, {bad_mask}, {1.0}), std::invalid_argument);
  auto whole_but_cut = update_a();
  whole_but_cut.kept = {};
  CHECK_THROWS_AS(weighted_merge(m, g, {whole_but_cut}, {1.0}), std::invalid_argument);
  g[1].push_back(0);
  CHECK_THROWS_WITH(weighted_merge(m, g, {}, {}), Contains("dense.bias"));
}

TEST_CASE("the time model interpolates the profile and scales it", "[unit][federated]") {
  time_model t;
  t.keep = {0.25, 0.5, 1.0};
  t.seconds = {2, 3, 5};
  struct row {
    double fraction;
    double seconds;
  };
  const std::vector<row> table = {{1.0, 5},  {0.75, 4},  {0.5, 3},      {0.375, 2.5},
                                  {0.25, 2}, {0.125, 1}, {0.0625, 0.5}, {1.5, 5}};
  for (const auto& r : table) {
    INFO("fraction " << r.fraction);
    CHECK(t.at(r.fraction) == Approx(r.seconds));
  }
  t.scale = 2;
  CHECK(t.at(0.75) == Approx(8));
  CHECK(t.at(0.125) == Approx(2));
  CHECK(time_model{}.at(0.5) == 0);
  time_model unsorted;
  unsorted.keep = {0.5, 0.25};
  unsorted.seconds = {3, 2};
  CHECK_THROWS_AS(unsorted.at(0.3), std::invalid_argument);
}

TEST_CASE("keep_for finds the largest fraction that fits a time", "[unit][federated]") {
  time_model t;
  t.keep = {0.25, 0.5, 1.0};
  t.seconds = {2, 3, 5};
  struct row {
    double seconds;
    double min_keep;
    double keep;
  };
  const std::vector<row> table = {{10, 0.0625, 1.0},     {5, 0.0625, 1.0},
                                  {4, 0.0625, 0.75},     {3.5, 0.0625, 0.625},
                                  {2.2, 0.0625, 0.3},    {1, 0.0625, 0.125},
                                  {0.5, 0.0625, 0.0625}, {0.1, 0.0625, 0.0625},
                                  {1, 0.5, 0.5},         {4.999, 0.0625, 0.999}};
  for (const auto& r : table) {
    INFO("seconds " << r.seconds << " min_keep " << r.min_keep);
    CHECK(t.keep_for(r.seconds, r.min_keep) == Approx(r.keep));
  }
  t.scale = 2;
  CHECK(t.keep_for(8, 0.0625) == Approx(0.75));
  CHECK(time_model{}.keep_for(0.1, 0.0625) == 1.0);
  CHECK_THROWS_AS(t.keep_for(1, 0), std::invalid_argument);
}

TEST_CASE("observing a round moves the scale halfway to the measured ratio",
          "[unit][federated]") {
  time_model t;
  t.keep = {0.25, 0.5, 1.0};
  t.seconds = {2, 3, 5};
  t.observe(1.0, 2, 20); // predicted 10 s: ratio 2
  CHECK(t.scale == Approx(1.5));
  t.observe(1.0, 2, 20); // still ratio 2 of the unscaled 10 s
  CHECK(t.scale == Approx(1.75));
  t.observe(0.5, 1, 1.5); // unscaled 3 s: ratio 0.5
  CHECK(t.scale == Approx(1.125));
  t.observe(0.5, 1, 0); // no measurement
  CHECK(t.scale == Approx(1.125));
  t.observe(0.5, 0.25, 0.75); // a quarter epoch (partial work): unscaled 0.75 s
  CHECK(t.scale == Approx((1.125 + 1.0) / 2));
  time_model unknown;
  unknown.observe(1.0, 1, 10);
  CHECK(unknown.scale == 1.0);
}

TEST_CASE("client selection takes the available clients or a pinned draw",
          "[unit][federated]") {
  std::vector<client_view> clients = {{3, true, 1, {}},
                                      {1, true, 1, {}},
                                      {4, false, 1, {}},
                                      {2, true, 1, {}},
                                      {5, true, 1, {}}};
  CHECK(select_clients(clients, 1.0, 1, 1) == std::vector<uint32_t>{1, 2, 3, 5});
  const std::vector<std::vector<uint32_t>> half = {
      {2, 3}, {3, 5}, {2, 5}, {3, 5}, {2, 5}};
  for (uint64_t r = 1; r <= 5; ++r) {
    INFO("round " << r);
    CHECK(select_clients(clients, 0.5, 1, r) == half[r - 1]);
  }
  CHECK(select_clients(clients, 0.1, 1, 1).size() == 1);  // at least one
  CHECK(select_clients(clients, 0.75, 1, 1).size() == 3); // round(0.75 x 4)
  std::vector<client_view> ten;
  for (uint32_t id = 1; id <= 10; ++id) {
    ten.push_back({id, true, 1, {}});
  }
  CHECK(select_clients(ten, 0.3, 1, 1) == std::vector<uint32_t>{4, 7, 8});
  CHECK(select_clients(ten, 0.3, 1, 2) == std::vector<uint32_t>{3, 7, 10});
  CHECK(select_clients({{1, false, 1, {}}}, 0.5, 1, 1).empty());
  CHECK_THROWS_AS(select_clients(clients, 0, 1, 1), std::invalid_argument);
}

TEST_CASE("the pace is the median full-width round time plus slack",
          "[unit][federated]") {
  auto clients = four_clients();
  clients.push_back({5, true, 10, {}}); // not profiled: no time
  // 2 epochs: 8, 10, 12, 80 s
  CHECK(pace(clients, {1, 2, 3, 4}, 2, 0.1) == Approx(11 * 1.1)); // even: (10 + 12) / 2
  CHECK(pace(clients, {1, 2, 3}, 2, 0.1) == Approx(10 * 1.1));    // odd: 10
  CHECK(pace(clients, {1, 2, 3, 5}, 2, 0.1) == Approx(10 * 1.1)); // 5 is not known
  CHECK(pace(clients, {4}, 1, 0) == Approx(40));
  CHECK(pace(clients, {5}, 2, 0.1) == 0);
  CHECK(pace(clients, {}, 2, 0.1) == 0);
  CHECK_THROWS_AS(pace(clients, {9}, 2, 0.1), std::invalid_argument);
}

TEST_CASE("heterofl levels are powers of one half, no lower than min_keep's",
          "[unit][federated]") {
  struct row {
    double keep;
    double min_keep;
    double level;
  };
  const std::vector<row> table = {
      {1.0, 0.0625, 1.0},     {1.5, 0.0625, 1.0},     {0.99, 0.0625, 0.5},
      {0.5, 0.0625, 0.5},     {0.499, 0.0625, 0.25},  {0.25 - 1e-12, 0.0625, 0.25},
      {0.151, 0.0625, 0.125}, {0.03, 0.0625, 0.0625}, {0.03, 0.1, 0.0625},
      {0.2, 0.3, 0.25},       {0.1, 1.0, 1.0}};
  for (const auto& r : table) {
    INFO("keep " << r.keep << " min_keep " << r.min_keep);
    CHECK(power_of_half_level(r.keep, r.min_keep) == r.level);
  }
}

TEST_CASE("staleness discounts old updates by 1 / sqrt(1 + tau)", "[unit][federated]") {
  CHECK(staleness_weight(0) == 1.0);
  CHECK(staleness_weight(3) == 0.5);
  CHECK(staleness_weight(15) == 0.25);
  CHECK(staleness_weight(1) == Approx(0.7071067811865476));
  CHECK(staleness_weight(8) == Approx(1.0 / 3));
}

TEST_CASE("strategies are made by name and reject bad settings", "[unit][federated]") {
  CHECK(strategy_names() == std::vector<std::string>{"fedavg", "deadline", "elfish",
                                                     "heterofl", "fedrolex", "fedbuff"});
  for (const auto& n : strategy_names()) {
    auto s = make_strategy(n, settings{});
    CHECK(s->name() == n);
    CHECK(s->asynchronous() == (n == "fedbuff"));
    CHECK(s->buffer_size() == (n == "fedbuff" ? 3u : 0u));
  }
  CHECK_THROWS_WITH(make_strategy("fedprox", settings{}),
                    Contains("fedprox") && Contains("fedavg, deadline, elfish") &&
                        Contains("fedbuff"));
  auto bad = [](auto change) {
    settings s;
    change(s);
    return s;
  };
  CHECK_THROWS_WITH(make_strategy("fedavg", bad([](settings& s) { s.local_epochs = 0; })),
                    Contains("local_epochs"));
  CHECK_THROWS_WITH(make_strategy("fedavg", bad([](settings& s) { s.fraction = 0; })),
                    Contains("fraction"));
  CHECK_THROWS_WITH(make_strategy("fedavg", bad([](settings& s) { s.fraction = 1.5; })),
                    Contains("fraction"));
  CHECK_THROWS_WITH(make_strategy("elfish", bad([](settings& s) { s.min_keep = 0; })),
                    Contains("min_keep"));
  CHECK_THROWS_WITH(make_strategy("elfish", bad([](settings& s) { s.min_keep = 2; })),
                    Contains("min_keep"));
  CHECK_THROWS_WITH(make_strategy("fedbuff", bad([](settings& s) { s.buffer = 0; })),
                    Contains("buffer"));
  CHECK_THROWS_WITH(make_strategy("fedbuff", bad([](settings& s) { s.server_lr = 0; })),
                    Contains("server_lr"));
  CHECK_THROWS_WITH(
      make_strategy("deadline", bad([](settings& s) { s.deadline_s = -1; })),
      Contains("deadline_s"));
}

TEST_CASE("synchronous strategies have no next_task, fedbuff has no rounds",
          "[unit][federated]") {
  auto m = tiny_layout();
  auto clients = four_clients();
  CHECK_THROWS_AS(make_strategy("fedavg", settings{})->next_task(clients[0], 0, m),
                  std::logic_error);
  CHECK_THROWS_AS(make_strategy("fedbuff", settings{})->configure(1, clients, m),
                  std::logic_error);
  CHECK_THROWS_AS(make_strategy("fedavg", settings{})->configure(0, clients, m),
                  std::invalid_argument);
}

TEST_CASE("fedavg trains the whole model everywhere and waits for the slowest",
          "[unit][federated]") {
  auto m = tiny_layout();
  auto s = two_epochs();
  auto plan = make_strategy("fedavg", s)->configure(3, four_clients(), m);
  CHECK(clients_of(plan) == std::vector<uint32_t>{1, 2, 3, 4});
  CHECK(keeps_of(plan) == std::vector<double>{1, 1, 1, 1});
  const std::vector<double> predicted = {8, 10, 12, 80};
  for (size_t i = 0; i < 4; ++i) {
    CHECK(plan.tasks[i].kept.empty());
    CHECK(plan.tasks[i].base_version == 2);
    CHECK(plan.tasks[i].predicted_s == Approx(predicted[i]));
  }
  CHECK(plan.pace_s == Approx(12.1));
  CHECK(plan.wait_s == Approx(3 * 80 + 30));
  s.round_timeout_s = 100;
  CHECK(make_strategy("fedavg", s)->configure(3, four_clients(), m).wait_s == 100);
  s.fraction = 0.5;
  auto half = make_strategy("fedavg", s)->configure(2, four_clients(), m);
  CHECK(clients_of(half) == std::vector<uint32_t>{3, 4});
}

TEST_CASE("deadline ends the round at the pace times the deadline factor",
          "[unit][federated]") {
  auto m = tiny_layout();
  auto s = two_epochs();
  auto plan = make_strategy("deadline", s)->configure(1, four_clients(), m);
  CHECK(keeps_of(plan) == std::vector<double>{1, 1, 1, 1});
  CHECK(plan.pace_s == Approx(12.1));
  CHECK(plan.wait_s == Approx(12.1 * 1.25));
  s.deadline_s = 20;
  CHECK(make_strategy("deadline", s)->configure(1, four_clients(), m).wait_s == 20);
  s.round_timeout_s = 15; // bounds every synchronous round
  CHECK(make_strategy("deadline", s)->configure(1, four_clients(), m).wait_s == 15);
  // no profile: the deadline falls back to fedavg's bound
  std::vector<client_view> unknown = {{1, true, 10, {}}, {2, true, 10, {}}};
  auto blind = make_strategy("deadline", two_epochs())->configure(1, unknown, m);
  CHECK(blind.pace_s == 0);
  CHECK(blind.wait_s == Approx(30));
}

TEST_CASE("elfish narrows the straggler to fit the pace with a random mask",
          "[unit][federated]") {
  auto m = tiny_layout();
  auto elfish = make_strategy("elfish", two_epochs());
  auto plan = elfish->configure(1, four_clients(), m);
  // pace 12.1 s: client 3 (12 s) fits; client 4 needs 80 x f <= 12.1
  CHECK(keeps_of(plan) == std::vector<double>{1, 1, 1, 0.151});
  CHECK(plan.tasks[0].kept.empty());
  CHECK(plan.tasks[2].kept.empty());
  const auto& slow = plan.tasks[3];
  CHECK(slow.predicted_s == Approx(12.08));
  CHECK(slow.predicted_s <= plan.pace_s);
  CHECK(slow.work == 1); // its narrowed round fits: every batch
  CHECK(slow.kept == unit_sets{{3}, {2}, {0, 1}});
  CHECK(plan.pace_s == Approx(12.1));
  CHECK(plan.wait_s == Approx(12.1 * 2 + 10));

  // a slower straggler, wider model: the mask changes between rounds
  auto s = two_epochs();
  s.seed = 5;
  auto w = wide_layout();
  std::vector<client_view> clients = four_clients();
  clients[3].time = linear(20); // 40 s for 2 epochs: keep 0.302 -> 5 of 16
  auto r1 = make_strategy("elfish", s)->configure(1, clients, w).tasks[3];
  auto r2 = make_strategy("elfish", s)->configure(2, clients, w).tasks[3];
  CHECK(r1.keep == Approx(0.302));
  CHECK(r1.kept[0].size() == 5);
  CHECK(r1.kept[0] != r2.kept[0]);
  CHECK(r1.kept == mask_random(w, 0.302, 5, 1, 4));
}

TEST_CASE("a straggler past the pace even at min_keep trains the part of its batches "
          "that fits, unless partial work is off",
          "[unit][federated]") {
  auto m = tiny_layout();
  auto clients = four_clients();
  // mostly fixed overhead: 30 s an epoch at min_keep 0.0625, 40 s at full width
  clients[3].time.keep = {0.0625, 0.25, 1.0};
  clients[3].time.seconds = {30, 32, 40};
  for (std::string name : {"elfish", "heterofl", "fedrolex"}) {
    INFO(name);
    auto plan = make_strategy(name, two_epochs())->configure(1, clients, m);
    const auto& slow = plan.tasks[3];
    CHECK(slow.keep == 0.0625);
    // the pace is 12.1 s; two epochs at min_keep take 60 s
    CHECK(slow.work == Approx(12.1 / 60));
    CHECK(slow.predicted_s == Approx(plan.pace_s));
    for (size_t i = 0; i < 3; ++i) {
      CHECK(plan.tasks[i].work == 1);
    }

    auto s = two_epochs();
    s.partial_work = false;
    auto whole = make_strategy(name, s)->configure(1, clients, m).tasks[3];
    CHECK(whole.keep == 0.0625);
    CHECK(whole.work == 1);
    CHECK(whole.predicted_s == Approx(60));
  }
  // the strategies that never narrow never cut work either
  for (std::string name : {"fedavg", "deadline"}) {
    INFO(name);
    auto plan = make_strategy(name, two_epochs())->configure(1, clients, m);
    CHECK(plan.tasks[3].work == 1);
    CHECK(plan.tasks[3].predicted_s == Approx(80));
  }
}

TEST_CASE("partial work trains ceil(work x batches) of a round, at least one",
          "[unit][federated]") {
  CHECK(work_batches(1, 10, 1.0) == 10);
  CHECK(work_batches(2, 10, 1.0) == 20);
  CHECK(work_batches(2, 10, 0.21) == 5);  // 4.2 -> 5
  CHECK(work_batches(1, 10, 0.3) == 3);   // exactly 3, not 4 from rounding
  CHECK(work_batches(1, 10, 0.001) == 1); // at least one
  CHECK(work_batches(3, 0, 0.5) == 0);    // an empty shard
  CHECK_THROWS_WITH(work_batches(1, 10, 0.0), Catch::Contains("(0, 1]"));
  CHECK_THROWS_WITH(work_batches(1, 10, 1.5), Catch::Contains("(0, 1]"));
}

TEST_CASE("heterofl rounds the straggler down to a power of one half with a prefix",
          "[unit][federated]") {
  auto m = tiny_layout();
  auto plan = make_strategy("heterofl", two_epochs())->configure(1, four_clients(), m);
  CHECK(keeps_of(plan) == std::vector<double>{1, 1, 1, 0.125});
  CHECK(plan.tasks[1].kept.empty());
  CHECK(plan.tasks[3].kept == unit_sets{{0}, {0}, {0, 1}});
  CHECK(plan.tasks[3].predicted_s == Approx(10));
  CHECK(plan.pace_s == Approx(12.1));
  CHECK(plan.wait_s == Approx(12.1 * 2 + 10));

  auto clients = four_clients();
  clients[3].time = linear(20); // keep 0.302 -> level 0.25: 4 of 16
  auto wide =
      make_strategy("heterofl", two_epochs())->configure(1, clients, wide_layout());
  CHECK(wide.tasks[3].keep == 0.25);
  CHECK(wide.tasks[3].kept == unit_sets{{0, 1, 2, 3}, {0, 1}});
}

TEST_CASE("fedrolex rolls the straggler's window forward each round",
          "[unit][federated]") {
  auto m = tiny_layout();
  auto rolex = make_strategy("fedrolex", two_epochs());
  const std::vector<unit_sets> windows = {
      {{0}, {0}, {0, 1}}, {{1}, {1}, {0, 1}}, {{2}, {2}, {0, 1}}, {{3}, {0}, {0, 1}}};
  for (uint64_t r = 1; r <= 4; ++r) {
    INFO("round " << r);
    auto plan = rolex->configure(r, four_clients(), m);
    CHECK(keeps_of(plan) == std::vector<double>{1, 1, 1, 0.125});
    CHECK(plan.tasks[3].kept == windows[r - 1]);
    CHECK(plan.tasks[3].base_version == r - 1);
  }
}

TEST_CASE("synchronous aggregation weights by samples, elfish by samples x keep",
          "[unit][federated]") {
  auto m = merge_layout();
  // samples 1 and 1: a plain average where both trained
  const flat_params by_samples = {
      {2, 4, 7, 8.5, 12, 13, 7, 8}, {1, 1.5, 2, 0}, {4, 6, 8, 1}, {5}};
  for (const auto& n : {"fedavg", "deadline", "heterofl", "fedrolex"}) {
    INFO(n);
    CHECK(make_strategy(n, settings{})
              ->aggregate(m, merge_global(), {update_a(), update_b()}, 4) == by_samples);
  }
  // keep 0.25 and 0.75: weights 1 : 3
  const flat_params by_keep = {
      {2, 4, 7.5, 8.75, 12, 13, 7, 8}, {1, 1.75, 2, 0}, {4, 7, 8, 1}, {6}};
  CHECK(make_strategy("elfish", settings{})
            ->aggregate(m, merge_global(), {update_a(), update_b()}, 4) == by_keep);
}

TEST_CASE("the aggregation setting weighs by kept fraction, by samples, or naively",
          "[unit][federated]") {
  auto m = merge_layout();
  auto with = [](aggregation a) {
    settings s;
    s.weighting = a;
    return s;
  };
  const flat_params by_samples = {
      {2, 4, 7, 8.5, 12, 13, 7, 8}, {1, 1.5, 2, 0}, {4, 6, 8, 1}, {5}};
  const flat_params by_keep = {
      {2, 4, 7.5, 8.75, 12, 13, 7, 8}, {1, 1.75, 2, 0}, {4, 7, 8, 1}, {6}};
  // naive: every delta over both clients, a unit one of them did not train
  // counted as unchanged by it (unit 0: A's delta halved; unit 3: nobody's)
  const flat_params naive = {
      {1.5, 3, 7, 8.5, 8.5, 9.5, 7, 8}, {0.5, 1.5, 1, 0}, {2.5, 6, 4.5, 1}, {5}};
  auto merged = [&](const std::string& strategy, aggregation a) {
    return make_strategy(strategy, with(a))
        ->aggregate(m, merge_global(), {update_a(), update_b()}, 4);
  };
  CHECK(merged("elfish", aggregation::own) == by_keep);
  CHECK(merged("elfish", aggregation::kept) == by_keep);
  CHECK(merged("elfish", aggregation::samples) == by_samples);
  CHECK(merged("elfish", aggregation::naive) == naive);
  CHECK(merged("heterofl", aggregation::own) == by_samples);
  CHECK(merged("heterofl", aggregation::kept) == by_keep);
  CHECK(merged("fedrolex", aggregation::naive) == naive);
  CHECK_THROWS_WITH(make_strategy("fedbuff", with(aggregation::samples)),
                    Catch::Contains("synchronous"));
  for (auto a :
       {aggregation::own, aggregation::kept, aggregation::samples, aggregation::naive}) {
    CHECK(parse_aggregation(to_string(a)) == a);
  }
  CHECK_THROWS_WITH(parse_aggregation("mean"), Catch::Contains("naive"));
}

TEST_CASE("a profile made monotone pools the timings that run backwards",
          "[unit][federated]") {
  CHECK(nondecreasing({}).empty());
  CHECK(nondecreasing({1, 2, 3}) == std::vector<double>{1, 2, 3});
  // client 7 of the issue: 8.56 s at 1/8, 5.60 s at 1/4
  auto fit = nondecreasing({2, 8.5, 5.5, 9, 12});
  CHECK(fit == std::vector<double>{2, 7, 7, 9, 12});
  // a violation that reaches back over several blocks
  CHECK(nondecreasing({3, 4, 5, 0}) == std::vector<double>{3, 3, 3, 3});
  // the fitted model never predicts a narrower model slower than a wider one
  time_model t;
  t.keep = {0.125, 0.25, 0.5, 1};
  t.seconds = nondecreasing({8.56, 5.60, 6, 10});
  for (double k = 0.01; k < 1; k += 0.01) {
    CHECK(t.at(k) <= t.at(k + 0.01) + 1e-12);
  }
}

TEST_CASE("fedbuff trains from the newest global and discounts stale updates",
          "[unit][federated]") {
  auto m = merge_layout();
  auto s = two_epochs();
  s.server_lr = 2;
  auto buff = make_strategy("fedbuff", s);
  auto task = buff->next_task(four_clients()[3], 7, m);
  CHECK(task.client == 4);
  CHECK(task.keep == 1);
  CHECK(task.kept.empty());
  CHECK(task.base_version == 7);
  CHECK(task.predicted_s == Approx(80));

  auto whole = [](float v, uint64_t base) {
    update u;
    u.samples = 10;
    u.delta = {std::vector<float>(8, v),
               std::vector<float>(4, v),
               std::vector<float>(4, v),
               {v}};
    u.base_version = base;
    return u;
  };
  // version 15: staleness 0, 3, 15 -> weights 1, 0.5, 0.25; the weighted sum
  // is 1 + 1 + 1 = 3 per element, / 3 updates x server_lr 2 = +2
  auto out =
      buff->aggregate(m, merge_global(), {whole(1, 15), whole(2, 12), whole(4, 0)}, 15);
  const flat_params want = {{3, 4, 5, 6, 7, 8, 9, 10}, {2, 2, 2, 2}, {3, 3, 3, 3}, {2}};
  CHECK(out == want);
  // a partial buffer divides by the updates it has; a base newer than the
  // version counts as fresh: 2 x 1 x 1 / 1 = +2
  auto one = buff->aggregate(m, merge_global(), {whole(1, 20)}, 15);
  CHECK(one == want);
}
