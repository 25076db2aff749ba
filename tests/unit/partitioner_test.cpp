#include "algorithms/partitioner.hpp"
#include "algorithms/sampling.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

using namespace salamander::algorithms;

namespace {

device_profile device(const std::string& name, std::vector<double> per_layer_s, double memory,
                      double link = 1e12, double latency = 0) {
  device_profile d;
  d.name = name;
  d.forward_s = per_layer_s;
  d.backward_s.assign(per_layer_s.size(), 0.0);
  d.memory_bytes = memory;
  d.link_bytes_per_s = link;
  d.link_latency_s = latency;
  return d;
}

std::vector<layer_cost> layers(size_t n, double params = 1, double act = 0, double out = 0) {
  std::vector<layer_cost> ls;
  for (size_t i = 0; i < n; ++i) {
    ls.push_back({"l" + std::to_string(i), params, act, out});
  }
  return ls;
}

plan_request inference(std::vector<layer_cost> ls, std::vector<device_profile> ds) {
  plan_request r;
  r.mode = plan_mode::inference;
  r.layers = std::move(ls);
  r.devices = std::move(ds);
  r.micro_batch_size = 1;
  return r;
}

using ranges = std::vector<std::tuple<size_t, size_t, size_t>>; // device, begin, end

ranges of(const partition_plan& p) {
  ranges out;
  for (auto& s : p.stages) {
    out.emplace_back(s.device, s.begin, s.end);
  }
  return out;
}

// Every ordered subset of devices and every split of the layers among them.
double brute_force(const plan_request& req) {
  size_t n = req.devices.size(), L = req.layers.size();
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> seq;
  std::vector<bool> used(n, false);
  std::function<void()> devices_rec;
  std::function<void(size_t, std::vector<stage_assignment>&)> split_rec;
  split_rec = [&](size_t p, std::vector<stage_assignment>& st) {
    size_t s = st.size();
    if (s == seq.size()) {
      if (p != L) {
        return;
      }
      auto plan = evaluate_plan(req, st);
      bool fits = true;
      for (auto& x : plan.stages) {
        fits = fits && x.memory_bytes <= req.devices[x.device].memory_bytes;
      }
      if (fits) {
        best = std::min(best, plan.objective_s);
      }
      return;
    }
    size_t remaining = seq.size() - s;
    for (size_t q = p + 1; q + (remaining - 1) <= L; ++q) {
      st.push_back({seq[s], p, q, 0, 0, 0});
      split_rec(q, st);
      st.pop_back();
    }
  };
  devices_rec = [&]() {
    if (!seq.empty() && seq.size() <= L) {
      std::vector<stage_assignment> st;
      split_rec(0, st);
    }
    for (size_t d = 0; d < n; ++d) {
      if (!used[d]) {
        used[d] = true;
        seq.push_back(d);
        devices_rec();
        seq.pop_back();
        used[d] = false;
      }
    }
  };
  devices_rec();
  return best;
}

} // namespace

TEST_CASE("FTPipeHD's 10x case: the fast device takes ten times the layers",
          "[unit][partitioner]") {
  // 11 equal layers; one device 10x slower; links free
  auto req = inference(layers(11), {device("fast", std::vector<double>(11, 1.0), 1e9),
                                    device("slow", std::vector<double>(11, 10.0), 1e9)});
  auto plan = plan_partition(req);
  CHECK(of(plan) == ranges{{0, 0, 10}, {1, 10, 11}});
  CHECK(plan.bottleneck_s == Approx(10.0));
  CHECK(plan.samples_per_s == Approx(0.1));
}

