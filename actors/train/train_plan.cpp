// Plans of the training job: the first plan (the user's balance, an even
// split, or the partitioner over a profiling round), launching a plan
// through a launcher, and live re-planning at a flush when the capacity
// model predicts enough gain (algorithms/replan.hpp decides).
#include "actors/logging.hpp"
#include "actors/pipeline/launcher.hpp"
#include "actors/train/train_job_impl.hpp"
#include "algorithms/recovery.hpp"
#include "algorithms/replan.hpp"
#include "messages/errors.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

namespace salamander::actors::train_detail {

namespace {

// The stage specs of a plan; the chain replica of stage i goes to the next
// stage's node, the last stage's to the central holder.
std::vector<stage_spec> make_specs(const train_job_state& st, const stage_plan& plan) {
  auto& desc = st.desc;
  auto n = plan.ranges.size();
  bool dp = !plan.split.empty();
  std::vector<stage_spec> specs(n);
  for (size_t i = 0; i < n; ++i) {
    auto& spec = specs[i];
    spec.model = desc.spec.canonical();
    spec.fingerprint = desc.fingerprint;
    spec.seed = st.cfg.seed;
    spec.index = static_cast<uint32_t>(i);
    spec.stages = static_cast<uint32_t>(n);
    spec.begin = plan.ranges[i].first;
    spec.end = plan.ranges[i].second;
    spec.micro_batches = static_cast<uint32_t>(st.cfg.micro_batches);
    spec.schedule = st.cfg.schedule;
    spec.optimizer = st.cfg.optimizer;
    spec.lr = st.cfg.lr;
    spec.warmup_batches = st.cfg.warmup_batches;
    spec.momentum = st.cfg.momentum;
    spec.threads = st.cfg.threads;
    spec.start_batch = st.committed;
    spec.micro_batch_size = static_cast<uint32_t>(micro_batch_size(st.cfg));
    spec.replicate_every = st.cfg.replicate_every;
    spec.global_every = st.cfg.global_every;
    if (is_async(st.cfg)) {
      spec.async_delay = st.async_delay;
      spec.async_slack = st.cfg.async_slack;
      spec.row_batches = static_cast<uint32_t>(tuning::async_row_batches);
      spec.epoch_batches = drains_at_epochs(st) ? st.batches_per_epoch : 0;
      spec.total_batches = total_batches(st);
      spec.aggregate_every = st.cfg.weight_aggregation;
      spec.predict_weights = st.cfg.weight_prediction;
    }
    if (dp) {
      spec.members = static_cast<uint32_t>(n);
      spec.member = static_cast<uint32_t>(i);
      spec.reduce = st.cfg.dp_reduce;
      int begin = 0;
      for (size_t k = 0; k < i; ++k) {
        begin += plan.split[k];
      }
      spec.micro_begin = static_cast<uint32_t>(begin);
      spec.micro_end = static_cast<uint32_t>(begin + plan.split[i]);
      if (i > 0) {
        spec.replicate_every =
            0; // the members' weights are the same: the first replicates
      }
    }
    auto central = st.nodes.size();
    auto holder_node = algorithms::chain_holder_node(i, plan.nodes, dp, central);
    spec.chain_holder = caf::actor_cast<caf::actor>(holder_node < st.nodes.size() &&
                                                            st.nodes[holder_node].holder
                                                        ? st.nodes[holder_node].holder
                                                        : st.central_holder);
    spec.global_holder = caf::actor_cast<caf::actor>(st.central_holder);
  }
  return specs;
}

// A re-plan: which current stages hold layers [b, e) of each new stage.
void add_sources(const train_job_state& st, stage_spec& spec) {
  for (size_t j = 0; j < st.plan.ranges.size(); ++j) {
    if (!st.plan.split.empty() && j > 0) {
      break; // data parallel: the members hold the same layers; the first serves
    }
    auto lo = std::max<uint64_t>(spec.begin, st.plan.ranges[j].first);
    auto hi = std::min<uint64_t>(spec.end, st.plan.ranges[j].second);
    if (lo < hi) {
      spec.sources.push_back(caf::actor_cast<caf::actor>(st.stages[j]));
      spec.source_begin.push_back(lo);
      spec.source_end.push_back(hi);
    }
  }
}

// The launcher came back: wire the stages and start (or resume) training.
void on_launched(self_ptr self, uint64_t attempt, stage_plan plan, bool pulls,
                 std::vector<std::pair<size_t, size_t>> dials, launch_result& r) {
  auto& st = self->state;
  for (auto& [from, to, direct] : record_dials(st.peered, r.peered, dials, st.nodes)) {
    log_event(self, "peer", {{"from", from}, {"to", to}, {"direct", direct}});
  }
  if (algorithms::is_over(st.phase) || attempt != st.attempt) {
    // the job ended, or a newer failure superseded this attempt
    for (auto& s : r.stages) {
      self->send_exit(s, caf::exit_reason::user_shutdown);
    }
    return;
  }
  if (!r.ok) {
    if (recovering(st)) {
      // a node that is gone is recovered from by its loss; one that
      // refuses (memory) means too little capacity
      auto n = r.failed_stage < plan.nodes.size() ? plan.nodes[r.failed_stage] : 0;
      if (n < st.nodes.size() && !st.nodes[n].dead) {
        wait_for_capacity(self,
                          "node " + st.nodes[n].name + " refused a stage: " + r.error);
      }
      return;
    }
    fail(self, r.error);
    return;
  }
  st.plan = std::move(plan);
  st.reduce_parts.clear();
  st.stages.clear();
  for (size_t i = 0; i < r.stages.size(); ++i) {
    auto& s = r.stages[i];
    self->monitor(s);
    st.stages.push_back(caf::actor_cast<stage_actor>(s));
    if (i < st.plan.nodes.size()) {
      st.stage_node[s.address()] = st.plan.nodes[i];
    }
  }
  // pipeline neighbours, or data-parallel members' neighbours on the chain
  // their gradients are summed along
  for (size_t k = 0; k < st.stages.size(); ++k) {
    auto prev = k > 0 ? caf::actor_cast<caf::actor>(st.stages[k - 1]) : caf::actor{};
    auto next = k + 1 < st.stages.size() ? caf::actor_cast<caf::actor>(st.stages[k + 1])
                                         : caf::actor{};
    self->send(st.stages[k], wire_atom_v, prev, next, caf::actor_cast<caf::actor>(self));
  }
  st.status.pipeline.plan_version++;
  st.status.plan = describe_plan(st);
  st.status.pipeline.plan_batches = 0;
  st.status.pipeline.stage_compute_s.assign(st.stages.size(), 0.0);
  st.status.pipeline.stage_wait_s.assign(st.stages.size(), 0.0);
  st.status.pipeline.stage_send_s.assign(st.stages.size(), 0.0);
  log_event(self, "plan",
            {{"plan_version", st.status.pipeline.plan_version},
             {"plan", st.status.plan},
             {"at_batch", st.committed}});
  persist_state(self);
  if (pulls) {
    st.ready_pending = st.stages.size(); // resume when all have pulled state
    return;
  }
  if (recovering(st)) {
    resume_after_replan(self); // rolled back to the seed: nothing to pull
    return;
  }
  st.started = clock::now();
  st.last_progress = clock::now();
  back_to_training(self, job_event::launched);
  start_epoch(self);
}

} // namespace

int state_factor(const job_config& cfg) {
  return cfg.optimizer == "adam" ? 3 : 2;
}

std::string describe_plan(const train_job_state& st) {
  return describe_plan(st, st.plan);
}

std::string describe_plan(const train_job_state& st, const stage_plan& p) {
  std::string out;
  if (!p.split.empty()) {
    // data parallel: "dp(dev1:5 dev2:2 dev3:1)[0,8)", micro-batches per member
    out = "dp(";
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      out += (i ? " " : "") + st.nodes[p.nodes[i]].name + ":" +
             std::to_string(i < p.split.size() ? p.split[i] : 0);
    }
    return out + ")[" + std::to_string(p.ranges.empty() ? 0 : p.ranges[0].first) + "," +
           std::to_string(p.ranges.empty() ? 0 : p.ranges[0].second) + ")";
  }
  for (size_t i = 0; i < p.ranges.size(); ++i) {
    out += (i ? " " : "") + st.nodes[p.nodes[i]].name + "[" +
           std::to_string(p.ranges[i].first) + "," + std::to_string(p.ranges[i].second) +
           ")";
  }
  return out;
}

