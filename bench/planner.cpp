// How long the planner takes for 64 layers on 16 devices (goal: 10 ms), the
// size it must handle on every profile report. Random heterogeneous devices
// (10x spread in speed, memory and links), training under 1F1B, median of
// many instances; 6 devices (exact search over every subset and order)
// recorded beside it.
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
  std::fprintf(stderr, "64 layers x 16 devices: median %.2f ms; 24 x 6 (exact): %.2f ms\n", big,
               small);
  rep.headline("plan_ms_64x16", big);
  rep.finish(args.out);
  return 0;
}

} // namespace salamander::bench