TEST_CASE("PipeDream's planner takes the devices for alike; at 10:4:2:1 that costs it",
          "[unit][partitioner]") {
  // 20 equal layers on devices of relative speed 10:4:2:1 (per-layer times
  // 1, 2.5, 5, 10); links free
  std::vector<device_profile> ds;
  for (double t : {1.0, 2.5, 5.0, 10.0}) {
    ds.push_back(device("d" + std::to_string(ds.size()), std::vector<double>(20, t), 1e9));
  }
  auto req = inference(layers(20), ds);
  auto alike = plan_homogeneous(req);
  // five layers a stage (equal on device 0), stage i on device i, so the
  // slowest device holds a quarter of the model
  CHECK(of(alike) == ranges{{0, 0, 5}, {1, 5, 10}, {2, 10, 15}, {3, 15, 20}});
  CHECK(alike.bottleneck_s == Approx(50.0));
  auto planned = plan_partition(req);
  CHECK(planned.bottleneck_s <= 12.5);
  CHECK(alike.bottleneck_s / planned.bottleneck_s >= 4.0);

  // unequal layers: the cuts balance the layers' times on the device it
  // assumes, counting the transfer into a stage
  auto uneven = inference(layers(4, 1, 0, 1), {device("a", {3, 1, 1, 1}, 1e9, 1.0),
                                                device("b", {30, 10, 10, 10}, 1e9, 1.0)});
  auto two = plan_homogeneous(uneven);
  CHECK(of(two) == ranges{{0, 0, 1}, {1, 1, 4}});
  CHECK(two.bottleneck_s == Approx(30.0)); // b's three layers, as the real devices do them
  auto like_b = plan_homogeneous(uneven, 1);
  CHECK(of(like_b) == of(two)); // the same cut: b is a, ten times slower
  // on devices that are alike it is as good as the planner
  auto same = inference(layers(9), {device("x", std::vector<double>(9, 2.0), 1e9),
                                    device("y", std::vector<double>(9, 2.0), 1e9),
                                    device("z", std::vector<double>(9, 2.0), 1e9)});
  CHECK(plan_homogeneous(same).bottleneck_s == Approx(plan_partition(same).bottleneck_s));
  CHECK_THROWS_AS(plan_homogeneous(same, 3), std::invalid_argument);
}

TEST_CASE("a device that only slows the pipeline is left out", "[unit][partitioner]") {
  auto req = inference(layers(3), {device("slow", {100, 100, 100}, 1e9),
                                   device("fast", {1, 1, 1}, 1e9)});
  auto plan = plan_partition(req);
  CHECK(of(plan) == ranges{{1, 0, 3}});
  CHECK(plan.bottleneck_s == Approx(3.0));
}

TEST_CASE("memory forces a split the compute alone would not", "[unit][partitioner]") {
  // each device holds two layers' weights at most
  auto req = inference(layers(4, 100), {device("a", {1, 1, 1, 1}, 200),
                                        device("b", {1, 1, 1, 1}, 250)});
  auto plan = plan_partition(req);
  CHECK(plan.stages.size() == 2);
  CHECK(plan.bottleneck_s == Approx(2.0));
  for (auto& s : plan.stages) {
    CHECK(s.memory_bytes <= req.devices[s.device].memory_bytes);
  }
}

TEST_CASE("a slow link keeps the model on one device", "[unit][partitioner]") {
  // splitting halves compute (4 -> 2) but each cut costs 10 s on the link
  auto ls = layers(4, 1, 0, 1000);
  auto req = inference(ls, {device("a", {1, 1, 1, 1}, 1e9, 100), device("b", {1, 1, 1, 1}, 1e9, 100)});
  auto plan = plan_partition(req);
  CHECK(plan.stages.size() == 1);
  CHECK(plan.bottleneck_s == Approx(4.0));
  // with a fast link the split wins
  req.devices[0].link_bytes_per_s = req.devices[1].link_bytes_per_s = 1e6;
  CHECK(plan_partition(req).bottleneck_s == Approx(2.0));
}