// Spawns one stage per range of `plan` (through a launcher, which first
// connects pipeline neighbours), then wires the chain and starts (or, after a
// re-plan or recovery, resumes) training. A re-planned stage pulls its layers
// from the stages of the old plan, which run until all are ready; a
// recovering one from what `sources` names.
void launch(self_ptr self, stage_plan plan, launch_kind kind, source_fn sources) {
  auto& st = self->state;
  if (!plan.split.empty() && plan.split.size() != plan.ranges.size()) {
    fail(self, "internal: a data-parallel split for " +
                   std::to_string(plan.split.size()) + " members and " +
                   std::to_string(plan.ranges.size()) + " stages");
    return;
  }
  if (st.cfg.schedule == "auto") {
    // without profiles (a balance, an even split, a resumed job): a
    // pipeline of several stages runs faster without a flush each batch
    st.cfg.schedule =
        st.async_delay > 0 || (plan.split.empty() && plan.ranges.size() > 1) ? "async"
                                                                              : "1f1b";
  }
  if (!is_async(st.cfg) && st.cfg.weight_aggregation > 0 && kind == launch_kind::first) {
    subsystem_log("job")->warn("--weight-aggregation {} is not used: schedule auto chose {}, "
                               "which keeps one weight version",
                               st.cfg.weight_aggregation, st.cfg.schedule);
  }
  if (is_async(st.cfg) && st.async_delay == 0) {
    // fixed for the job from here: every later plan keeps the same math
    st.async_delay = st.cfg.async_delay > 0
                         ? st.cfg.async_delay
                         : static_cast<uint32_t>(std::max<uint64_t>(
                               1, algorithms::async_delay(
                                      static_cast<int>(plan.ranges.size()),
                                      static_cast<int>(st.cfg.micro_batches))));
  }
  st.drained_before = 0; // (new stages: none asked yet)
  auto specs = make_specs(st, plan);
  for (auto& spec : specs) {
    if (kind == launch_kind::replan) {
      add_sources(st, spec);
    } else if (sources) {
      sources(spec);
    }
  }
  if (kind == launch_kind::replan) {
    std::vector<int64_t> bytes;
    for (auto& l : st.desc.layers) {
      bytes.push_back(l.param_bytes);
    }
    st.status.pipeline.last_replan_moved_bytes =
        algorithms::moved_bytes(st.plan.ranges, st.plan.nodes, plan.ranges, plan.nodes,
                                bytes, state_factor(st.cfg));
    st.old_stages = st.stages;
    st.old_plan = st.plan;
  }
  std::vector<bool> can_dial, dialable;
  for (auto& n : st.nodes) {
    can_dial.push_back(n.port != 0);
    dialable.push_back(n.port != 0 && !n.host.empty());
  }
  // pipeline neighbours, and data-parallel members that sum along their
  // chain (through the supervisor they exchange nothing)
  bool neighbours_talk = plan.split.empty() || st.cfg.dp_reduce == "chain";
  auto dials = neighbours_talk
                   ? algorithms::pairs_to_dial(plan.nodes, st.peered, can_dial, dialable)
                   : std::vector<std::pair<size_t, size_t>>{};
  launch_order order;
  order.specs = specs;
  for (auto n : plan.nodes) {
    order.nodes.push_back(st.nodes[n].handle);
    order.node_names.push_back(st.nodes[n].name);
  }
  for (auto [a, b] : dials) {
    order.dials.push_back({a, b, st.nodes[a].handle, st.nodes[b].host, st.nodes[b].port});
  }
  order.dial_timeout = st.cfg.peer_timeout;
  order.spawn_timeout = st.cfg.request_timeout;
  bool pulls = !specs.empty() && !specs[0].sources.empty();
  auto attempt = st.attempt;
  auto l = self->spawn(launcher, std::move(order));
  // the launcher bounds each step; this bounds the whole
  auto limit = st.cfg.peer_timeout + st.cfg.request_timeout + tuning::helper_margin;
  self->request(l, limit, launch_atom_v)
      .then([=](launch_result& r) { on_launched(self, attempt, plan, pulls, dials, r); },
            [=](caf::error& err) {
              launch_result r;
              r.ok = false;
              r.error = "launching the plan failed: " + self->system().render(err);
              on_launched(self, attempt, plan, pulls, dials, r);
            });
}

