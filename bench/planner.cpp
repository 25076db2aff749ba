// How long the planner takes for 64 layers on 16 devices (goal: 10 ms), the
// size it must handle on every profile report. Random heterogeneous devices
// (10x spread in speed, memory and links), training under 1F1B, median of
// many instances; 6 devices (exact search over every subset and order)
// recorded beside it, and PipeEdge's setting: inference on 16 devices of 4
// types, exact over the types.
#include "algorithms/partitioner.hpp"
#include "algorithms/sampling.hpp"
#include "bench/benches.hpp"
#include "bench/report.hpp"

#include <algorithm>
#include <chrono>

namespace salamander::bench {

namespace {

algorithms::plan_request random_request(uint64_t seed, size_t layers, size_t devices) {
  algorithms::splitmix64 g(seed);
  algorithms::plan_request req;
  req.mode = algorithms::plan_mode::training;
  req.schedule = algorithms::plan_schedule::one_f_one_b;
  req.micro_batch_size = 16;
  req.micro_batches = 8;
  for (size_t l = 0; l < layers; ++l) {
    req.layers.push_back({"l" + std::to_string(l), 1e6 * (1 + 9 * g.unit()),
                          4e4 * (1 + g.unit()), 2e4 * (1 + g.unit())});
  }
  double total_params = 0;
  for (auto& l : req.layers) {
    total_params += l.param_bytes;
  }
  for (size_t d = 0; d < devices; ++d) {
    algorithms::device_profile p;
    p.name = "d" + std::to_string(d);
    double speed = 1 + 9 * g.unit();
    for (size_t l = 0; l < layers; ++l) {
      p.forward_s.push_back(1e-3 * speed * (0.5 + g.unit()));
      p.backward_s.push_back(2e-3 * speed * (0.5 + g.unit()));
    }
    p.memory_bytes = total_params * 4 * (0.2 + g.unit()); // 0.2x to 1.2x of the model
    p.link_bytes_per_s = 1e7 * (1 + 9 * g.unit());
    p.link_latency_s = 1e-3 * g.unit();
    req.devices.push_back(p);
  }
  return req;
}

double median_ms(size_t layers, size_t devices, int instances, int& infeasible) {
  std::vector<double> ms;
  for (int i = 0; i < instances; ++i) {
    auto req = random_request(static_cast<uint64_t>(i) + 1, layers, devices);
    auto t = std::chrono::steady_clock::now();
    try {
      algorithms::plan_partition(req);
    } catch (const algorithms::plan_error&) {
      infeasible++;
    }
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

} // namespace

// PipeEdge's setting: inference over 16 devices of 4 types (4 of each, the
// figures of each within 3% of its type's), a model of ViT-Large's depth
// (24 blocks, with the embedding and the head: 26 layers; 50 when each
// block is two); median of `instances`, and how many plans were exact.
double planner_16dev_4types_ms(size_t layers, int instances, int& exact) {
  std::vector<double> ms;
  exact = 0;
  for (int i = 0; i < instances; ++i) {
    algorithms::splitmix64 g(static_cast<uint64_t>(i) + 100);
    algorithms::plan_request req;
    req.mode = algorithms::plan_mode::inference;
    req.micro_batch_size = 8;
    for (size_t l = 0; l < layers; ++l) {
      req.layers.push_back({"l" + std::to_string(l), 1.2e7 * (0.5 + g.unit()),
                            2e5 * (1 + g.unit()), 2e5});
    }
    const double speed[4] = {1, 2, 4, 10};
    const double memory[4] = {4e9, 2e9, 1e9, 5e8};
    std::vector<double> base(layers);
    for (auto& b : base) {
      b = 2e-3 * (0.5 + g.unit());
    }
    for (size_t d = 0; d < 16; ++d) {
      algorithms::device_profile p;
      p.name = "d" + std::to_string(d);
      auto type = d % 4;
      for (size_t l = 0; l < layers; ++l) {
        double noise = 1 + 0.03 * (g.unit() - 0.5);
        p.forward_s.push_back(base[l] * speed[type] * noise);
        p.backward_s.push_back(0);
      }
      p.memory_bytes = memory[type];
      p.link_bytes_per_s = 1.25e7; // 100 Mbit/s
      p.link_latency_s = 1e-3;
      req.devices.push_back(p);
    }
    auto t = std::chrono::steady_clock::now();
    auto plan = algorithms::plan_partition(req);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
    exact += plan.exact && plan.device_types == 4 ? 1 : 0;
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int planner_speed(const bench_args& args) {
  int instances = args.quick ? 5 : 41;
  report rep("planner_speed");
  int infeasible_big = 0, infeasible_small = 0;
  double big = median_ms(64, 16, instances, infeasible_big);
  double small = median_ms(24, 6, instances, infeasible_small);
  rep.detail("instances", instances);
  rep.detail("infeasible_64x16", infeasible_big);
  rep.detail("plan_ms_24x6_exact", small);
  rep.detail("infeasible_24x6", infeasible_small);
  int exact16 = 0;
  double typed16 = planner_16dev_4types_ms(26, instances, exact16);
  rep.detail("planner_16dev_4types_ms", typed16);
  rep.detail("planner_16dev_4types_exact", static_cast<double>(exact16) / instances);
  std::fprintf(stderr,
               "64 layers x 16 devices: median %.2f ms; 24 x 6 (exact): %.2f ms; inference, 26 "
               "layers on 16 devices of 4 types: %.2f ms (%d of %d exact over the types)\n",
               big, small, typed16, exact16, instances);
  rep.headline("plan_ms_64x16", big);
  rep.finish(args.out);
  return 0;
}

} // namespace salamander::bench