TEST_CASE("a device's other work (another model's stages) counts in every stage it runs",
          "[unit][partitioner]") {
  // two like devices, four layers of 1 s, a link so slow that a cut costs
  // 10 s (one stage); device a already spends 3 s a micro-batch on another
  // model: the stage goes to b
  auto req = inference(layers(4, 1, 0, 1000), {device("a", {1, 1, 1, 1}, 1e9, 100),
                                               device("b", {1, 1, 1, 1}, 1e9, 100)});
  req.devices[0].busy_s = 3;
  auto alone = plan_partition(req);
  CHECK(of(alone) == ranges{{1, 0, 4}});
  CHECK(alone.bottleneck_s == Approx(4.0));
  req.devices[0].busy_s = 0;
  req.devices[1].busy_s = 3;
  CHECK(of(plan_partition(req)) == ranges{{0, 0, 4}});
  // with fast links: a takes k layers at 2 + k, b 4 - k; k = 1 evens them
  // at 3 (b alone: 4; half each: 4)
  req.devices[0].link_bytes_per_s = req.devices[1].link_bytes_per_s = 1e12;
  req.devices[0].busy_s = 2;
  req.devices[1].busy_s = 0;
  auto shared = plan_partition(req);
  CHECK(shared.bottleneck_s == Approx(3.0));
  REQUIRE(shared.stages.size() == 2);
  for (auto& st : shared.stages) {
    CHECK(st.end - st.begin == (st.device == 0 ? 1u : 3u));
    CHECK(st.compute_s == Approx(3.0)); // a: its layer and the other work
  }
  // what evaluate_plan says of a given plan counts it too
  CHECK(evaluate_plan(req, {{0, 0, 4, 0, 0, 0}}).bottleneck_s == Approx(6.0));
  // a device with no stage of this plan adds nothing, however busy
  req.devices[0].busy_s = 100;
  CHECK(plan_partition(req).bottleneck_s == Approx(4.0));
  req.devices[0].busy_s = -1;
  CHECK_THROWS_AS(plan_partition(req), std::invalid_argument);
}

TEST_CASE("training counts backward time, gradients, optimizer state and 1F1B activations",
          "[unit][partitioner]") {
  plan_request req;
  req.mode = plan_mode::training;
  req.schedule = plan_schedule::one_f_one_b;
  req.micro_batch_size = 2;
  req.micro_batches = 8;
  req.optimizer_state_factor = 2;
  req.layers = layers(2, 10, 5, 0);
  auto d = device("d", {1, 1}, 1e9);
  d.backward_s = {2, 2};
  req.devices = {d};
  auto plan = plan_partition(req);
  CHECK(plan.bottleneck_s == Approx(6.0));
  CHECK(plan.objective_s == Approx(6.0 * 8)); // one stage: M steps per batch
  // weights x (1 + grad + 2 optimizer) + activations x 2 samples x 1 in flight
  CHECK(plan.stages[0].memory_bytes == Approx(20 * 4 + 10 * 2 * 1));
  CHECK(in_flight(req, 0, 4) == 4);
  CHECK(in_flight(req, 3, 4) == 1);
  req.schedule = plan_schedule::gpipe;
  CHECK(in_flight(req, 3, 4) == 8);
}