algorithms::plan_request planner_request(const train_job_state& st) {
  auto req = make_plan_request(st.desc, st.cfg.schedule, micro_batch_size(st.cfg),
                               static_cast<int>(st.cfg.micro_batches), st.cfg.optimizer);
  req.allow_data_parallel = st.cfg.allow_data_parallel && !is_async(st.cfg);
  if (is_async(st.cfg)) {
    // (the planner's own choice is made at launch: plan for the least)
    req.async_delay = static_cast<int>(std::max<uint32_t>(1, async_delay_now(st)));
    req.async_slack = static_cast<int>(st.cfg.async_slack);
    req.segment_batches = static_cast<int>(async_row_batches(st));
  }
  // a replicating stage keeps its last two snapshots (stage_state::kept),
  // weights and optimizer state each (data-parallel members after the first
  // do not replicate; they are counted as if they did)
  req.kept_snapshots = st.cfg.replicate_every > 0 ? tuning::stage_kept_snapshots : 0;
  req.dp_chain = st.cfg.dp_reduce == "chain";
  req.dp_chunk_bytes = static_cast<double>(tuning::dp_chunk_values * sizeof(float));
  auto live = live_nodes(st);
  // the user's stage count, as far as the live nodes and the layers allow
  // (after a failure there may be fewer nodes than stages asked for)
  req.stages = std::min({st.cfg.stages, live.size(), st.layers()});
  return st.capacity.request(std::move(req), live, dead_mask(st), node_names(st),
                             st.cfg.default_link_bytes_per_s);
}

stage_plan plan_to_stages(const algorithms::partition_plan& plan,
                          const std::vector<size_t>& live) {
  stage_plan out;
  out.split = plan.micro_split;
  for (auto& s : plan.stages) {
    out.ranges.emplace_back(s.begin, s.end);
    out.nodes.push_back(live[s.device]);
  }
  return out;
}

