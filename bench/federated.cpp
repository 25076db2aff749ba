// Federated learning (ELFISH mode) on EMULATED devices: ten clients in one
// process, each paced to its share of a core by compute-time dilation
// (its CPU time over its share), Fashion-MNIST, three of the clients
// stragglers. Every cell runs one after the other with the same seed, the
// same shards and the same budget of training time; the global model is
// evaluated on the whole test split after every round.
//
// Regimes (issue 29, item 2):
//   apart   stragglers at a tenth of the others' speed (severe) that hold
//           three classes no fast client has (--classes-apart 3, each group
//           split Dirichlet(0.5)): the headline, where dropping them must
//           hurt; every strategy, ELFISH's aggregation ablated, and an oracle
//           (every client at the fast clients' speed, FedAvg)
//   dir     the same stragglers, Dirichlet(0.5) over every class
//   mild    stragglers at 1/2, 1/2.5 and 1/3 of the fast speed (the paper's
//           range), classes apart
// With --seeds N every seed runs the headline contrasts (apart: FedAvg-wait,
// deadline-drop, ELFISH, ELFISH with sample weights; dir: deadline, ELFISH);
// the other cells run at seed 1 only.
//
//   accuracy         the mean of the last 5 evaluations within the budget
//                    (all of them when there are fewer), never one point
//   time to target   the target is FedAvg-wait's accuracy at the end of the
//                    budget; a strategy's time to it is the training time of
//                    its first round at or above it. Speedup: FedAvg's time
//                    over the strategy's.
//   past the pace    the share of ELFISH's rounds whose slowest client took
//                    more than 1.5 x the round's pace
//   partial tasks    a cell's tasks that trained only part of their batches
//                    (partial work: even --min-keep was predicted past the pace)
//
// federated_niid: the protocol of Flower's NIID-Bench FedAvg baseline
// (Fashion-MNIST, Dirichlet(0.5), 10 clients, 50 rounds of 10 local epochs,
// SGD 0.01 momentum 0.9, batch 64), no emulation: the final accuracy.
#include "actors/federated/fed_job.hpp"
#include "actors/node/system.hpp"
#include "bench/benches.hpp"
#include "bench/report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>

namespace salamander::bench {

namespace {

struct curve {
  std::vector<std::pair<double, double>> points; ///< (training s, accuracy)
  int64_t rounds = 0;
  int64_t dropped = 0;
  int64_t past_pace = 0; ///< rounds whose slowest client took > 1.5 x the pace
  int64_t paced = 0;     ///< rounds with a pace
  int64_t partial = 0;   ///< tasks that trained part of their batches (work < 1)
  std::string error;

  double final_within(double budget) const {
    double acc = 0;
    for (auto& [t, a] : points) {
      if (t <= budget) {
        acc = a;
      }
    }
    return acc;
  }
  /// The mean of the last `n` evaluations within the budget (all, if fewer).
  double last_within(double budget, size_t n = 5) const {
    std::vector<double> in;
    for (auto& [t, a] : points) {
      if (t <= budget) {
        in.push_back(a);
      }
    }
    return mean_of_last(in, n);
  }
  double time_to(double target) const {
    for (auto& [t, a] : points) {
      if (a >= target - 1e-12) {
        return t;
      }
    }
    return std::numeric_limits<double>::infinity();
  }
  std::string text() const {
    std::string out;
    for (auto& [t, a] : points) {
      out += fmt::format("{}{:.1f}:{:.4f}", out.empty() ? "" : " ", t, a);
    }
    return out;
  }
};

curve read_curve(const std::string& path) {
  curve c;
  std::ifstream in(path);
  std::string line;
  std::map<int64_t, double> pace; // by round
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      continue;
    }
    auto event = j.value("event", "");
    if (event == "round_start") {
      pace[j.value("round", int64_t{0})] = j.value("pace_s", 0.0);
      for (auto& t : j.value("tasks", nlohmann::json::array())) {
        c.partial += t.value("work", 1.0) < 1 ? 1 : 0;
      }
    } else if (event == "round") {
      c.points.emplace_back(j.value("train_s", 0.0), j.value("accuracy", 0.0));
      double p = pace[j.value("round", int64_t{0})];
      double slowest = 0;
      for (auto& x : j.value("contributions", nlohmann::json::array())) {
        slowest = std::max(slowest, x.value("train_s", 0.0));
      }
      if (p > 0) {
        ++c.paced;
        c.past_pace += slowest > 1.5 * p ? 1 : 0;
      }
    }
  }
  return c;
}