TEST_CASE("the async schedule fills once a segment and holds its weight versions",
          "[unit][partitioner][async]") {
  // two equal devices, two equal layers: a pipeline of two halves the
  // bottleneck; flushed it pays S - 1 steps of fill a batch, async S - 1 a
  // segment of R batches
  plan_request req;
  req.mode = plan_mode::training;
  req.micro_batch_size = 1;
  req.micro_batches = 2;
  req.optimizer_state_factor = 2;
  req.allow_data_parallel = false;
  req.layers = layers(2, 10, 0, 0);
  req.devices = {device("a", {1, 1}, 1e9), device("b", {1, 1}, 1e9)};
  req.stages = 2;
  auto flushed = plan_partition(req);
  CHECK(flushed.objective_s == Approx(1.0 * (2 + 1))); // a 1 s bottleneck
  req.schedule = plan_schedule::async;
  req.async_delay = 1;
  req.segment_batches = 10;
  auto async = plan_partition(req);
  CHECK(async.objective_s == Approx(1.0 * (2 + 0.1)));
  // weights x (1 + grad + 2 optimizer) + (d + 1) stashed versions
  CHECK(async.stages[0].memory_bytes == Approx(10 * (4 + 2)));
  req.async_delay = 3;
  CHECK(stage_memory(req, 0, 1, 1) == Approx(10 * (4 + 4)));
  // two kept snapshots: each the weights, their optimizer state and the
  // d older versions stashed with them
  req.kept_snapshots = 2;
  CHECK(stage_memory(req, 0, 1, 1) == Approx(10 * (4 + 4 + 2 * (3 + 3))));
  req.kept_snapshots = 0;
  // at most d x M + 1 micro-batches in flight (the warm-up is bounded by
  // the versions a stage has)
  req.async_delay = 1;
  req.micro_batches = 1;
  CHECK(in_flight(req, 0, 4) == 2);
  req.async_delay = 3;
  CHECK(in_flight(req, 0, 4) == 4);
  // a slack of K: min(K(S-s-1), d x M) + 1
  req.async_slack = 2;
  CHECK(in_flight(req, 0, 4) == 4); // (d x M bounds it)
  CHECK(in_flight(req, 2, 4) == 3); // (K = 1: 2)
  CHECK(in_flight(req, 3, 4) == 1); // the last stage holds one at a time
}

TEST_CASE("a stage's kept snapshots count against its memory and can force a split",
          "[unit][partitioner]") {
  // two layers of 10 B weights under Adam, 1F1B, no activations; b is 3x
  // slower, so alone a is best (2 steps x 2 s = 4 s against 3 x 3 s = 9 s)
  plan_request req;
  req.mode = plan_mode::training;
  req.micro_batches = 2;
  req.micro_batch_size = 1;
  req.optimizer_state_factor = 2;
  req.allow_data_parallel = false;
  req.layers = layers(2, 10, 0, 0);
  req.devices = {device("a", {1, 1}, 100), device("b", {3, 3}, 100)};
  auto plan = plan_partition(req);
  CHECK(of(plan) == ranges{{0, 0, 2}});
  // weights x (1 + gradients + 2 optimizer state)
  CHECK(plan.stages[0].memory_bytes == Approx(20 * 4));
  // two snapshots, each the weights and their optimizer state: 20 x (4 + 2 x 3)
  req.kept_snapshots = 2;
  CHECK(stage_memory(req, 0, 2, 1) == Approx(200));
  for (size_t limit : {size_t{6}, size_t{0}}) { // exact search, local search
    INFO("exact_device_limit " << limit);
    req.exact_device_limit = limit;
    plan = plan_partition(req);
    REQUIRE(plan.stages.size() == 2);
    CHECK(plan.objective_s == Approx(9.0));
    for (auto& s : plan.stages) {
      CHECK(s.memory_bytes == Approx(10 * 10));
      CHECK(s.memory_bytes <= req.devices[s.device].memory_bytes);
    }
  }
  // a layer alone no longer fits either device: the error names the snapshots
  req.devices[0].memory_bytes = req.devices[1].memory_bytes = 90;
  CHECK_THROWS_WITH(plan_partition(req),
                    Catch::Contains("kept snapshots") && Catch::Contains("100 B"));
}