caf::expected<stage_plan> balanced_plan(const train_job_state& st,
                                        const std::vector<size_t>& balance, bool strict) {
  auto layers = st.layers();
  auto live = live_nodes(st);
  stage_plan p;
  if (st.cfg.data_parallel && balance.empty()) {
    // every node holds the model and runs an even share of the micro-batches
    auto members =
        std::min<size_t>(live.size(), static_cast<size_t>(st.cfg.micro_batches));
    if (members == 0) {
      return caf::make_error(errc::node_lost, "no node to run on");
    }
    p.split = algorithms::split_micro_batches(std::vector<double>(members, 1.0),
                                              static_cast<int>(st.cfg.micro_batches));
    p.ranges.assign(members, {0, layers});
    p.nodes.assign(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(members));
    if (members == 1) {
      p.split.clear(); // one member: a plain single stage
    }
    return p;
  }
  try {
    // strict: the user asked for these nodes; after a failure, use what fits
    auto stages = strict ? live.size() : std::min(live.size(), layers);
    if (balance.empty() && stages > layers) {
      return caf::make_error(
          errc::bad_config,
          "an even split puts a stage on each of the " + std::to_string(stages) +
              " nodes, but model " + st.cfg.model + " has " + std::to_string(layers) +
              " layers: plan with the planner (--plan auto leaves nodes spare), train "
              "data parallel, or give at most " +
              std::to_string(layers) + " nodes");
    }
    p.ranges = balance.empty() ? algorithms::even_split(layers, static_cast<int>(stages))
                               : algorithms::ranges_from_balance(balance, layers);
  } catch (const std::exception& e) {
    return caf::make_error(errc::bad_config, e.what());
  }
  if (p.ranges.size() > live.size()) {
    return caf::make_error(errc::bad_config,
                           "the balance names " + std::to_string(p.ranges.size()) +
                               " stages but only " + std::to_string(live.size()) +
                               " nodes are available");
  }
  p.nodes.assign(live.begin(),
                 live.begin() + static_cast<std::ptrdiff_t>(p.ranges.size()));
  return p;
}

void first_plan(self_ptr self) {
  auto& st = self->state;
  if (is_async(st.cfg) && st.cfg.data_parallel) {
    fail(self, "the async schedule trains pipelines; data parallelism needs --schedule "
               "1f1b or gpipe");
    return;
  }
  if (is_async(st.cfg) && st.cfg.stream) {
    // a stage's row runs ahead into batches a stream may never bring
    fail(self, "the async schedule needs a known number of batches; a stream needs "
               "--schedule 1f1b or gpipe");
    return;
  }
  st.user_plan = !st.cfg.balance.empty() || st.cfg.stages > 0;
  if (st.cfg.auto_plan) {
    enter(self, job_event::profile);
    auto mbs = static_cast<uint32_t>(micro_batch_size(st.cfg));
    auto timeout =
        st.cfg.profile_timeout + 2 * tuning::link_probe_timeout; // + the probes
    self->request(st.cluster, timeout, profile_atom_v, st.cfg.model, mbs)
        .then([=](cluster_profile& round) { on_profiles(self, round); },
              [=](caf::error& err) { fail(self, self->system().render(err)); });
    return;
  }
  auto plan = balanced_plan(st, st.cfg.balance, true);
  if (!plan) {
    fail(self, self->system().render(plan.error()));
    return;
  }
  if (!st.cfg.balance.empty() && plan->ranges.size() != st.nodes.size()) {
    fail(self, "the balance names " + std::to_string(plan->ranges.size()) +
                   " stages but " + std::to_string(st.nodes.size()) + " nodes are given");
    return;
  }
  launch(self, std::move(*plan), launch_kind::first);
}

// `--schedule auto`: the schedule whose best plan the cost model predicts
// faster per batch: async (pipelines only, no flush) or 1f1b (pipelines
// flushed every batch, or data parallelism).
void choose_schedule(self_ptr self) {
  auto& st = self->state;
  std::map<std::string, double> batch_s;
  for (std::string schedule : {"1f1b", "async"}) {
    st.cfg.schedule = schedule;
    try {
      batch_s[schedule] = algorithms::plan_partition(planner_request(st)).objective_s;
    } catch (const algorithms::plan_error& e) {
      batch_s[schedule] = std::numeric_limits<double>::infinity();
      subsystem_log("job")->info("no {} plan fits: {}", schedule, e.what());
    }
  }
  st.cfg.schedule = batch_s["async"] < batch_s["1f1b"] ? "async" : "1f1b";
  auto shown = [](double s) { return std::isfinite(s) ? nlohmann::json(s) : nlohmann::json(); };
  log_event(self, "schedule",
            {{"chosen", st.cfg.schedule},
             {"predicted_batch_s_1f1b", shown(batch_s["1f1b"])},
             {"predicted_batch_s_async", shown(batch_s["async"])}});
  subsystem_log("job")->info("schedule auto: {} (predicted {:.3f} s a batch flushed, {:.3f} "
                             "s async)",
                             st.cfg.schedule, batch_s["1f1b"], batch_s["async"]);
}