// One cell of the benchmark: a strategy in a regime.
struct cell {
  std::string name;     ///< "apart/elfish_samples"
  std::string strategy; ///< fedavg, deadline, elfish, ...
  algorithms::fed::aggregation weighting = algorithms::fed::aggregation::own;
  std::vector<double> shares; ///< each client's share of a core
  int64_t apart = 0;          ///< classes apart for the last this many clients
  bool every_seed = false;    ///< a headline contrast: run at every seed
  double restricted = 1;      ///< FedRS's scale of a client's missing classes
};

// Each client's share of a core: the fast clients' share is what the severe
// regime gives them (the ten adding up to 90% of two cores), so a cell's
// fast clients are alike in every regime and only the stragglers differ.
std::vector<double> shares_of(const std::vector<double>& rel) {
  const std::vector<double> severe = {1, 1, 1, 1, 1, 1, 1, 0.1, 0.1, 0.1};
  double sum = 0;
  for (auto x : severe) {
    sum += x;
  }
  std::vector<double> shares;
  for (auto x : rel) {
    shares.push_back(x * 0.9 * 2 / sum);
  }
  return shares;
}

curve run_cell(const actors::fed_config& base, const cell& c,
               const std::string& log_path) {
  caf::actor_system_config cfg;
  actors::configure(cfg, {});
  caf::actor_system sys{cfg};
  std::vector<actors::emulation_config> emu;
  for (auto s : c.shares) {
    actors::emulation_config e;
    e.cpu_share = s;
    emu.push_back(e);
  }
  auto nodes = actors::local_nodes(sys, static_cast<int>(c.shares.size()), 1, emu);
  auto fc = base;
  fc.strategy = c.strategy;
  fc.settings.weighting = c.weighting;
  fc.classes_apart = c.apart;
  fc.restricted_softmax = c.restricted;
  fc.metrics_path = log_path;
  actors::job_options opts;
  opts.poll = std::chrono::milliseconds(500);
  int64_t shown = 0;
  opts.on_status = [&](const job_status& s) {
    if (s.rounds.round != shown) {
      shown = s.rounds.round;
      std::fprintf(stderr, "  %s round %lld: %.2f%% at %.1f s\n", c.name.c_str(),
                   static_cast<long long>(s.rounds.round), 100 * s.test_accuracy,
                   s.train_s);
    }
  };
  auto r = actors::run_fed_job(sys, fc, nodes, opts);
  for (auto& n : nodes) {
    caf::anon_send(n.handle, leave_atom_v);
  }
  auto out = read_curve(log_path);
  out.rounds = r.status.rounds.round;
  out.dropped = r.status.rounds.dropped_updates;
  if (r.status.phase != status_phase::finished) {
    out.error = r.status.error;
  }
  return out;
}

curve run_strategy(const actors::fed_config& base, const std::string& strategy,
                   const std::vector<double>& shares, const std::string& log_path) {
  cell c;
  c.name = strategy;
  c.strategy = strategy;
  c.shares = shares;
  return run_cell(base, c, log_path);
}

// The severe regime's shares (three stragglers at a tenth of the fast
// speed) and the mild one's (at 1/2, 1/2.5 and 1/3).
std::vector<double> severe_shares() {
  return shares_of({1, 1, 1, 1, 1, 1, 1, 0.1, 0.1, 0.1});
}
std::vector<double> mild_shares() {
  return shares_of({1, 1, 1, 1, 1, 1, 1, 0.5, 0.4, 1.0 / 3});
}

