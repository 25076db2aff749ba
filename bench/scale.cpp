// 32 nodes on one host (issue 32, item 3). EMULATED devices: `salamander
// node` processes on loopback, each with 1/16 of a core by compute-time
// dilation (32 of them are the host's two cores), training the CNN on
// synthetic data, batches of 256 in 32 micro-batches so that every node
// can take a share (the planner weighs that against the gradient sum each
// member adds). The same run with 4 such nodes beside it:
//
// - the planner's time on the job's own measured profiles (the job's
//   "planned" event: plan_ms, whether it was exact, over how many types);
// - the oldest heartbeat among the live nodes (the cluster's status rows,
//   read once the job trains);
// - recovery after a kill -9 of a node the plan uses: from the kill to the
//   first batch committed after it, and the supervisor's own part of it;
// - the planner alone on 32 devices of 3 kinds (synthetic, within 3% of
//   their kind: PipeEdge's grouping makes it exact while the table is
//   small), 8 and 24 layers, median of 21 instances, for a reference.
//
// And federated learning with many virtual clients: 1,000 clients on 4
// node processes (250 a node, 60 Fashion-MNIST examples each), 10% sampled
// a round, against 100 clients (25 a node, 600 each) with 10% sampled: the
// same examples trained a round. One node is killed (kill -9) after round
// 2 in both; every round must complete. The figure is the ratio of their
// median round times. No emulation there: the nodes share the host.
//
// Headlines: recovery_32_over_4 (goal <= 2), planner_32_ms (goal <= 100),
// fed_1000_clients_round_ratio (goal <= 1.5).
#include "actors/cluster/cluster_supervisor.hpp"
#include "actors/federated/fed_job.hpp"
#include "actors/node/node_process.hpp"
#include "actors/node/system.hpp"
#include "actors/train/train_job.hpp"
#include "algorithms/partitioner.hpp"
#include "bench/benches.hpp"
#include "bench/report.hpp"

#include <caf/io/middleman.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <regex>

namespace salamander::bench {

namespace {

using clock = std::chrono::steady_clock;

struct scale_run {
  double recovery_s = 0;  ///< kill -9 -> first batch committed after it
  double recover_s = 0;   ///< the supervisor's part (re-plan, spawn, pull)
  double plan_ms = 0;     ///< the first plan, on the measured profiles
  bool plan_exact = false;
  int64_t device_types = 0;
  double oldest_heartbeat_s = 0;
  size_t rows = 0;
  std::string plan, plan_after;
  std::string killed;
};

// The first "planned" event of a metrics log.
nlohmann::json first_planned(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"event\":\"planned\"") != std::string::npos) {
      return nlohmann::json::parse(line);
    }
  }
  throw std::runtime_error("no planned event in " + path);
}

// The last node named in a plan's text ("dp(s1:2 s7:1)[0,8)", "s3[0,2) s1[2,8)").
std::string last_node(const std::string& plan, const std::string& prefix) {
  std::regex name(prefix + "[0-9]+");
  std::string last;
  for (auto it = std::sregex_iterator(plan.begin(), plan.end(), name);
       it != std::sregex_iterator(); ++it) {
    last = it->str();
  }
  return last;
}

// The benchmark's side of a cluster: a node is lost after 3 s of silence.
caf::actor_system_config& configured(caf::actor_system_config& cfg) {
  actors::system_options sopts;
  sopts.connection_timeout = std::chrono::milliseconds(3000);
  actors::configure(cfg, sopts);
  return cfg;
}