// The profiling round came back: log it, plan with the partitioner, launch.
void on_profiles(self_ptr self, cluster_profile& round) {
  auto& st = self->state;
  if (algorithms::is_over(st.phase)) {
    return;
  }
  for (auto& r : round.devices) {
    if (r.forward_s.empty()) {
      continue; // not asked (refused or lost)
    }
    double per_micro = 0;
    for (size_t l = 0; l < r.forward_s.size(); ++l) {
      per_micro += r.forward_s[l] + r.backward_s[l];
    }
    log_event(self, "profile",
              {{"node", r.node},
               {"model_s_per_micro_batch", per_micro},
               {"cpu_share", r.cpu_share},
               {"slowdown", r.slowdown},
               {"memory_bytes", r.memory_bytes},
               {"emulation", r.emulation},
               {"device_type", r.device_type}});
  }
  for (auto& l : round.links) {
    auto& r = l.report;
    log_event(self, "link",
              {{"from", r.from},
               {"to", r.to},
               {"latency_s", r.latency_s},
               {"bytes_per_s", r.bytes_per_s},
               {"method", r.method}});
  }
  st.capacity.set_profiles(round);
  try {
    if (st.cfg.schedule == "auto") {
      choose_schedule(self);
    }
    auto req = planner_request(st);
    auto planning = std::chrono::steady_clock::now();
    auto plan = algorithms::plan_partition(req);
    // what the planner predicted (how long it took, whether it searched
    // every subset and order, or every count of each device type), and the
    // best plan of the other kind
    nlohmann::json choice = {{"predicted_samples_per_s", plan.samples_per_s},
                             {"data_parallel", plan.data_parallel()},
                             {"plan_ms", 1e3 * since(planning)},
                             {"exact", plan.exact},
                             {"device_types", plan.device_types},
                             {"devices", req.devices.size()}};
    if (req.allow_data_parallel) {
      try {
        auto other = req;
        other.allow_data_parallel = false;
        auto pipe = algorithms::plan_partition(other);
        choice["best_pipeline_samples_per_s"] = pipe.samples_per_s;
        choice["best_pipeline_stages"] = pipe.stages.size();
      } catch (const std::exception& e) {
        choice["best_pipeline_error"] = e.what(); // no pipeline-only plan fits
      }
    }
    log_event(self, "planned", choice);
    launch(self, plan_to_stages(plan, live_nodes(st)), launch_kind::first);
  } catch (const std::exception& e) {
    fail(self, std::string("cannot plan the job: ") + e.what());
  }
}

// What a re-plan costs the job: the pause of the last one, measured, plus
// the flush it waits for (about a batch); before any, an estimate.
double move_cost_s(const train_job_state& st, double batch_s) {
  double pause = st.status.pipeline.replans > 0 ? st.status.pipeline.last_replan_s
                                                : tuning::replan_pause_estimate_s;
  return pause + batch_s;
}

