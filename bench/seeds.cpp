// Several seeds of one benchmark, see seeds.hpp.
#include "bench/seeds.hpp"

#include "algorithms/stats.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace salamander::bench {

namespace {

using json = nlohmann::json;

std::string seeds_file(const std::string& out, int seed) {
  auto stem = out.size() > 5 && out.compare(out.size() - 5, 5, ".json") == 0
                  ? out.substr(0, out.size() - 5)
                  : out;
  return stem + ".seed" + std::to_string(seed) + ".json";
}

json seeds_read(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error("the run wrote no results at " + path);
  }
  return json::parse(in);
}

// Adds KEY's aggregate over `runs` to `out`; prints its row.
void seeds_aggregate(const std::string& key, const std::vector<json>& runs, json& out) {
  std::vector<double> values;
  json listed = json::array();
  for (auto& r : runs) {
    auto it = r.find(key);
    if (it != r.end() && it->is_number()) {
      values.push_back(it->get<double>());
    }
    listed.push_back(it != r.end() ? *it : json());
  }
  out[key + "_values"] = listed;
  out[key + "_n"] = values.size();
  if (values.empty()) {
    out[key] = nullptr;
    std::fprintf(stderr, "  %-40s no seed gave a value\n", key.c_str());
    return;
  }
  auto m = algorithms::interval_95(values);
  out[key] = m.mean;
  out[key + "_sd"] = m.sd;
  out[key + "_ci_low"] = m.low;
  out[key + "_ci_high"] = m.high;
  std::string judged;
  auto goals = runs.front().value("goals", json::object());
  if (auto g = goals.find(key); g != goals.end()) {
    bool at_least = g->contains("at_least");
    double bound = at_least ? (*g)["at_least"].get<double>() : (*g)["at_most"].get<double>();
    auto v = algorithms::verdict(m, {at_least, bound});
    out[key + "_goal"] = std::string(at_least ? ">= " : "<= ") + json(bound).dump();
    out[key + "_verdict"] = v;
    judged = "  goal " + std::string(at_least ? ">= " : "<= ") + json(bound).dump() + ": " + v;
  }
  std::fprintf(stderr, "  %-40s n %zu  mean %10.4g  95%% [%.4g, %.4g]%s\n", key.c_str(),
               m.n, m.mean, m.low, m.high, judged.c_str());
}

} // namespace

int run_seeds(const std::string& name, const std::function<int(const bench_args&)>& run,
              const bench_args& args, int seeds, int first_seed) {
  if (!seeded_bench(name)) {
    std::fprintf(stderr,
                 "%s does not vary with the seed: the %d runs repeat it, and the interval "
                 "is its run-to-run noise\n",
                 name.c_str(), seeds);
  }
  std::vector<json> runs;
  auto started = std::chrono::steady_clock::now();
  json reused = json::array();
  for (int seed = 1; seed < first_seed; ++seed) {
    auto path = seeds_file(args.out, seed);
    auto r = seeds_read(path);
    if (r.value("benchmark", "") != name || r.value("seed", 0) != seed) {
      throw std::runtime_error(path + " is not " + name + "'s run of seed " +
                               std::to_string(seed));
    }
    std::fprintf(stderr, "=== %s, seed %d of %d: read from %s, not run ===\n",
                 name.c_str(), seed, seeds, path.c_str());
    reused.push_back(seed);
    runs.push_back(std::move(r));
  }
  for (int seed = first_seed; seed <= seeds; ++seed) {
    auto one = args;
    one.seed = static_cast<uint64_t>(seed);
    one.out = seeds_file(args.out, seed);
    std::fprintf(stderr, "=== %s, seed %d of %d ===\n", name.c_str(), seed, seeds);
    if (int rc = run(one); rc != 0) {
      std::fprintf(stderr, "seed %d failed (%d): the series stops; its files stay\n", seed, rc);
      return rc;
    }
    runs.push_back(seeds_read(one.out));
  }
  auto out = runs.front();
  out["seeds"] = seeds;
  json files = json::array();
  for (int seed = 1; seed <= seeds; ++seed) {
    files.push_back(seeds_file(args.out, seed));
  }
  out["seed_results"] = files;
  out["seeds_read_not_run"] = reused;
  out["wall_s"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::fprintf(stderr, "%s over %d seeds (mean and 95%% interval, Student t):\n", name.c_str(),
               seeds);
  auto keys = runs.front().value("headlines", json::array());
  for (auto& k : keys) {
    seeds_aggregate(k.get<std::string>(), runs, out);
  }
  auto low_names = runs.front().value("ci_low_names", json::object());
  for (auto& [key, name] : low_names.items()) {
    if (out.contains(key + "_ci_low")) {
      out[name.get<std::string>()] = out[key + "_ci_low"];
    }
  }
  std::ofstream(args.out) << out.dump(2) << "\n";
  std::printf("results: %s\n", args.out.c_str());
  for (auto& k : keys) {
    auto key = k.get<std::string>();
    auto show = [&](const std::string& field) {
      auto& v = out[field];
      std::printf("%s: %s\n", field.c_str(), v.is_null() ? "null" : v.dump().c_str());
    };
    show(key);
    show(key + "_n");
    if (out.contains(key + "_ci_low")) {
      show(key + "_ci_low");
      show(key + "_ci_high");
      if (auto n = low_names.find(key); n != low_names.end()) {
        show(n->get<std::string>());
      }
    }
  }
  return 0;
}

} // namespace salamander::bench