scale_run run_nodes(int n, const bench_args& args, const std::filesystem::path& dir) {
  const std::string prefix = "s";
  std::vector<std::vector<std::string>> extra(
      static_cast<size_t>(n), {"--cpu-share", "0.0625", "--dilate", "--threads", "1"});
  actors::process_cluster c(n, prefix, extra);
  caf::actor_system_config cfg;
  caf::actor_system sys{configured(cfg)};
  auto nodes = connected_nodes(sys, c.nodes());

  actors::job_config jc;
  jc.model = "cnn";
  jc.dataset = "synthetic";
  jc.batch_size = 256;
  jc.micro_batches = 32;
  jc.evaluate = false;
  jc.max_batches = args.quick ? 14 : 30;
  jc.replicate_every = 5;
  jc.auto_plan = true; // every node profiled, then the planner
  jc.metrics_path = (dir / ("scale" + std::to_string(n) + ".jsonl")).string();
  auto desc = models::describe(models::model_spec::parse(jc.model));
  auto train = std::make_shared<models::dataset>(
      models::make_synthetic(1, 256 * 40, desc.input, desc.classes));

  scale_run out;
  actors::job_options opts;
  opts.poll = std::chrono::milliseconds(5);
  cluster_actor sup;
  opts.on_start = [&](cluster_actor s) { sup = s; };
  clock::time_point killed_at{};
  int64_t at_kill = 0;
  bool killed = false, done = false, looked = false;
  opts.on_status = [&](const job_status& s) {
    if (s.phase != status_phase::training) {
      return;
    }
    if (!looked && s.training.committed >= 2) {
      // the cluster's rows: every node's last heartbeat
      looked = true;
      caf::scoped_actor self{sys};
      self->request(sup, std::chrono::seconds(10), caf::get_atom_v)
          .receive(
              [&](const job_status& full) {
                out.rows = full.nodes.size();
                for (auto& r : full.nodes) {
                  out.oldest_heartbeat_s = std::max(out.oldest_heartbeat_s, r.last_heartbeat_s);
                }
              },
              [&](caf::error&) {});
    }
    if (!killed && s.training.committed >= jc.max_batches / 2) {
      out.plan = s.plan;
      out.killed = last_node(s.plan, prefix);
      if (out.killed.empty()) {
        throw std::runtime_error("no node named in the plan: " + s.plan);
      }
      killed = true;
      at_kill = s.training.committed;
      killed_at = clock::now();
      c[static_cast<size_t>(std::stoi(out.killed.substr(prefix.size())) - 1)].signal(SIGKILL);
    }
    if (killed && !done && s.pipeline.recoveries > 0 &&
        s.training.committed > s.pipeline.rollback_version) {
      done = true;
      out.recovery_s = std::chrono::duration<double>(clock::now() - killed_at).count();
      out.recover_s = s.pipeline.last_recovery_s;
      out.plan_after = s.plan;
    }
  };
  auto r = actors::run_job(sys, jc, nodes, train, train, opts);
  if (r.status.phase != status_phase::finished || !done) {
    throw std::runtime_error("the " + std::to_string(n) +
                             "-node run did not finish with a recovery: " + r.status.error);
  }
  (void)at_kill;
  auto planned = first_planned(jc.metrics_path);
  out.plan_ms = planned.value("plan_ms", 0.0);
  out.plan_exact = planned.value("exact", false);
  out.device_types = planned.value("device_types", int64_t{0});
  return out;
}

// The planner alone: 32 devices of 3 kinds (speeds 1, 0.5 and 0.25, each
// device's figures within 3% of its kind's, memory by kind), a model of
// `layers` layers, training under 1F1B; the median of `instances` timings
// and how many of the plans were exact.
double synthetic_32_ms(size_t layers, int instances, int& exact) {
  std::vector<double> ms;
  exact = 0;
  for (int i = 0; i < instances; ++i) {
    algorithms::splitmix64 g(static_cast<uint64_t>(i) + 1);
    algorithms::plan_request req;
    req.mode = algorithms::plan_mode::training;
    req.micro_batch_size = 8;
    req.micro_batches = 32;
    for (size_t l = 0; l < layers; ++l) {
      req.layers.push_back({"l" + std::to_string(l), 1e5 * (1 + 9 * g.unit()),
                            4e4 * (1 + g.unit()), 2e4 * (1 + g.unit())});
    }
    const double speed[3] = {1, 2, 4};
    std::vector<double> base(layers);
    for (auto& b : base) {
      b = 1e-3 * (0.5 + g.unit());
    }
    for (size_t d = 0; d < 32; ++d) {
      algorithms::device_profile p;
      p.name = "d" + std::to_string(d);
      auto kind = d % 3;
      for (size_t l = 0; l < layers; ++l) {
        // measured figures: within 3% of the kind's
        double noise = 1 + 0.03 * (g.unit() - 0.5);
        p.forward_s.push_back(base[l] * speed[kind] * noise);
        p.backward_s.push_back(2 * base[l] * speed[kind] * noise);
      }
      p.memory_bytes = 1e9 / static_cast<double>(kind + 1);
      p.link_bytes_per_s = 1e8;
      req.devices.push_back(p);
    }
    auto t = clock::now();
    auto plan = algorithms::plan_partition(req);
    ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t).count());
    exact += plan.exact ? 1 : 0;
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct fed_run {
  std::vector<double> round_s;
  int64_t rounds = 0;
  int64_t clients = 0;
  double median_s = 0;
};