TEST_CASE("the planner is optimal against brute force on random small instances",
          "[unit][partitioner]") {
  splitmix64 g(2024);
  int checked = 0, infeasible = 0, ordered_optimal = 0, ordered_missed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    size_t L = 1 + g.below(7), n = 1 + g.below(4);
    plan_request req;
    req.mode = g.below(2) ? plan_mode::training : plan_mode::inference;
    req.schedule = g.below(2) ? plan_schedule::gpipe : plan_schedule::one_f_one_b;
    req.micro_batch_size = 1 + static_cast<int64_t>(g.below(4));
    req.micro_batches = 1 + static_cast<int>(g.below(6));
    req.allow_data_parallel = false; // pipelines only: brute force covers those
    for (size_t l = 0; l < L; ++l) {
      req.layers.push_back({"l" + std::to_string(l), 1.0 + 9 * g.unit(), 5 * g.unit(),
                            100 * g.unit()});
    }
    for (size_t d = 0; d < n; ++d) {
      device_profile p;
      p.name = "d" + std::to_string(d);
      double speed = 0.1 + g.unit() * 10;
      for (size_t l = 0; l < L; ++l) {
        p.forward_s.push_back(speed * (0.5 + g.unit()));
        p.backward_s.push_back(2 * speed * (0.5 + g.unit()));
      }
      p.memory_bytes = 20 + 150 * g.unit();
      if (req.mode == plan_mode::inference) {
        // inference also holds input and output buffers (up to 2 x 100 bytes
        // a sample): room for them, so that memory still decides some
        p.memory_bytes += 200 * static_cast<double>(req.micro_batch_size);
      }
      p.link_bytes_per_s = 10 + 1000 * g.unit();
      p.link_latency_s = 0.1 * g.unit();
      req.devices.push_back(p);
    }
    INFO("trial " << trial << ": " << L << " layers, " << n << " devices");
    double expect = brute_force(req);
    if (std::isinf(expect)) {
      CHECK_THROWS_AS(plan_partition(req), plan_error);
      infeasible++;
      continue;
    }
    auto plan = plan_partition(req);
    CHECK(plan.exact);
    CHECK(plan.objective_s == Approx(expect).epsilon(1e-12));
    // the plan it returns is real: contiguous, covering, fitting
    size_t next = 0;
    for (auto& s : plan.stages) {
      CHECK(s.begin == next);
      next = s.end;
      CHECK(s.memory_bytes <= req.devices[s.device].memory_bytes);
    }
    CHECK(next == L);
    // the heuristic (ordered search and local search, used for many
    // devices) is never better than exact, and almost always as good
    req.exact_device_limit = 0;
    req.typed_table_limit = 0; // (no exact search over types either)
    double ordered = std::numeric_limits<double>::infinity();
    try {
      ordered = plan_partition(req).objective_s;
    } catch (const plan_error&) {
      ordered_missed++;
    }
    CHECK(ordered >= plan.objective_s - 1e-12);
    if (ordered <= plan.objective_s * (1 + 1e-12)) {
      ordered_optimal++;
    }
    checked++;
  }
  CHECK(checked > 200);
  CHECK(infeasible > 0);
  // how often the heuristic finds the optimum (recorded, and guarded
  // against getting worse; the four orders alone: 199 of 236)
  WARN("ordered search optimal in " << ordered_optimal << " of " << checked << ", found no plan in "
                                     << ordered_missed);
  CHECK(ordered_optimal * 100 >= checked * 99);
}

namespace {

// A random request over `types` kinds of device, `per_type` copies of each
// (identical figures), in a shuffled order.
plan_request typed_instance(splitmix64& g, size_t L, size_t types, size_t per_type) {
  plan_request req;
  req.mode = g.below(2) ? plan_mode::training : plan_mode::inference;
  req.micro_batch_size = 1 + static_cast<int64_t>(g.below(4));
  req.micro_batches = 1 + static_cast<int>(g.below(6));
  req.allow_data_parallel = false;
  for (size_t l = 0; l < L; ++l) {
    req.layers.push_back(
        {"l" + std::to_string(l), 1.0 + 9 * g.unit(), 5 * g.unit(), 100 * g.unit()});
  }
  std::vector<device_profile> kinds;
  for (size_t t = 0; t < types; ++t) {
    device_profile p;
    double speed = 0.1 + g.unit() * 10;
    for (size_t l = 0; l < L; ++l) {
      p.forward_s.push_back(speed * (0.5 + g.unit()));
      p.backward_s.push_back(2 * speed * (0.5 + g.unit()));
    }
    p.memory_bytes = 40 + 150 * g.unit() + 200 * static_cast<double>(req.micro_batch_size);
    p.link_bytes_per_s = 10 + 1000 * g.unit();
    p.link_latency_s = 0.1 * g.unit();
    kinds.push_back(p);
  }
  for (size_t i = 0; i < types * per_type; ++i) {
    req.devices.push_back(kinds[i % types]);
    req.devices.back().name = "d" + std::to_string(i);
  }
  for (size_t i = req.devices.size(); i > 1; --i) {
    std::swap(req.devices[i - 1], req.devices[g.below(i)]);
  }
  return req;
}

} // namespace