std::vector<cell> cells() {
  using algorithms::fed::aggregation;
  const auto severe = severe_shares();
  const auto mild = mild_shares();
  const auto oracle = shares_of(std::vector<double>(10, 1.0));
  return {
      {"apart/fedavg", "fedavg", aggregation::own, severe, 3, true},
      {"apart/deadline", "deadline", aggregation::own, severe, 3, true},
      {"apart/elfish", "elfish", aggregation::own, severe, 3, true},
      {"apart/elfish_samples", "elfish", aggregation::samples, severe, 3, true},
      {"dir/deadline", "deadline", aggregation::own, severe, 0, true},
      {"dir/elfish", "elfish", aggregation::own, severe, 0, true},
      {"apart/elfish_naive", "elfish", aggregation::naive, severe, 3, false},
      {"apart/heterofl", "heterofl", aggregation::own, severe, 3, false},
      {"apart/fedrolex", "fedrolex", aggregation::own, severe, 3, false},
      {"apart/fedbuff", "fedbuff", aggregation::own, severe, 3, false},
      {"apart/oracle", "fedavg", aggregation::own, oracle, 3, false},
      {"dir/fedavg", "fedavg", aggregation::own, severe, 0, false},
      {"mild/fedavg", "fedavg", aggregation::own, mild, 3, false},
      {"mild/deadline", "deadline", aggregation::own, mild, 3, false},
      {"mild/elfish", "elfish", aggregation::own, mild, 3, false},
  };
}

// The configuration every cell of `federated` and `federated_fedrs` starts
// from; the seed's, and --quick's budget.
actors::fed_config ten_clients(const bench_args& args) {
  actors::fed_config base;
  // A model whose cost is its width: ELFISH's masks save in proportion
  // (a CNN on 28x28 inputs has a floor of per-pixel work that no mask of
  // channels removes; see BENCHMARKS.md).
  base.model = "mlp:hidden=400";
  base.rounds = 100000; // the budget ends each run
  // --quick: long enough for FedAvg's first round (about 40 s here, waiting
  // for a tenth-speed client), so it still has a target to compare against
  base.time_budget_s = args.quick ? 60 : 90;
  base.alpha = 0.5;
  base.seed = args.seed;
  base.settings.local_epochs = 1;
  base.batch_size = 64;
  base.lr = 0.01;
  base.momentum = 0.9;
  return base;
}

// Runs `cells` in turn (the ones for this seed: a cell that is not a
// headline contrast runs at seed 1 only, and not with --quick), each into
// its log under `logs`; their curves by name, or none if one failed.
std::optional<std::map<std::string, curve>>
run_cells(const actors::fed_config& base, const std::vector<cell>& cells,
          const bench_args& args, const std::string& logs, report& rep) {
  const double budget = base.time_budget_s;
  // each seed's logs apart (seed 1's where they always were)
  auto dir = std::filesystem::path(args.out).parent_path() /
             (args.seed == 1 ? logs : logs + "-seed" + std::to_string(args.seed));
  std::map<std::string, curve> curves;
  for (auto& c : cells) {
    if (!c.every_seed && (args.seed != 1 || args.quick)) {
      continue;
    }
    auto key = c.name;
    std::replace(key.begin(), key.end(), '/', '_');
    std::filesystem::create_directories(dir / c.name.substr(0, c.name.find('/')));
    std::fprintf(stderr, "%s: %g s of training\n", c.name.c_str(), budget);
    auto got = run_cell(base, c, (dir / (c.name + ".jsonl")).string());
    if (!got.error.empty()) {
      std::fprintf(stderr, "%s failed: %s\n", c.name.c_str(), got.error.c_str());
      return std::nullopt;
    }
    rep.detail(key + "_curve", got.text());
    rep.detail(key + "_rounds", static_cast<double>(got.rounds));
    rep.detail(key + "_dropped_updates", static_cast<double>(got.dropped));
    rep.detail(key + "_final_acc", got.final_within(budget));
    rep.detail(key + "_last5_acc", got.last_within(budget));
    rep.detail(key + "_rounds_past_pace", static_cast<double>(got.past_pace));
    rep.detail(key + "_rounds_paced", static_cast<double>(got.paced));
    rep.detail(key + "_partial_tasks", static_cast<double>(got.partial));
    curves[c.name] = got;
  }
  return curves;
}