// `per_node` virtual clients on each of 4 node processes, `fraction` of them
// a round; node 4 killed once round `kill_after` is done.
fed_run run_clients(int64_t per_node, double fraction, int64_t rounds, int64_t kill_after,
                    const std::filesystem::path& dir) {
  actors::process_cluster c(4, "f");
  caf::actor_system_config cfg;
  caf::actor_system sys{configured(cfg)};
  auto nodes = connected_nodes(sys, c.nodes());
  actors::fed_config fc;
  fc.strategy = "fedavg";
  fc.model = "cnn";
  fc.dataset = "fashion-mnist";
  fc.rounds = rounds;
  fc.alpha = 0.5;
  fc.seed = 1;
  fc.settings.local_epochs = 1;
  fc.settings.round_timeout_s = 600; // no emulation: nothing is late
  fc.clients_per_node = per_node;
  fc.fraction_fit = fraction;
  fc.test_samples = 2000;
  fc.metrics_path = (dir / ("fed" + std::to_string(per_node) + ".jsonl")).string();
  actors::job_options opts;
  opts.poll = std::chrono::milliseconds(100);
  bool killed = false;
  opts.on_status = [&](const job_status& s) {
    if (!killed && s.rounds.round >= kill_after) {
      killed = true;
      c[3].signal(SIGKILL);
    }
  };
  auto r = actors::run_fed_job(sys, fc, nodes, opts);
  if (r.status.phase != status_phase::finished || r.status.rounds.round != rounds) {
    throw std::runtime_error("federated run with " + std::to_string(4 * per_node) +
                             " clients did not complete its rounds: " + r.status.error);
  }
  fed_run out;
  out.rounds = r.status.rounds.round;
  out.clients = 4 * per_node;
  std::ifstream in(fc.metrics_path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("event", "") == "round") {
      out.round_s.push_back(j.value("round_s", 0.0));
    }
  }
  auto sorted = out.round_s;
  std::sort(sorted.begin(), sorted.end());
  out.median_s = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  return out;
}

std::string joined(const std::vector<double>& xs) {
  std::string out;
  for (auto x : xs) {
    out += fmt::format("{}{:.2f}", out.empty() ? "" : " ", x);
  }
  return out;
}

} // namespace

int scale(const bench_args& args) {
  report rep("scale");
  rep.detail("emulation",
             "node processes on one 2-core host, loopback, each 1/16 of a core by "
             "compute-time dilation (--cpu-share 0.0625 --dilate)");
  scratch_dir scratch("salamander-scale");
  const auto& dir = scratch.path();
  std::map<int, scale_run> runs;
  for (int n : {4, 32}) {
    auto r = run_nodes(n, args, dir);
    std::fprintf(stderr,
                 "%2d nodes: plan %.2f ms (%s, %lld type(s)), oldest heartbeat %.2f s over %zu "
                 "rows; kill -9 of %s: %.3f s to the next batch (supervisor's part %.3f s)\n"
                 "          plan %s -> %s\n",
                 n, r.plan_ms, r.plan_exact ? "exact" : "heuristic",
                 static_cast<long long>(r.device_types), r.oldest_heartbeat_s, r.rows,
                 r.killed.c_str(), r.recovery_s, r.recover_s, r.plan.c_str(),
                 r.plan_after.c_str());
    auto key = std::to_string(n);
    rep.detail("plan_ms_" + key, r.plan_ms);
    rep.detail("plan_exact_" + key, r.plan_exact ? 1.0 : 0.0);
    rep.detail("device_types_" + key, static_cast<double>(r.device_types));
    rep.detail("oldest_heartbeat_s_" + key, r.oldest_heartbeat_s);
    rep.detail("recovery_s_" + key, r.recovery_s);
    rep.detail("recover_s_" + key, r.recover_s);
    rep.detail("plan_" + key, r.plan);
    rep.detail("plan_after_kill_" + key, r.plan_after);
    rep.detail("killed_" + key, r.killed);
    runs[n] = r;
  }
  // --- many virtual clients ---------------------------------------------
  int64_t rounds = args.quick ? 4 : 8;
  auto many = run_clients(250, 0.1, rounds, 2, dir);
  auto few = run_clients(25, 0.1, rounds, 2, dir);
  for (auto* f : {&many, &few}) {
    std::fprintf(stderr, "%4lld clients (10%% a round): %lld rounds, median %.2f s (%s)\n",
                 static_cast<long long>(f->clients), static_cast<long long>(f->rounds),
                 f->median_s, joined(f->round_s).c_str());
    auto key = std::to_string(f->clients);
    rep.detail("fed_round_s_median_" + key, f->median_s);
    rep.detail("fed_round_s_" + key, joined(f->round_s));
    rep.detail("fed_rounds_" + key, static_cast<double>(f->rounds));
  }
  int instances = args.quick ? 5 : 21;
  for (size_t layers : {8, 24}) {
    int exact = 0;
    double ms = synthetic_32_ms(layers, instances, exact);
    std::fprintf(stderr,
                 "planner alone, 32 devices of 3 kinds, %zu layers: median %.2f ms, %d of %d "
                 "plans exact over the types\n",
                 layers, ms, exact, instances);
    rep.detail("planner_32x" + std::to_string(layers) + "_synthetic_ms", ms);
    rep.detail("planner_32x" + std::to_string(layers) + "_synthetic_exact",
               static_cast<double>(exact) / instances);
  }
  rep.headline("recovery_32_over_4", runs[32].recovery_s / runs[4].recovery_s);
  rep.headline("planner_32_ms", runs[32].plan_ms);
  rep.headline("fed_1000_clients_round_ratio", many.median_s / few.median_s);
  rep.finish(args.out);
  return 0;
}

} // namespace salamander::bench