TEST_CASE("devices of a few types: the search over types is as good as over every subset",
          "[unit][partitioner]") {
  splitmix64 g(77);
  int grouped = 0;
  for (int trial = 0; trial < 120; ++trial) {
    size_t L = 2 + g.below(6), types = 1 + g.below(3), per = 2 + g.below(2);
    auto req = typed_instance(g, L, types, per);
    INFO("trial " << trial << ": " << L << " layers, " << types << " types of " << per);
    req.exact_device_limit = 16; // every subset and order (bitmask)
    std::optional<partition_plan> subsets;
    try {
      subsets = plan_partition(req);
    } catch (const plan_error&) {
    }
    req.exact_device_limit = 0; // by types
    req.type_tolerance = 0;
    if (!subsets) {
      CHECK_THROWS_AS(plan_partition(req), plan_error);
      continue;
    }
    auto by_type = plan_partition(req);
    CHECK(subsets->device_types == 0);
    CHECK(by_type.exact);
    CHECK(by_type.device_types == types);
    CHECK(by_type.objective_s == Approx(subsets->objective_s).epsilon(1e-12));
    std::set<size_t> used;
    size_t next = 0;
    for (auto& s : by_type.stages) {
      CHECK(used.insert(s.device).second); // each device once
      CHECK(s.begin == next);
      next = s.end;
      CHECK(s.memory_bytes <= req.devices[s.device].memory_bytes);
    }
    CHECK(next == L);
    grouped++;
  }
  CHECK(grouped > 80);
}

TEST_CASE("32 devices of 3 types plan exactly, and near-equal devices group at their worst",
          "[unit][partitioner]") {
  splitmix64 g(5);
  auto req = typed_instance(g, 12, 3, 11);
  req.mode = plan_mode::inference;
  req.devices.resize(32);
  auto typed = plan_partition(req);
  CHECK(typed.exact);
  CHECK(typed.device_types == 3);
  req.typed_table_limit = 0; // the heuristic (orders and local search)
  auto heuristic = plan_partition(req);
  CHECK_FALSE(heuristic.exact);
  CHECK(heuristic.device_types == 0);
  CHECK(typed.objective_s <= heuristic.objective_s * (1 + 1e-12));

  // PipeEdge's setting: inference, 16 devices of 4 types, 26 layers
  for (int trial = 0; trial < 10; ++trial) {
    auto pe = typed_instance(g, 26, 4, 4);
    pe.mode = plan_mode::inference;
    INFO("16 devices of 4 types, trial " << trial);
    std::optional<partition_plan> by_type;
    try {
      by_type = plan_partition(pe);
    } catch (const plan_error&) {
      pe.typed_table_limit = 0; // nothing fits: the heuristic finds nothing either
      CHECK_THROWS_AS(plan_partition(pe), plan_error);
      continue;
    }
    CHECK(by_type->exact);
    CHECK(by_type->device_types == 4);
    pe.typed_table_limit = 0;
    auto orders = plan_partition(pe);
    CHECK(by_type->objective_s <= orders.objective_s * (1 + 1e-12));
  }

  // measured figures are never equal: within 10% they are one type, planned
  // at its slowest member, and the plan on the real devices is no slower
  std::vector<device_profile> ds;
  for (int i = 0; i < 32; ++i) {
    ds.push_back(device("n" + std::to_string(i), {1.0 + 0.002 * i, 2.0, 1.0, 0.5}, 1e9));
  }
  auto near = inference(layers(4), ds);
  auto plan = plan_partition(near);
  CHECK(plan.exact);
  CHECK(plan.device_types == 1);
  CHECK(plan.bottleneck_s <= 2.0 + 1e-12); // layer 1 alone, on any device
  near.type_tolerance = 0.001; // now they are 32 types: too many for exact
  auto apart = plan_partition(near);
  CHECK_FALSE(apart.exact);
  CHECK(apart.bottleneck_s == Approx(plan.bottleneck_s));
}