// Cell a's accuracy (the mean of its last 5 evaluations within the budget)
// minus cell b's, in points.
double points_between(std::map<std::string, curve>& curves, const std::string& a,
                      const std::string& b, double budget) {
  return 100 * (curves[a].last_within(budget) - curves[b].last_within(budget));
}

// Time-to-target speedup: FedAvg-wait's time to the target over a
// strategy's (t); 0 when the strategy never reached it.
double speedup_over(double fedavg_t, double t) {
  return std::isfinite(t) && t > 0 ? fedavg_t / t : 0.0;
}

// What every federated benchmark's report says of its setting.
void describe_run(report& rep, const actors::fed_config& base, const bench_args& args) {
  rep.detail("emulation", "EMULATED devices, compute-time dilation, one 2-core host");
  rep.detail("model", base.model);
  rep.detail("budget_s", base.time_budget_s);
  rep.detail("seed", static_cast<double>(args.seed));
}

// The run's wall time into the report, which is then written to `out`.
void finish_timed(report& rep, std::chrono::steady_clock::time_point started,
                  const std::string& out) {
  rep.detail(
      "wall_s",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  rep.finish(out);
}

} // namespace

int federated(const bench_args& args) {
  report rep("federated");
  auto started = std::chrono::steady_clock::now();
  auto base = ten_clients(args);
  const double budget = base.time_budget_s;
  describe_run(rep, base, args);
  rep.detail("clients", 10.0);
  rep.detail("fast_share", shares_of({1}).front());
  rep.detail("slow_share", shares_of({0.1}).front());
  rep.detail("alpha", base.alpha);
  rep.detail("classes_apart", 3.0);
  rep.detail("local_epochs", 1.0);
  auto ran = run_cells(base, cells(), args, "federated", rep);
  if (!ran) {
    return 1;
  }
  auto& curves = *ran;
  auto& fedavg = curves["apart/fedavg"];
  if (fedavg.points.empty()) {
    std::fprintf(stderr, "FedAvg finished no round within the budget: no target accuracy\n");
    return 1;
  }
  // the target: FedAvg-wait's accuracy at the end of its budget
  double target = fedavg.final_within(budget);
  double fedavg_t = fedavg.time_to(target);
  rep.detail("target_acc", target);
  rep.detail("fedavg_time_to_target_s", fedavg_t);
  auto pp = [&](const std::string& a, const std::string& b) {
    return points_between(curves, a, b, budget);
  };
  for (auto& [name, c] : curves) {
    auto key = name;
    std::replace(key.begin(), key.end(), '/', '_');
    double t = c.time_to(target);
    rep.detail(key + "_time_to_target_s", std::isfinite(t) ? t : -1.0);
    if (name.rfind("apart/", 0) == 0 && name != "apart/fedavg") {
      rep.detail(key + "_speedup", speedup_over(fedavg_t, t));
      rep.detail(key + "_minus_fedavg_pp", pp(name, "apart/fedavg"));
      rep.detail(key + "_minus_deadline_pp", pp(name, "apart/deadline"));
    }
  }
  // ELFISH's claims (issue 29): +2 points over dropping the stragglers where
  // that loses classes, twice as fast as waiting for them to FedAvg's
  // accuracy, and how much of it is the aggregation (same masks)
  rep.headline("elfish_over_deadline_pp", pp("apart/elfish", "apart/deadline"));
  rep.goal("elfish_over_deadline_pp", true, 2);
  rep.ci_low_name("elfish_over_deadline_pp", "elfish_over_deadline_ci_low");
  rep.headline("elfish_over_deadline_dir_pp", pp("dir/elfish", "dir/deadline"));
  rep.headline("elfish_time_to_target_speedup",
               speedup_over(fedavg_t, curves["apart/elfish"].time_to(target)));
  rep.goal("elfish_time_to_target_speedup", true, 2);
  rep.headline("elfish_aggregation_gain_pp", pp("apart/elfish", "apart/elfish_samples"));
  auto& e = curves["apart/elfish"];
  rep.headline("elfish_rounds_past_pace",
               e.paced ? static_cast<double>(e.past_pace) / static_cast<double>(e.paced)
                       : 0);
  rep.goal("elfish_rounds_past_pace", false, 0.1);
  if (curves.count("apart/elfish_naive")) {
    rep.detail("elfish_aggregation_gain_over_naive_pp",
               pp("apart/elfish", "apart/elfish_naive"));
    rep.detail("elfish_minus_oracle_pp", pp("apart/elfish", "apart/oracle"));
    rep.detail("elfish_over_deadline_mild_pp", pp("mild/elfish", "mild/deadline"));
  }
  finish_timed(rep, started, args.out);
  return 0;
}

