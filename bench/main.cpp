// salamander_bench NAME [--out PATH] [--quick]: runs one benchmark.
#include "bench/benches.hpp"

#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <map>

int main(int argc, char** argv) {
  using namespace salamander::bench;
  std::map<std::string, std::function<int(const bench_args&)>> benches = {
      {"training_overhead", training_overhead},
      {"codec", codec},
      {"pipeline_overhead", pipeline_overhead},
      {"bubble", bubble},
      {"transfer", transfer},
      {"planner_speed", planner_speed},
      {"hetero", hetero},
      {"replan_stability", replan_stability},
      {"recovery", recovery},
      {"failure_during_recovery", failure_during_recovery},
      {"serve", serve},
      {"federated", federated},
      {"federated_niid", federated_niid},
      {"split", split},
      {"footprint", footprint},
      {"continual", continual},
      {"train_scaling", train_scaling},
  };
  if (argc < 2 || benches.count(argv[1]) == 0) {
    std::fprintf(stderr, "usage: salamander_bench NAME [--out PATH] [--quick]\nbenchmarks:");
    for (auto& [name, fn] : benches) {
      std::fprintf(stderr, " %s", name.c_str());
    }
    std::fprintf(stderr, "\n");
    return 2;
  }
  bench_args args;
  args.out = std::string("bench/results/") + argv[1] + ".json";
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      args.quick = true;
    } else if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      args.out = argv[++i];
    }
  }
  try {
    return benches[argv[1]](args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchmark %s failed: %s\n", argv[1], e.what());
    return 1;
  }
}