TEST_CASE("training pays for fill and drain: a second stage must earn it",
          "[unit][partitioner]") {
  // two equal devices, 2 layers of 1 s each, M = 2 micro-batches:
  // one stage: 2 steps x 2 s = 4 s; two stages: 3 steps x 1 s = 3 s
  plan_request req;
  req.mode = plan_mode::training;
  req.micro_batches = 2;
  req.micro_batch_size = 1;
  req.layers = layers(2);
  req.devices = {device("a", {1, 1}, 1e9), device("b", {1, 1}, 1e9)};
  req.allow_data_parallel = false; // (it would run a micro-batch on each: 2 s)
  auto plan = plan_partition(req);
  CHECK(plan.stages.size() == 2);
  CHECK(plan.objective_s == Approx(3.0));
  // a device 3x slower: splitting gives max(1, 3) x 3 = 9 s > 4 s alone
  req.devices[1] = device("slow", {3, 3}, 1e9);
  plan = plan_partition(req);
  CHECK(plan.stages.size() == 1);
  CHECK(plan.objective_s == Approx(4.0));
  CHECK(plan.samples_per_s == Approx(0.5));
}

TEST_CASE("when nothing fits, the error says what does not fit where", "[unit][partitioner]") {
  auto req = inference(layers(3, 10), {device("tiny", {1, 1, 1}, 50), device("small", {1, 1, 1}, 80)});
  req.layers[1].name = "block2";
  req.layers[1].param_bytes = 100;
  CHECK_THROWS_WITH(plan_partition(req), Catch::Contains("block2") && Catch::Contains("small"));
  auto req2 = inference(layers(3, 100), {device("a", {1, 1, 1}, 150), device("b", {1, 1, 1}, 120)});
  CHECK_THROWS_WITH(plan_partition(req2), Catch::Contains("all 2 devices together"));
  auto bad = inference(layers(3), {device("a", {1, 1}, 10)});
  CHECK_THROWS_WITH(plan_partition(bad), Catch::Contains("timings for 2 layers"));
}

TEST_CASE("micro-batches are split so that the slowest member finishes first",
          "[unit][partitioner][dp]") {
  // capacities 10:4:2:1, M = 8: 5, 2 and 1 micro-batches finish together at 5
  CHECK(split_micro_batches({1.0, 2.5, 5.0, 10.0}, 8) == std::vector<int>{5, 2, 1, 0});
  CHECK(split_micro_batches({1.0, 1.0, 1.0}, 4) == std::vector<int>{2, 1, 1});
  CHECK(split_micro_batches({3.0}, 4) == std::vector<int>{4});
  CHECK_THROWS_AS(split_micro_batches({}, 4), std::invalid_argument);
  // optimal against every split on random instances
  splitmix64 g(7);
  for (int trial = 0; trial < 200; ++trial) {
    size_t n = 1 + g.below(4);
    int M = 1 + static_cast<int>(g.below(9));
    std::vector<double> t;
    for (size_t i = 0; i < n; ++i) {
      t.push_back(0.1 + 10 * g.unit());
    }
    auto split = split_micro_batches(t, M);
    double got = 0;
    int total = 0;
    for (size_t i = 0; i < n; ++i) {
      got = std::max(got, split[i] * t[i]);
      total += split[i];
    }
    CHECK(total == M);
    double best = std::numeric_limits<double>::infinity();
    std::vector<int> k(n, 0);
    std::function<void(size_t, int)> rec = [&](size_t i, int left) {
      if (i + 1 == n) {
        k[i] = left;
        double worst = 0;
        for (size_t j = 0; j < n; ++j) {
          worst = std::max(worst, k[j] * t[j]);
        }
        best = std::min(best, worst);
        return;
      }
      for (int x = 0; x <= left; ++x) {
        k[i] = x;
        rec(i + 1, left - x);
      }
    };
    rec(0, M);
    INFO("trial " << trial);
    CHECK(got == Approx(best).epsilon(1e-12));
  }
}

