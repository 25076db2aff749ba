// Pipeline training against one device (issue 28): four EMULATED devices of
// one CPU share each (node processes slowed by compute-time dilation: a
// cgroup quota runs a stage at full speed, then stops it for the rest of its
// 100 ms period, and a pipeline's neighbours wait out the stop; loopback
// links)
// against one device of the same share, on the same host in the same run:
//   - a ViT of 8 blocks at 0.4 core a device, and the zoo CNN at 0.25;
//   - the pipeline-only plan (profiled, partitioned, `--stages 4` for the
//     ViT, re-planned live) under the async schedule, the plan it ended on
//     flushed every batch (1f1b), and data parallelism over the four;
//   - batches of 64 in 4 micro-batches (train's defaults);
//   - steady-state samples/s: each run trains for a fixed wall time and is
//     scaling_run over its second half.
// Then the accuracy the async schedule costs: the CNN on Fashion-MNIST, one
// epoch on three in-process stages (unemulated), async against 1f1b after
// the same samples (`async_minus_flush_accuracy_pp`).
#include "actors/elapsed.hpp"
#include "actors/node/node_process.hpp"
#include "actors/node/system.hpp"
#include "actors/train/train_job.hpp"
#include "bench/benches.hpp"
#include "bench/report.hpp"
#include "models/data.hpp"

#include <caf/io/middleman.hpp>

#include <chrono>
#include <map>