// The steady clock now, in seconds: the time base of the re-plan looks and
// of the damping's moves.
double clock_s() {
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

double damping_half_life_s(const train_job_state& st) {
  return std::chrono::duration<double>(st.cfg.replan_damping_half_life).count();
}

// Whether what was measured `at` still counts: both `measured_plan_memory`
// commits and `measured_plan_memory_time` must have passed to forget it.
bool remembered(const train_job_state& st, const train_job_state::measured_at& at) {
  return st.committed < at.commit + tuning::measured_plan_memory ||
         clock::now() - at.time < tuning::measured_plan_memory_time;
}

// The predicted batch time of `p` on the live nodes under the request's
// cost model, corrected by what its kind of plan measured (pipeline, data
// parallel, one device alone) and bounded below by what `p` itself measured
// lately; 0 when it names a node that is gone or does not fit.
double predicted_s(const train_job_state& st, const algorithms::plan_request& req,
                   const std::vector<size_t>& live, const stage_plan& p) {
  std::vector<algorithms::stage_assignment> stages;
  std::vector<size_t> devices;
  for (size_t i = 0; i < p.ranges.size(); ++i) {
    auto it = std::find(live.begin(), live.end(), p.nodes[i]);
    if (it == live.end()) {
      return 0;
    }
    auto d = static_cast<size_t>(it - live.begin());
    stages.push_back({d, p.ranges[i].first, p.ranges[i].second, 0, 0, 0});
    devices.push_back(d);
  }
  if (stages.empty()) {
    return 0;
  }
  try {
    auto plan = p.split.empty()
                    ? algorithms::evaluate_plan(req, stages)
                    : algorithms::evaluate_data_parallel(req, devices, p.split);
    for (auto& s : plan.stages) {
      if (s.memory_bytes > req.devices[s.device].memory_bytes) {
        return 0;
      }
    }
    double ratio = st.capacity.kind_ratio(
        capacity_model::kind_of(p.ranges.size(), !p.split.empty()));
    double predicted = plan.objective_s * ratio;
    // a plan measured recently is at least as slow as it measured (unless
    // the capacities changed since, which the prediction then shows)
    if (auto it = st.measured_plans.find(describe_plan(st, p));
        it != st.measured_plans.end() && remembered(st, it->second.second)) {
      predicted = std::max(predicted, it->second.first);
    }
    return predicted;
  } catch (const std::exception& e) {
    subsystem_log("job")->debug("plan {} cannot be predicted: {}", describe_plan(st, p),
                                e.what());
    return 0;
  }
}

// The running plan's measured batch time (into `in`), and what it tells the
// capacity model about plans of its kind and about the last re-plan's
// prediction.
void measure_running(train_job_state& st, const algorithms::plan_request& req,
                     const std::vector<size_t>& live, algorithms::replan_inputs& in) {
  // how far the whole batch runs behind the model, for this kind of plan
  int kind = capacity_model::kind_of(st.plan.ranges.size(), !st.plan.split.empty());
  if (st.recent.size() >= 6) {
    auto span =
        std::chrono::duration<double>(st.recent.back().first - st.recent.front().first);
    in.measured_s = span.count() / static_cast<double>(st.recent.size() - 1);
    auto running = describe_plan(st);
    st.measured_plans.erase(running); // (not held against itself)
    double modelled = predicted_s(st, req, live, st.plan) / st.capacity.kind_ratio(kind);
    if (modelled > 0) {
      st.capacity.set_kind_ratio(kind, in.measured_s / modelled);
    }
    st.measured_plans[running] = {in.measured_s, {st.committed, clock::now()}};
    if (st.replan_predicted_s > 0 && st.committed >= st.last_replan_batch + 10) {
      // the last capacity re-plan, measured: how wrong was its prediction?
      st.prediction_error = std::max(1.0, in.measured_s / st.replan_predicted_s);
      st.prediction_error_at = {st.committed, clock::now()};
      st.replan_predicted_s = 0;
    }
  }
  // the error fades as the moves do (a host's load that fooled the model
  // once fools it again when the error is forgotten at once); with damping
  // off it is held while measurements are remembered
  if (double half = damping_half_life_s(st); half > 0) {
    in.prediction_error = algorithms::faded_error(
        st.prediction_error, since(st.prediction_error_at.time), half);
  } else {
    if (!remembered(st, st.prediction_error_at)) {
      st.prediction_error = 1.0;
    }
    in.prediction_error = st.prediction_error;
  }
}

// The best plan of each kind, and each device alone (a plan never loses to
// the fastest device), if one beats `best_cost` (then lowered to its cost).
std::optional<stage_plan> best_alternative(const train_job_state& st,
                                           const algorithms::plan_request& req,
                                           const std::vector<size_t>& live,
                                           double& best_cost) {
  std::optional<stage_plan> best_plan;
  auto consider = [&](const algorithms::partition_plan& p) {
    auto staged = plan_to_stages(p, live);
    double cost = predicted_s(st, req, live, staged);
    if (cost > 0 && cost < best_cost) {
      best_cost = cost;
      best_plan = std::move(staged);
    }
  };
  auto pipelines = req;
  pipelines.allow_data_parallel = false;
  try {
    consider(algorithms::plan_partition(pipelines));
  } catch (const algorithms::plan_error& e) {
    subsystem_log("job")->debug("no pipeline plan fits: {}", e.what());
  }
  if (req.allow_data_parallel) {
    try {
      consider(algorithms::plan_data_parallel(req));
    } catch (const algorithms::plan_error& e) {
      subsystem_log("job")->debug("no data-parallel plan fits: {}", e.what());
    }
  }
  for (size_t d = 0; d < live.size(); ++d) {
    consider(algorithms::evaluate_plan(req, {{d, 0, st.layers(), 0, 0, 0}}));
  }
  return best_plan;
}

// What the re-plan rule decided, done: go back to the plan before the last
// re-plan, or re-plan to the candidate, at the next flush.
void apply_verdict(train_job_state& st, const algorithms::replan_verdict& verdict,
                   const algorithms::replan_inputs& in) {
  if (verdict.action == algorithms::replan_action::revert) {
    st.pending_plan = std::move(st.replaced_plan);
    st.replaced_plan.reset();
    st.replan_requested = true;
    st.replan_balance.clear();
    st.replan_reason =
        "capacity: back to the plan before the last re-plan (" + verdict.why + ")";
    return;
  }
  if (verdict.action == algorithms::replan_action::replan && st.replan_candidate) {
    st.replaced_plan = st.plan;
    st.replaced_measured_s = in.measured_s;
    st.replan_predicted_s = in.candidate_s;
    st.pending_plan = std::move(st.replan_candidate);
    st.replan_candidate.reset();
    st.replan_requested = true;
    st.replan_balance.clear();
    char why[160];
    std::snprintf(why, sizeof why,
                  " (measured/modelled batch time: pipelines x%.2f, data parallel x%.2f, "
                  "one device x%.2f)",
                  st.capacity.kind_ratio(0), st.capacity.kind_ratio(1),
                  st.capacity.kind_ratio(2));
    st.replan_reason = "capacity: " + verdict.why + why;
  }
}

// At every commit: correct the capacity model by what the stages measured,
// then look at the plan if a look is due.
void track_capacity(self_ptr self) {
  auto& st = self->state;
  if (!st.capacity.profiled() || st.phase == job_phase::replanning ||
      st.replan_requested) {
    return;
  }
  st.capacity.correct(st.last_reports, st.plan.ranges, st.plan.nodes, st.plan.split,
                      static_cast<int>(st.cfg.micro_batches));
  look_at_plan(self);
}

// Every `replan_look_every` of wall time, at a commit or a tick (a stage
// that slowed 10x commits 10x less often; looks must not wait for it):
// weigh the best plan against the one that runs (algorithms/replan.hpp) and
// ask for a re-plan (or to go back) at the next flush.
void look_at_plan(self_ptr self) {
  auto& st = self->state;
  if (!st.capacity.profiled() || st.phase != job_phase::training || st.user_paused ||
      st.replan_requested) {
    return;
  }
  algorithms::replan_inputs in;
  in.min_gain = st.cfg.replan_gain;
  in.committed = st.committed;
  in.last_replan_batch = st.last_replan_batch;
  in.min_batches = st.cfg.replan_min_batches;
  in.look_every_s = std::chrono::duration<double>(st.cfg.replan_look_every).count();
  in.last_look_s = st.last_look_s;
  in.window = st.cfg.replan_window;
  in.sustain_s = std::chrono::duration<double>(st.cfg.replan_sustain).count();
  in.now_s = clock_s();
  in.recent_moves = st.replan_moves.weight_at(in.now_s, damping_half_life_s(st));
  in.user_plan = st.user_plan;
  auto total = total_batches(st);
  in.batches_left = total > st.committed ? total - st.committed : 0;
  if (!algorithms::replan_check_due(in)) {
    return;
  }
  st.last_look_s = in.now_s;
  try {
    auto req = planner_request(st);
    auto live = live_nodes(st);
    measure_running(st, req, live, in);
    // the running plan is judged by what it does, once measured, and runs
    // at least as slowly as the batch it has not committed yet
    in.current_s = in.measured_s > 0
                       ? std::max(in.measured_s, since(st.last_progress))
                       : predicted_s(st, req, live, st.plan);
    in.replaced_measured_s = st.replaced_plan ? st.replaced_measured_s : 0;
    if (st.replaced_plan) {
      in.replaced_predicted_s = predicted_s(st, req, live, *st.replaced_plan);
    }
    double best_cost = in.current_s;
    auto best_plan = best_alternative(st, req, live, best_cost);
    if (best_plan) {
      in.best_s = best_cost;
      in.best_plan = describe_plan(st, *best_plan);
    }
    if (st.replan_candidate && !st.replan_looks.candidate.empty()) {
      in.candidate_s = predicted_s(st, req, live, *st.replan_candidate);
    }
    in.move_cost_s = move_cost_s(st, in.current_s);
    auto before = st.replan_looks.candidate;
    auto verdict = algorithms::decide_replan(in, st.replan_looks);
    // why a plan stays (or goes), for a user who expected a re-plan: what
    // the running plan takes, the fastest other plan the model predicts,
    // and the candidate the rule judges (scaled by the model's last error);
    // formatted only when debug lines are kept (a look comes every half
    // second, or every commit)
    if (auto log = subsystem_log("job"); log->should_log(spdlog::level::debug)) {
      const char* how = in.measured_s <= 0             ? "predicted"
                        : in.current_s > in.measured_s ? "since its last commit"
                                                       : "measured";
      log->debug("re-plan look at batch {}: the plan runs {:.3f} s a batch ({}); "
                 "fastest other {}; candidate {}: {}",
                 st.committed, in.current_s, how,
                 in.best_s > 0
                     ? fmt::format("{} predicted {:.3f} s", in.best_plan, in.best_s)
                     : std::string("none"),
                 !before.empty() && in.candidate_s > 0
                     ? fmt::format("{} predicted {:.3f} s x{:.2f}", before,
                                   in.candidate_s, std::max(1.0, in.prediction_error))
                     : std::string("none"),
                 verdict.why);
    }
    if (st.replan_looks.candidate != before || st.replan_looks.candidate.empty()) {
      st.replan_candidate = st.replan_looks.candidate.empty() ? std::nullopt : best_plan;
    }
    apply_verdict(st, verdict, in);
  } catch (const std::exception& e) {
    // no better plan fits; keep the current one
    subsystem_log("job")->debug("no re-plan: {}", e.what());
  }
}

// Called at a flush (nothing in flight) when a re-plan was asked for.
void begin_replan(self_ptr self) {
  auto& st = self->state;
  st.replan_requested = false;
  // a re-plan that cannot be made keeps the plan that runs: it never costs
  // the job (the console refuses a bad balance before it gets here)
  auto keep = [&](const std::string& why) {
    subsystem_log("job")->warn("re-plan ({}) not made, the plan stays: {}",
                               st.replan_reason, why);
    log_event(self, "replan_refused", {{"reason", st.replan_reason}, {"why", why}});
    st.last_replan_batch = st.committed;
    feed(self);
  };
  std::vector<size_t> balance;
  try {
    balance = parse_balance(st.replan_balance);
  } catch (const std::exception& e) {
    keep(e.what());
    return;
  }
  stage_plan plan;
  if (st.pending_plan) {
    plan = std::move(*st.pending_plan);
    st.pending_plan.reset();
  } else if (balance.empty() && st.capacity.profiled()) {
    try {
      plan =
          plan_to_stages(algorithms::plan_partition(planner_request(st)), live_nodes(st));
    } catch (const std::exception& e) {
      keep(e.what());
      return;
    }
  } else {
    auto chosen = balanced_plan(st, balance, true);
    if (!chosen) {
      keep(chosen.error().context().get_as<std::string>(0));
      return;
    }
    plan = std::move(*chosen);
  }
  st.last_replan_batch = st.committed;
  if (plan == st.plan) {
    feed(self); // nothing would change
    return;
  }
  enter(self, job_event::replan);
  st.replan_started = clock::now();
  launch(self, std::move(plan), launch_kind::replan);
}

// What the "resumed" and "recovered" events both say: the transfer, the
// version rolled back to, the batches done again, the plan.
nlohmann::json recovery_fields(const train_job_state& st) {
  return {{"transfer_s", since(st.recovery_planned_at)},
          {"rollback_version", st.status.pipeline.rollback_version},
          {"redone_batches",
           st.rollback_from - static_cast<uint64_t>(st.status.pipeline.rollback_version)},
          {"plan", st.status.plan}};
}

// Every new stage pulled its state: the old ones stop, training goes on.
void resume_after_replan(self_ptr self) {
  auto& st = self->state;
  for (auto& old : st.old_stages) {
    self->demonitor(old.address());
    self->send_exit(old, caf::exit_reason::user_shutdown);
  }
  st.old_stages.clear();
  for (auto it = st.stage_node.begin(); it != st.stage_node.end();) {
    bool current =
        std::any_of(st.stages.begin(), st.stages.end(),
                    [&](const stage_actor& s) { return s.address() == it->first; });
    it = current ? std::next(it) : st.stage_node.erase(it);
  }
  if (recovering(st) && st.resuming) {
    // the first plan of a resumed job: not a recovery from a failure
    st.resuming = false;
    st.status.health = "ok";
    auto fields = recovery_fields(st);
    fields["resume_s"] = since(st.failure_at);
    log_event(self, "resumed", std::move(fields));
    subsystem_log("recovery")
        ->info("RESUMED in {:.3f} s at batch {}: plan {}", since(st.failure_at),
               st.status.pipeline.rollback_version, st.status.plan);
    back_to_training(self, job_event::recovered);
  } else if (recovering(st)) {
    st.status.pipeline.recoveries++;
    st.status.pipeline.last_recovery_s = since(st.failure_at);
    st.status.health = "ok";
    auto fields = recovery_fields(st);
    fields["recovery_s"] = st.status.pipeline.last_recovery_s;
    int64_t moved = 0;
    for (auto& [sender, bytes] : st.recovery_sent) {
      moved += bytes;
    }
    fields["moved_bytes"] = moved;
    fields["sent_bytes"] = st.recovery_sent;
    fields["link_limit_s"] = st.recovery_link_limit_s;
    log_event(self, "recovered", std::move(fields));
    subsystem_log("recovery")
        ->info("recovered in {:.3f} s: plan {}", st.status.pipeline.last_recovery_s,
               st.status.plan);
    back_to_training(self, job_event::recovered);
  } else {
    st.replan_looks.clear(); // the new plan is looked at afresh
    st.replan_candidate.reset();
    if (st.replan_reason.rfind("capacity:", 0) == 0) {
      st.replan_moves.record(clock_s(), damping_half_life_s(st));
    }
    st.status.pipeline.replans++;
    st.status.pipeline.last_replan_s = since(st.replan_started);
    log_event(self, "replan",
              {{"reason", st.replan_reason},
               {"pause_s", st.status.pipeline.last_replan_s},
               {"moved_bytes", st.status.pipeline.last_replan_moved_bytes},
               {"plan", st.status.plan},
               {"plan_version", st.status.pipeline.plan_version}});
    back_to_training(self, job_event::replanned);
  }
  continue_training(self);
}

} // namespace salamander::actors::train_detail