namespace {

// Eight coarse layers as in the small ResNet, on devices of capacities
// 10:4:2:1, one micro-batch of all layers taking `fast_s` on the fastest.
plan_request coarse_training(double link, double fast_s = 8.0) {
  plan_request req;
  req.mode = plan_mode::training;
  req.micro_batches = 8;
  req.micro_batch_size = 1;
  req.optimizer_state_factor = 1;
  req.layers = layers(8, 1000, 0, 100);
  for (auto [name, slow] : {std::pair{"a", 1.0}, {"b", 2.5}, {"c", 5.0}, {"d", 10.0}}) {
    req.devices.push_back(
        device(name, std::vector<double>(8, fast_s / 8 * slow), 1e9, link, 0.0));
  }
  return req;
}

} // namespace

TEST_CASE("coarse layers on 10:4:2:1 devices: data parallelism beats any pipeline",
          "[unit][partitioner][dp]") {
  auto req = coarse_training(1e9);
  auto plan = plan_partition(req);
  REQUIRE(plan.data_parallel());
  CHECK(plan.micro_split == std::vector<int>{5, 2, 1});
  CHECK(of(plan) == ranges{{0, 0, 8}, {1, 0, 8}, {2, 0, 8}});
  // compute: 5 x 8 s = 2 x 20 s = 1 x 40 s; summing: 2 x 8000 B / 1e9 B/s per member
  CHECK(plan.objective_s == Approx(40.0 + 3 * 2 * 8000 / 1e9));
  CHECK(plan.samples_per_s == Approx(8 / plan.objective_s));
  // the best pipeline is slower: one device alone takes 64 s, and fill and
  // drain eat what a split of eight layers can gain
  req.allow_data_parallel = false;
  auto pipe = plan_partition(req);
  CHECK(!pipe.data_parallel());
  CHECK(pipe.objective_s > 45.0);
  // evaluate_data_parallel gives the same figures for the same members
  auto same = evaluate_data_parallel(coarse_training(1e9), {0, 1, 2}, {5, 2, 1});
  CHECK(same.objective_s == Approx(plan.objective_s));
  CHECK_THROWS_AS(evaluate_data_parallel(coarse_training(1e9), {0, 1}, {5, 2, 1}),
                  std::invalid_argument);
  CHECK_THROWS_AS(evaluate_data_parallel(coarse_training(1e9), {0, 1}, {5, 2}),
                  std::invalid_argument); // covers 7 of 8
}

TEST_CASE("data parallelism is left when summing costs more than it saves, or does not fit",
          "[unit][partitioner][dp]") {
  // a slow link: summing 8000 B twice per member at 100 B/s is 160 s each
  auto req = coarse_training(100);
  CHECK(!plan_partition(req).data_parallel());
  // members must hold the whole model: with b and d too small only a and c
  // remain (7 x 8 s against 1 x 40 s)
  req = coarse_training(1e9);
  req.devices[1].memory_bytes = req.devices[3].memory_bytes = 1000;
  auto plan = plan_partition(req);
  REQUIRE(plan.data_parallel());
  CHECK(of(plan) == ranges{{0, 0, 8}, {2, 0, 8}});
  CHECK(plan.micro_split == std::vector<int>{7, 1});
  for (auto& s : plan.stages) {
    CHECK(s.memory_bytes <= req.devices[s.device].memory_bytes);
  }
  // inference streams: no data parallelism there
  auto inf = coarse_training(1e9);
  inf.mode = plan_mode::inference;
  CHECK(!plan_partition(inf).data_parallel());
  // a single micro-batch cannot be shared
  auto one = coarse_training(1e9);
  one.micro_batches = 1;
  CHECK(!plan_partition(one).data_parallel());
}