namespace salamander::bench {

namespace {



struct scaling_run {
  double samples_per_s = 0;
  std::string plan;
  std::string schedule;
  int64_t batches = 0;
};

// Trains `jc` on `nodes` for `seconds` (after its plan is running) and
// measures samples/s over the second half of that time.
scaling_run scaling_run_for(caf::actor_system& sys, const actors::job_config& jc,
                   const std::vector<actors::remote_node>& nodes,
                   const std::shared_ptr<const models::dataset>& data, double seconds) {
  struct point {
    double t;
    int64_t committed;
  };
  std::vector<point> points;
  cluster_actor sup;
  bool stopped = false;
  auto start = std::chrono::steady_clock::now();
  double training_from = -1;
  actors::job_options opts;
  opts.poll = std::chrono::milliseconds(50);
  opts.on_start = [&](cluster_actor s) { sup = s; };
  opts.on_status = [&](const job_status& s) {
    double t = actors::since(start);
    if (s.phase != status_phase::training || stopped) {
      return;
    }
    if (training_from < 0 && s.training.committed > 0) {
      training_from = t; // the plan runs (profiling and launch are not counted)
    }
    if (training_from >= 0) {
      points.push_back({t, s.training.committed});
      if (t - training_from >= seconds) {
        caf::anon_send(sup, leave_atom_v);
        stopped = true;
      }
    }
  };
  auto r = actors::run_job(sys, jc, nodes, data, data, opts);
  if (!r.status.error.empty() && !stopped) {
    throw std::runtime_error("train_scaling run failed: " + r.status.error);
  }
  scaling_run m;
  m.plan = r.status.plan;
  m.schedule = r.status.pipeline.schedule;
  m.batches = r.status.training.committed;
  if (points.size() >= 2) {
    auto half = training_from + seconds / 2;
    auto a = std::find_if(points.begin(), points.end(),
                          [&](const point& p) { return p.t >= half; });
    auto& b = points.back();
    if (a != points.end() && b.t > a->t) {
      m.samples_per_s = static_cast<double>((b.committed - a->committed) * jc.batch_size) /
                        (b.t - a->t);
    }
  }
  return m;
}

// One schedule whose accuracy is asked for, under its key.
struct schedule_case {
  std::string key;
  std::string schedule;
  uint32_t aggregate = 0; ///< weight aggregation every K updates (0: off)
  bool predict = true;    ///< async: weight prediction (train's default)
  uint32_t warmup = 0;    ///< the learning rate's warm-up in batches (0: none)
};

// The model an accuracy comparison trains on Fashion-MNIST, on three
// in-process stages, and for how long.
struct accuracy_model {
  std::string model = "cnn";
  std::vector<size_t> balance = {2, 1, 1};
  int64_t max_batches = 0; ///< 0: one epoch (938 batches of 64)
  double lr = 2e-3;        ///< Adam's (train's default)
};

// Test accuracy of `am` on Fashion-MNIST after its batches on three
// in-process stages (unemulated), seed `args.seed`, for each case asked,
// by its key.
std::map<std::string, double> schedule_accuracies(const bench_args& args, report& rep,
                                                  const std::vector<schedule_case>& runs,
                                                  const accuracy_model& am = {}) {
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto desc = models::describe(models::model_spec::parse(am.model));
  auto train =
      std::make_shared<models::dataset>(models::load_dataset("fashion-mnist", true, desc));
  auto test =
      std::make_shared<models::dataset>(models::load_dataset("fashion-mnist", false, desc));
  std::map<std::string, double> acc;
  for (auto& run : runs) {
    auto& key = run.key;
    actors::job_config jc;
    jc.model = am.model;
    jc.dataset = "fashion-mnist";
    jc.seed = args.seed;
    jc.batch_size = 64;
    jc.micro_batches = 4;
    jc.epochs = 1;
    jc.max_batches = args.quick ? 150 : am.max_batches;
    jc.schedule = run.schedule;
    jc.weight_aggregation = run.aggregate;
    jc.weight_prediction = run.predict;
    jc.warmup_batches = run.warmup;
    jc.lr = am.lr;
    jc.balance = am.balance;
    jc.replan_gain = 0;
    jc.progress_timeout = std::chrono::seconds(300);
    auto r = actors::run_job(sys, jc, actors::local_nodes(sys, 3, 1), train, test);
    if (r.status.phase != status_phase::finished) {
      throw std::runtime_error("accuracy run (" + key + ") failed: " + r.status.error);
    }
    acc[key] = r.status.test_accuracy;
    std::fprintf(stderr,
                 "%s on Fashion-MNIST, %s, seed %llu: test accuracy %.2f%% after %lld "
                 "batches\n",
                 am.model.c_str(), key.c_str(),
                 static_cast<unsigned long long>(args.seed), 100 * r.status.test_accuracy,
                 static_cast<long long>(r.status.training.committed));
    rep.detail("accuracy_" + key, r.status.test_accuracy);
  }
  return acc;
}

} // namespace

int train_scaling(const bench_args& args) {
  torch::set_num_threads(1);
  report rep("train_scaling");
  rep.detail("emulation", "EMULATED devices: 4 node processes slowed by compute-time "
                          "dilation to their CPU share on one host, loopback links");
  double seconds = args.quick ? 15 : 50;
  struct model_case {
    std::string key, model;
    double share;
    size_t stages;
  };
  std::vector<model_case> cases = {
      {"", "vit:size=tiny,depth=8,image=32,patch=8,channels=3", 0.4, 4},
      {"_cnn", "cnn", 0.25, 0}};
  std::vector<std::pair<std::string, double>> heads;
  for (auto& c : cases) {
    actors::process_cluster procs(
        4, "ts", emulated_shares({c.share, c.share, c.share, c.share}, true));
    caf::actor_system_config cfg;
    actors::configure(cfg);
    caf::actor_system sys{cfg};
    auto nodes = connected_nodes(sys, procs.nodes());
    actors::job_config jc;
    jc.model = c.model;
    jc.dataset = "synthetic";
    // train's defaults: batches of 64 in 4 micro-batches (at 32, an
    // operation of 8 samples took about as long as a message between two
    // processes on this host, and the idle time followed the messages:
    // bench bubble)
    jc.batch_size = 64;
    jc.micro_batches = 4;
    jc.evaluate = false;
    jc.epochs = 1000; // stopped after the scaling_run time
    jc.replan_gain = 0;
    jc.progress_timeout = std::chrono::seconds(300);
    auto desc = models::describe(models::model_spec::parse(jc.model));
    auto data = std::make_shared<models::dataset>(
        models::make_synthetic(1, jc.batch_size * 20, desc.input, desc.classes));
    rep.detail("model" + c.key, c.model);
    rep.detail("cpu_share" + c.key, c.share);

    auto one = jc;
    one.balance = {desc.layers.size()};
    auto alone = scaling_run_for(sys, one, {nodes[0]}, data, seconds);
    std::fprintf(stderr, "%s: one device (%.2f core): %.1f samples/s\n", c.model.c_str(),
                 c.share, alone.samples_per_s);
    rep.detail("one_device_samples_per_s" + c.key, alone.samples_per_s);

    // the planner's pipeline under the async schedule; the same plan flushed
    auto async = jc;
    async.auto_plan = true;
    async.allow_data_parallel = false;
    async.stages = c.stages;
    async.schedule = "async";
    // live re-planning on, as `train` runs: profiles taken under a CPU quota
    // are noisy, and the stages' measured times correct the plan within the
    // first half (not measured); the flushed run reuses the plan it ends on
    async.replan_gain = 0.15;
    auto piped = scaling_run_for(sys, async, nodes, data, seconds);
    std::vector<size_t> balance;
    for (size_t at = 0; (at = piped.plan.find('[', at)) != std::string::npos; ++at) {
      auto comma = piped.plan.find(',', at);
      auto close = piped.plan.find(')', at);
      balance.push_back(std::stoul(piped.plan.substr(comma + 1, close - comma - 1)) -
                        std::stoul(piped.plan.substr(at + 1, comma - at - 1)));
    }
    auto flushed_cfg = jc;
    flushed_cfg.balance = balance;
    flushed_cfg.schedule = "1f1b";
    auto flushed = scaling_run_for(sys, flushed_cfg, std::vector<actors::remote_node>(
                                                   nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(balance.size())),
                             data, seconds);
    auto dp_cfg = jc;
    dp_cfg.data_parallel = true;
    auto dp = scaling_run_for(sys, dp_cfg, nodes, data, seconds);
    // the same members summing along their chain instead of through the
    // supervisor (--dp-reduce chain)
    auto chain_cfg = dp_cfg;
    chain_cfg.dp_reduce = "chain";
    auto chain = scaling_run_for(sys, chain_cfg, nodes, data, seconds);
    double base = std::max(alone.samples_per_s, 1e-9);
    for (auto& [name, m] : std::vector<std::pair<std::string, scaling_run>>{
             {"pipeline_async", piped},
             {"pipeline_1f1b", flushed},
             {"data_parallel", dp},
             {"data_parallel_chain", chain}}) {
      std::fprintf(stderr, "%s: %-15s %7.1f samples/s  %.2fx  %s\n", c.model.c_str(),
                   name.c_str(), m.samples_per_s, m.samples_per_s / base, m.plan.c_str());
      rep.detail(name + "_samples_per_s" + c.key, m.samples_per_s);
      rep.detail(name + "_plan" + c.key, m.plan);
    }
    rep.detail("async_schedule" + c.key, piped.schedule);
    heads.push_back({"train_scaling_pipeline_async" + c.key, piped.samples_per_s / base});
    heads.push_back({"train_scaling_pipeline_1f1b" + c.key, flushed.samples_per_s / base});
    heads.push_back({"train_scaling_data_parallel" + c.key, dp.samples_per_s / base});
    heads.push_back(
        {"train_scaling_data_parallel_chain" + c.key, chain.samples_per_s / base});
  }

  // What the schedule costs in accuracy: the same samples, async and flushed
  auto acc = schedule_accuracies(args, rep, {{"1f1b", "1f1b"}, {"async", "async"}});
  heads.push_back({"async_minus_flush_accuracy_pp", 100 * (acc["async"] - acc["1f1b"])});
  for (auto& [k, v] : heads) {
    rep.headline(k, v);
  }
  rep.finish(args.out);
  return 0;
}

// The async schedule's accuracy against the flushed one: as train runs it
// (weight prediction), with FTPipeHD's plain stashing, and that with
// FTPipeHD's weight aggregation (every 5 updates, as FTPipeHD's configs set
// it), for one seed; --seeds N gives means and intervals.
int async_accuracy(const bench_args& args) {
  report rep("async_accuracy");
  rep.detail("emulation", "none: three stages in one process, one thread each");
  rep.detail("seed", static_cast<double>(args.seed));
  auto acc = schedule_accuracies(args, rep,
                                 {{"1f1b", "1f1b"},
                                  {"async", "async"},
                                  {"async_stash", "async", 0, false},
                                  {"async_stash_aggregate5", "async", 5, false}});
  auto pp = [&](const std::string& a, const std::string& b) {
    return 100 * (acc.at(a) - acc.at(b));
  };
  rep.headline("async_minus_flush_accuracy_pp", pp("async", "1f1b"));
  rep.headline("async_stash_minus_flush_accuracy_pp", pp("async_stash", "1f1b"));
  rep.headline("async_prediction_gain_pp", pp("async", "async_stash"));
  rep.headline("async_aggregate5_minus_async_stash_accuracy_pp",
               pp("async_stash_aggregate5", "async_stash"));
  rep.headline("async_aggregate5_minus_flush_accuracy_pp",
               pp("async_stash_aggregate5", "1f1b"));
  // issue 28: async within 1 point of the flushed schedule
  rep.goal("async_minus_flush_accuracy_pp", true, -1);
  rep.finish(args.out);
  return 0;
}

// The same for a ViT (issue 28 asks the CNN and the ViT): 4 blocks of
// ViT-Tiny's width with a half-width MLP, 7x7 patches of Fashion-MNIST,
// layers 2,2,2, one epoch, Adam at 1e-3 (at train's 2e-3 this ViT, without
// warm-up, trains poorly under any schedule: 71% after 300 batches, 78%
// at 1e-3).
const accuracy_model vit_accuracy{"vit:size=tiny,depth=4,mlp=384", {2, 2, 2}, 0, 1e-3};

int async_accuracy_vit(const bench_args& args) {
  report rep("async_accuracy_vit");
  rep.detail("emulation", "none: three stages in one process, one thread each");
  rep.detail("seed", static_cast<double>(args.seed));
  auto& vit = vit_accuracy;
  rep.detail("model", vit.model);
  auto acc = schedule_accuracies(
      args, rep,
      {{"1f1b", "1f1b"}, {"async", "async"}, {"async_stash", "async", 0, false}}, vit);
  auto pp = [&](const std::string& a, const std::string& b) {
    return 100 * (acc.at(a) - acc.at(b));
  };
  rep.headline("async_minus_flush_accuracy_pp_vit", pp("async", "1f1b"));
  rep.headline("async_stash_minus_flush_accuracy_pp_vit", pp("async_stash", "1f1b"));
  rep.headline("async_prediction_gain_pp_vit", pp("async", "async_stash"));
  rep.goal("async_minus_flush_accuracy_pp_vit", true, -1);
  rep.finish(args.out);
  return 0;
}

// The same ViT trained as ViTs usually are, with the learning rate raised
// linearly over its first batches (a tenth of the epoch: 94 of 938), under
// 1f1b and async (weight prediction). The seeds are async_accuracy_vit's
// (same initialisation and batches), so each seed also compares with that
// benchmark's runs without the warm-up.
int async_accuracy_vit_warmup(const bench_args& args) {
  constexpr uint32_t warmup = 94;
  report rep("async_accuracy_vit_warmup");
  rep.detail("emulation", "none: three stages in one process, one thread each");
  rep.detail("seed", static_cast<double>(args.seed));
  rep.detail("model", vit_accuracy.model);
  rep.detail("warmup_batches", static_cast<double>(warmup));
  auto acc = schedule_accuracies(args, rep,
                                 {{"1f1b_warmup", "1f1b", 0, true, warmup},
                                  {"async_warmup", "async", 0, true, warmup}},
                                 vit_accuracy);
  rep.headline("async_minus_flush_accuracy_pp_vit_warmup",
               100 * (acc.at("async_warmup") - acc.at("1f1b_warmup")));
  rep.goal("async_minus_flush_accuracy_pp_vit_warmup", true, -1);
  rep.finish(args.out);
  return 0;
}

} // namespace salamander::bench