int federated_niid(const bench_args& args) {
  report rep("federated_niid");
  actors::fed_config base;
  // NIID-Bench's simple CNN has conv 6 and 16 (5x5, valid) and dense 120,
  // 84; the zoo's cnn has same-padded convs and one hidden dense layer
  base.model = "cnn:c1=6,c2=16,hidden=120";
  base.rounds = args.quick ? 2 : 50;
  base.settings.local_epochs = args.quick ? 1 : 10;
  base.settings.round_timeout_s = 3600; // no emulation, nothing is late
  base.alpha = 0.5;
  base.seed = args.seed;
  base.batch_size = 64;
  base.lr = 0.01;
  base.momentum = 0.9;
  // each seed's logs apart (seed 1's where they always were)
  auto dir = std::filesystem::path(args.out).parent_path() /
             (args.seed == 1 ? std::string("federated")
                             : "federated-seed" + std::to_string(args.seed));
  std::filesystem::create_directories(dir);
  auto log = (dir / "niid_fedavg.jsonl").string();
  auto c = run_strategy(base, "fedavg", std::vector<double>(10, 1.0), log);
  if (!c.error.empty()) {
    std::fprintf(stderr, "failed: %s\n", c.error.c_str());
    return 1;
  }
  rep.detail("model", base.model);
  rep.detail("rounds", static_cast<double>(c.rounds));
  rep.detail("local_epochs", static_cast<double>(base.settings.local_epochs));
  rep.detail("curve", c.text());
  rep.detail("flower_niid_bench_reference", 0.8809);
  rep.headline("niid_fedavg_final_acc", c.points.empty() ? 0 : c.points.back().second);
  rep.finish(args.out);
  return 0;
}

