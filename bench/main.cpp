// salamander_bench NAME [--out PATH] [--quick] [--seeds N [--from-seed K]]: runs one
// benchmark (bench/run.sh NAME ... calls it), or, with --seeds, runs it
// once per seed and reports each headline figure's mean and 95% interval.
#include "bench/benches.hpp"
#include "bench/seeds.hpp"

#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <string>

namespace {

using namespace salamander::bench;

const std::map<std::string, std::function<int(const bench_args&)>>& all_benches() {
  static const std::map<std::string, std::function<int(const bench_args&)>> benches = {
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
      {"recovery_large", recovery_large},
      {"serve", serve},
      {"serve_failure", serve_failure},
      {"serve_grpc", serve_grpc},
      {"serve_scale", serve_scale},
      {"federated", federated},
      {"federated_niid", federated_niid},
      {"federated_fedrs", federated_fedrs},
      {"federated_aggregation", federated_aggregation},
      {"split", split},
      {"footprint", footprint},
      {"continual", continual},
      {"train_scaling", train_scaling},
      {"async_accuracy", async_accuracy},
      {"async_accuracy_vit", async_accuracy_vit},
      {"async_accuracy_vit_warmup", async_accuracy_vit_warmup},
      {"scale", scale},
  };
  return benches;
}

int usage(const char* why) {
  if (why) {
    std::fprintf(stderr, "salamander_bench: %s\n", why);
  }
  std::fprintf(
      stderr,
      "usage: salamander_bench NAME [--out PATH] [--quick] [--seeds N [--from-seed K]]\n"
      "  --out PATH  the results' JSON (default bench/results/NAME.json)\n"
      "  --quick     a short run, for a check\n"
      "  --seeds N   run seeds 1..N (N >= 2) and report each headline figure's\n"
      "              mean, n and 95%% interval (Student t); the runs' own results\n"
      "              go beside PATH as NAME.seedK.json\n"
      "  --from-seed K  with --seeds N: run seeds K..N only, reading seeds 1..K-1\n"
      "              from their NAME.seedK.json of an earlier series (extend 5 seeds\n"
      "              to 10; only valid if that build trains the same figures)\n"
      "benchmarks:");
  for (auto& [name, fn] : all_benches()) {
    std::fprintf(stderr, " %s", name.c_str());
  }
  std::fprintf(stderr, "\n");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    return usage(nullptr);
  }
  std::string name = argv[1];
  if (all_benches().count(name) == 0) {
    return usage(("no benchmark named '" + name + "'").c_str());
  }
  bench_args args;
  args.out = "bench/results/" + name + ".json";
  int seeds = 0;
  int first_seed = 1;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      args.quick = true;
    } else if (a == "--out" && i + 1 < argc) {
      args.out = argv[++i];
    } else if (a == "--seeds" && i + 1 < argc) {
      std::string n = argv[++i];
      if (n.empty() || n.size() > 3 || n.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(n) < 2) {
        return usage(("--seeds takes a whole number from 2 to 999, got '" + n + "'").c_str());
      }
      seeds = std::stoi(n);
    } else if (a == "--from-seed" && i + 1 < argc) {
      std::string n = argv[++i];
      if (n.empty() || n.size() > 3 ||
          n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) < 1) {
        return usage(
            ("--from-seed takes a whole number from 1 to 999, got '" + n + "'").c_str());
      }
      first_seed = std::stoi(n);
    } else if (a == "--out" || a == "--seeds" || a == "--from-seed") {
      return usage((a + " needs a value").c_str());
    } else {
      return usage(("unknown option '" + a + "'").c_str());
    }
  }
  if (first_seed > 1 && (seeds == 0 || first_seed > seeds)) {
    return usage(("--from-seed " + std::to_string(first_seed) +
                  " needs --seeds N with N >= " + std::to_string(first_seed))
                     .c_str());
  }
  try {
    auto& run = all_benches().at(name);
    if (seeds > 0) {
      return run_seeds(name, run, args, seeds, first_seed);
    }
    return run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchmark %s failed: %s\n", name.c_str(), e.what());
    return 1;
  }
}