// The headline regime of `federated` (stragglers at a tenth of the fast
// speed that alone hold classes 7-9) with FedRS's restricted softmax (Li and
// Zhan 2021, alpha 0.5) in every client's local training, every strategy
// alike: a fast client then pushes the logits of the classes it never sees
// down less, so what the stragglers train of them can last in the global
// model. Every seed runs the four contrasts.
int federated_fedrs(const bench_args& args) {
  report rep("federated_fedrs");
  auto started = std::chrono::steady_clock::now();
  auto base = ten_clients(args);
  const double budget = base.time_budget_s;
  using algorithms::fed::aggregation;
  const auto severe = severe_shares();
  constexpr double alpha = 0.5;
  const std::vector<cell> contrasts = {
      {"fedrs/fedavg", "fedavg", aggregation::own, severe, 3, true, alpha},
      {"fedrs/deadline", "deadline", aggregation::own, severe, 3, true, alpha},
      {"fedrs/elfish", "elfish", aggregation::own, severe, 3, true, alpha},
      {"fedrs/elfish_samples", "elfish", aggregation::samples, severe, 3, true, alpha},
  };
  describe_run(rep, base, args);
  rep.detail("restricted_softmax", alpha);
  rep.detail("classes_apart", 3.0);
  auto ran = run_cells(base, contrasts, args, "federated_fedrs", rep);
  if (!ran) {
    return 1;
  }
  auto& curves = *ran;
  auto& fedavg = curves["fedrs/fedavg"];
  if (fedavg.points.empty()) {
    std::fprintf(stderr,
                 "FedAvg finished no round within the budget: no target accuracy\n");
    return 1;
  }
  double target = fedavg.final_within(budget);
  double fedavg_t = fedavg.time_to(target);
  rep.detail("target_acc", target);
  auto pp = [&](const std::string& a, const std::string& b) {
    return points_between(curves, a, b, budget);
  };
  auto speedup = [&](const std::string& a) {
    return speedup_over(fedavg_t, curves[a].time_to(target));
  };
  rep.detail("fedrs_fedavg_minus_deadline_pp", pp("fedrs/fedavg", "fedrs/deadline"));
  rep.headline("fedrs_elfish_over_deadline_pp", pp("fedrs/elfish", "fedrs/deadline"));
  rep.goal("fedrs_elfish_over_deadline_pp", true, 2);
  rep.headline("fedrs_elfish_samples_over_deadline_pp",
               pp("fedrs/elfish_samples", "fedrs/deadline"));
  rep.goal("fedrs_elfish_samples_over_deadline_pp", true, 2);
  rep.headline("fedrs_elfish_time_to_target_speedup", speedup("fedrs/elfish"));
  rep.headline("fedrs_elfish_samples_time_to_target_speedup",
               speedup("fedrs/elfish_samples"));
  rep.headline("fedrs_elfish_aggregation_gain_pp",
               pp("fedrs/elfish", "fedrs/elfish_samples"));
  finish_timed(rep, started, args.out);
  return 0;
}

// ELFISH's aggregation (samples x kept fraction) against sample weights with
// the same masks, in the two regimes `federated` runs ELFISH at one seed or
// without that contrast: Dirichlet(0.5) over every class with the severe
// stragglers, and the mild stragglers (1/2-1/3 speed) with classes apart.
// With `federated`'s headline regime, where sample weights win, this says
// whether ELFISH's weighting earns its place anywhere. Plain softmax.
int federated_aggregation(const bench_args& args) {
  report rep("federated_aggregation");
  auto started = std::chrono::steady_clock::now();
  auto base = ten_clients(args);
  const double budget = base.time_budget_s;
  using algorithms::fed::aggregation;
  const auto severe = severe_shares();
  const auto mild = mild_shares();
  const std::vector<cell> contrasts = {
      {"agg/dir_elfish", "elfish", aggregation::own, severe, 0, true},
      {"agg/dir_elfish_samples", "elfish", aggregation::samples, severe, 0, true},
      {"agg/mild_elfish", "elfish", aggregation::own, mild, 3, true},
      {"agg/mild_elfish_samples", "elfish", aggregation::samples, mild, 3, true},
  };
  describe_run(rep, base, args);
  auto ran = run_cells(base, contrasts, args, "federated_aggregation", rep);
  if (!ran) {
    return 1;
  }
  auto& curves = *ran;
  auto pp = [&](const std::string& a, const std::string& b) {
    return points_between(curves, a, b, budget);
  };
  rep.headline("elfish_aggregation_gain_dir_pp",
               pp("agg/dir_elfish", "agg/dir_elfish_samples"));
  rep.headline("elfish_aggregation_gain_mild_pp",
               pp("agg/mild_elfish", "agg/mild_elfish_samples"));
  finish_timed(rep, started, args.out);
  return 0;
}

} // namespace salamander::bench
