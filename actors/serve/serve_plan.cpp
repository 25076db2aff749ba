// The serving job's plans: the first one (profiled or even), launching a
// pipeline beside the one that serves, switching over once its stages have
// their layers, failures (a stage or node lost) and joins. Where a new stage
// takes its layers from is chosen per layer: a stage or holder on its own
// node (nothing crosses the network), else a neighbour's stage or chain
// holder (the replicas FTPipeHD promotes), else the central holder, which
// has every layer.
#include "actors/exit_text.hpp"
#include "actors/logging.hpp"
#include "actors/pipeline/launcher.hpp"
#include "actors/serve/serve_job_impl.hpp"
#include "actors/serve/served_load.hpp"
#include "algorithms/partitioner.hpp"
#include "algorithms/recovery.hpp"
#include "messages/errors.hpp"

namespace salamander::actors::serve_detail {

namespace {

auto log() {
  return subsystem_log("serve");
}

std::vector<bool> dead_mask(const serve_job_state& st) {
  std::vector<bool> out;
  for (auto& n : st.nodes) {
    out.push_back(n.dead || n.refused);
  }
  return out;
}

std::vector<std::string> node_names(const serve_job_state& st) {
  std::vector<std::string> out;
  for (auto& n : st.nodes) {
    out.push_back(n.name);
  }
  return out;
}

// The planner's request for this model without devices: inference, the
// job's micro-batch and window, no data parallelism, no snapshots.
algorithms::plan_request base_request(const serve_job_state& st, size_t stages) {
  auto req = make_plan_request(st.desc, "gpipe", st.cfg.max_batch, 1, "sgd");
  req.mode = algorithms::plan_mode::inference;
  req.inference_in_flight = window_for(st, stages);
  req.allow_data_parallel = false;
  req.kept_snapshots = 0;
  return req;
}

// What the other models' jobs placed on each device of the request (device
// d is node live[d]): their time per micro-batch of ours, and the memory
// they take from the node's.
void count_others(const serve_job_state& st, const std::vector<size_t>& live,
                  algorithms::plan_request& req) {
  if (!st.cfg.shared_load) {
    return;
  }
  for (size_t d = 0; d < req.devices.size(); ++d) {
    auto w = st.cfg.shared_load->others(st.cfg.served_name, st.nodes[live[d]].name);
    auto& dev = req.devices[d];
    dev.busy_s = w.seconds_per_row * static_cast<double>(req.micro_batch_size);
    dev.memory_bytes = std::max(0.0, dev.memory_bytes - w.bytes);
  }
}

// The plan over the live nodes: the user's balance, the planner's (with
// profiles, around the other models' work), or an even split.
caf::expected<stage_plan> choose_plan(const serve_job_state& st,
                                      const std::vector<size_t>& balance) {
  auto live = live_nodes(st);
  if (live.empty()) {
    return caf::make_error(errc::node_lost, "no node is left to serve on");
  }
  stage_plan p;
  try {
    if (!balance.empty()) {
      p.ranges = algorithms::ranges_from_balance(balance, st.layers());
      if (p.ranges.size() > live.size()) {
        return caf::make_error(errc::bad_config,
                               "the balance names " + std::to_string(p.ranges.size()) +
                                   " stages but only " + std::to_string(live.size()) +
                                   " nodes are live");
      }
      p.nodes.assign(live.begin(), live.begin() + static_cast<long>(p.ranges.size()));
      return p;
    }
    if (st.cfg.auto_plan && st.capacity.profiled()) {
      auto req = base_request(st, live.size());
      req.stages = std::min({st.cfg.stages, live.size(), st.layers()});
      req = st.capacity.request(std::move(req), live, dead_mask(st), node_names(st),
                                st.cfg.default_link_bytes_per_s);
      count_others(st, live, req);
      auto plan = algorithms::plan_partition(req);
      for (auto& s : plan.stages) {
        p.ranges.emplace_back(s.begin, s.end);
        p.nodes.push_back(live[s.device]);
      }
      return p;
    }
    auto count = std::min(live.size(), st.layers());
    if (st.cfg.stages > 0) {
      count = std::min(count, st.cfg.stages);
    }
    p.ranges = algorithms::even_split(st.layers(), static_cast<int>(count));
    p.nodes.assign(live.begin(), live.begin() + static_cast<long>(p.ranges.size()));
  } catch (const std::exception& e) {
    return caf::make_error(errc::bad_config, e.what());
  }
  return p;
}

bool stage_alive(const serve_job_state& st, const serve_pipeline& p, size_t i) {
  return i < p.stages.size() && p.stages[i] &&
         !st.dead_stages.count(p.stages[i].address()) && !st.nodes[p.plan.nodes[i]].dead;
}

// Every copy of served layers a new stage could pull from, as the recovery
// rules see them (algorithms/recovery.hpp): the live stages of the serving
// and the older pipelines, the chain holders of live nodes, and last the
// central holder, which has every layer. Served weights are at version 0.
struct layer_copies {
  std::vector<algorithms::recovery_source> sources;
  std::vector<caf::actor> actors; ///< per source
};

layer_copies copies_of(const serve_job_state& st) {
  layer_copies c;
  auto add = [&](size_t node, bool central, caf::actor a, std::vector<uint64_t> layers) {
    algorithms::recovery_source s;
    s.node = node;
    s.central = central;
    for (auto l : layers) {
      s.held.emplace_back(l, 0);
    }
    c.sources.push_back(std::move(s));
    c.actors.push_back(std::move(a));
  };
  auto range = [](uint64_t b, uint64_t e) {
    std::vector<uint64_t> out;
    for (auto l = b; l < e; ++l) {
      out.push_back(l);
    }
    return out;
  };
  auto from_pipeline = [&](const serve_pipeline& p) {
    for (size_t i = 0; i < p.plan.ranges.size(); ++i) {
      if (stage_alive(st, p, i)) {
        auto [b, e] = p.plan.ranges[i];
        add(p.plan.nodes[i], false, caf::actor_cast<caf::actor>(p.stages[i]),
            range(b, e));
      }
    }
  };
  if (st.current) {
    from_pipeline(*st.current);
  }
  for (auto& p : st.old) {
    from_pipeline(p);
  }
  for (auto& [n, held] : st.chain_copies) {
    if (n < st.nodes.size() && !st.nodes[n].dead && st.nodes[n].holder) {
      add(n, false, caf::actor_cast<caf::actor>(st.nodes[n].holder),
          std::vector<uint64_t>(held.begin(), held.end()));
    }
  }
  add(0, true, caf::actor_cast<caf::actor>(st.central_holder), range(0, st.layers()));
  return c;
}

// Where a new stage on `node` pulls its layers from: per layer the nearest
// copy (training's rule, algorithms::pick_source: its own node, then
// another, then the central holder; a stage before a holder, as listed), in
// contiguous runs from one source each.
void add_pulls(const layer_copies& c, stage_spec& spec, size_t node) {
  std::vector<algorithms::layer_pick> picks;
  for (uint64_t l = spec.begin; l < spec.end; ++l) {
    // the central holder has every layer: there is always a pick
    picks.push_back({*algorithms::pick_source(c.sources, l, 0, node), 0});
  }
  for (auto& p : algorithms::merge_pulls(picks, spec.begin)) {
    spec.sources.push_back(c.actors[p.source]);
    spec.source_begin.push_back(p.begin);
    spec.source_end.push_back(p.end);
    spec.source_version.push_back(p.version);
  }
}

void become_ready(self_ptr self);

// The serving pipeline's work on its nodes, for the other models' jobs to
// plan around (served_load). Only a profiled job knows it; a balance or an
// even split places nothing.
void place_load(self_ptr self) {
  auto& st = self->state;
  if (!st.cfg.shared_load || !st.current) {
    return;
  }
  served_load::placement where;
  if (st.capacity.profiled()) {
    auto& plan = st.current->plan;
    auto req = base_request(st, plan.ranges.size());
    auto rows = static_cast<double>(std::max<int64_t>(1, st.cfg.max_batch));
    for (size_t i = 0; i < plan.ranges.size(); ++i) {
      auto [b, e] = plan.ranges[i];
      auto& w = where[st.nodes[plan.nodes[i]].name];
      w.seconds_per_row += st.capacity.predicted_s(plan.nodes[i], b, e, 1) / rows;
      w.bytes += algorithms::stage_memory(req, b, e, req.inference_in_flight);
    }
  }
  st.cfg.shared_load->place(self->id(), st.cfg.served_name, std::move(where));
}

void on_launched(self_ptr self, uint64_t generation, bool pulls,
                 std::vector<std::pair<size_t, size_t>> dials, launch_result& r) {
  auto& st = self->state;
  for (auto& [from, to, direct] : record_dials(st.peered, r.peered, dials, st.nodes)) {
    log_event(self, "peer", {{"from", from}, {"to", to}, {"direct", direct}});
  }
  if (over(st) || !st.next || st.next->generation != generation) {
    for (auto& s : r.stages) {
      self->send_exit(s, caf::exit_reason::user_shutdown);
    }
    return;
  }
  auto& p = *st.next;
  if (!r.ok) {
    auto n = r.failed_stage < p.plan.nodes.size() ? p.plan.nodes[r.failed_stage] : 0;
    st.next.reset();
    if (n < st.nodes.size() && st.nodes[n].dead) {
      plan_next(self, "a node died during the launch");
      return;
    }
    if (!st.current && st.old.empty() && st.status.serving.requests == 0 &&
        st.status.pipeline.recoveries == 0 && st.status.pipeline.replans == 0) {
      fail(self, r.error); // the first plan: a start-up error the user must see
      return;
    }
    log()->warn("the new plan could not start: {}", r.error);
    log_event(self, "launch_failed", {{"error", r.error}});
    if (!st.current) {
      st.waiting_for = r.error;
      enter(self, algorithms::serve_event::no_plan);
    }
    return;
  }
  for (size_t i = 0; i < r.stages.size(); ++i) {
    self->monitor(r.stages[i]);
    p.stages.push_back(caf::actor_cast<stage_actor>(r.stages[i]));
  }
  for (size_t k = 0; k < p.stages.size(); ++k) {
    auto prev = k > 0 ? caf::actor_cast<caf::actor>(p.stages[k - 1]) : caf::actor{};
    auto next = k + 1 < p.stages.size() ? caf::actor_cast<caf::actor>(p.stages[k + 1])
                                        : caf::actor{};
    self->send(p.stages[k], wire_atom_v, prev, next, caf::actor_cast<caf::actor>(self));
  }
  p.launched = true;
  p.ready_pending = pulls ? p.stages.size() : 0;
  if (p.ready_pending == 0) {
    become_ready(self);
  }
}

void launch(self_ptr self, stage_plan plan, const std::string& reason) {
  auto& st = self->state;
  if (st.next) {
    stop_pipeline(self, *st.next); // superseded
    st.next.reset();
  }
  serve_pipeline p;
  p.generation = ++st.generations;
  p.plan = plan;
  p.since = clock::now();
  p.reason = reason;
  // the first pipeline of a job served from the seed builds its weights
  // itself; every other one pulls them
  bool seeded = !st.cfg.weights && p.generation == 1;
  auto window = window_for(st, plan.ranges.size());
  auto copies = seeded ? layer_copies{} : copies_of(st);
  launch_order order;
  for (size_t i = 0; i < plan.ranges.size(); ++i) {
    stage_spec spec;
    spec.model = st.desc.spec.canonical();
    spec.fingerprint = st.desc.fingerprint;
    spec.seed = st.cfg.seed;
    spec.index = static_cast<uint32_t>(i);
    spec.stages = static_cast<uint32_t>(plan.ranges.size());
    spec.begin = plan.ranges[i].first;
    spec.end = plan.ranges[i].second;
    spec.micro_batches = static_cast<uint32_t>(window);
    spec.micro_batch_size = static_cast<uint32_t>(st.cfg.max_batch);
    spec.mode = "infer";
    spec.schedule = "gpipe";
    spec.optimizer = "sgd";
    spec.threads = st.cfg.threads;
    if (st.cfg.chain_copies && i + 1 < plan.ranges.size()) {
      // the chain copy of this stage's layers: on the next stage's node
      spec.chain_holder = caf::actor_cast<caf::actor>(st.nodes[plan.nodes[i + 1]].holder);
    }
    if (!seeded) {
      add_pulls(copies, spec, plan.nodes[i]);
    }
    order.specs.push_back(std::move(spec));
    order.nodes.push_back(st.nodes[plan.nodes[i]].handle);
    order.node_names.push_back(st.nodes[plan.nodes[i]].name);
  }
  std::vector<bool> can_dial, dialable;
  for (auto& n : st.nodes) {
    can_dial.push_back(n.port != 0 && !n.dead);
    dialable.push_back(n.port != 0 && !n.host.empty() && !n.dead);
  }
  auto dials = algorithms::pairs_to_dial(plan.nodes, st.peered, can_dial, dialable);
  for (auto [a, b] : dials) {
    order.dials.push_back({a, b, st.nodes[a].handle, st.nodes[b].host, st.nodes[b].port});
  }
  order.dial_timeout = st.cfg.peer_timeout;
  order.spawn_timeout = st.cfg.node_timeout;
  log()->info("launching plan {} ({}): {}", p.generation, reason,
              describe_plan(st, plan));
  log_event(self, "launch",
            {{"generation", p.generation},
             {"plan", describe_plan(st, plan)},
             {"reason", reason}});
  auto generation = p.generation;
  st.next = std::move(p);
  auto l = self->spawn(launcher, std::move(order));
  auto limit = st.cfg.peer_timeout + st.cfg.node_timeout + tuning::helper_margin;
  self->request(l, limit, launch_atom_v)
      .then([=](launch_result& r) { on_launched(self, generation, !seeded, dials, r); },
            [=](caf::error& err) {
              launch_result r;
              r.ok = false;
              r.error = "launching the plan failed: " + self->system().render(err);
              on_launched(self, generation, !seeded, dials, r);
            });
}

// Chain replication: each stage of the current pipeline sends its layers
// to the next stage's node.
void replicate_chain(self_ptr self) {
  auto& st = self->state;
  if (!st.current) {
    return;
  }
  auto& p = *st.current;
  if (!st.cfg.chain_copies || p.stages.size() < 2) {
    return;
  }
  for (size_t i = 0; i + 1 < p.stages.size(); ++i) {
    self->send(p.stages[i], replicate_atom_v, uint64_t{0});
    auto [b, e] = p.plan.ranges[i];
    for (auto l = b; l < e; ++l) {
      st.chain_copies[p.plan.nodes[i + 1]].insert(l);
    }
  }
  log_event(
      self, "chain_copies",
      {{"plan_version", p.generation},
       {"after_resent", st.replicate_waited},
       {"answered_since_ready", st.status.serving.executions - st.executions_at_ready}});
}

// The next pipeline has its layers: it serves from now on.
void become_ready(self_ptr self) {
  auto& st = self->state;
  auto p = std::move(*st.next);
  st.next.reset();
  bool recovered = st.phase == algorithms::serve_phase::recovering ||
                   st.phase == algorithms::serve_phase::waiting;
  bool replaced = st.current.has_value();
  if (st.current) {
    st.current->since = clock::now();
    st.old.push_back(std::move(*st.current)); // answers what it holds, then stops
    st.current.reset();
  }
  // broken pipelines were kept as sources only
  for (auto it = st.old.begin(); it != st.old.end();) {
    if (it->broken) {
      stop_pipeline(self, *it);
      it = st.old.erase(it);
    } else {
      ++it;
    }
  }
  auto plan_text = describe_plan(st, p.plan);
  st.stage_busy_s.assign(p.stages.size(), 0.0);
  st.status.pipeline.plan_version = static_cast<int64_t>(p.generation);
  st.status.plan = plan_text;
  auto took = since(p.since);
  if (recovered) {
    st.status.pipeline.recoveries++;
    st.status.pipeline.last_recovery_s =
        st.failure_at == clock::time_point{} ? 0.0 : since(st.failure_at);
    st.failure_at = {};
    log()->info("serving again on {} ({:.3f} s after the failure)", plan_text,
                st.status.pipeline.last_recovery_s);
    log_event(self, "recovered",
              {{"plan", plan_text},
               {"recovery_s", st.status.pipeline.last_recovery_s},
               {"resent", st.resend.size()}});
  } else if (replaced) {
    st.status.pipeline.replans++;
    st.status.pipeline.last_replan_s = took;
    log_event(self, "replan",
              {{"plan", plan_text}, {"reason", p.reason}, {"took_s", took}});
  } else {
    log()->info("serving on {}", plan_text);
  }
  log_event(self, "plan", {{"plan_version", p.generation}, {"plan", plan_text}});
  st.current = std::move(p);
  // after a failure, what was sent again goes first (settle_replication)
  st.replicate_after.clear();
  if (recovered) {
    for (auto id : st.resend) {
      if (st.micros.count(id)) {
        st.replicate_after.insert(id);
      }
    }
  }
  st.replicate_waited = st.replicate_after.size();
  st.executions_at_ready = st.status.serving.executions;
  if (st.replicate_after.empty()) {
    replicate_chain(self);
  }
  place_load(self);
  st.waiting_for.clear();
  st.retry_wait = std::chrono::milliseconds(500);
  enter(self, algorithms::serve_event::launched);
  dispatch(self);
}

// The current pipeline lost a stage: what it held is sent again, and a
// plan over the survivors is launched (its stages may pull from the
// surviving stages of this one).
void break_current(self_ptr self, const std::string& what) {
  auto& st = self->state;
  if (!st.current) {
    return;
  }
  log()->warn("{}", what);
  log_event(self, "failure", {{"what", what}, {"in_flight", st.sent_unanswered}});
  st.status.error = what;
  if (st.failure_at == clock::time_point{}) {
    st.failure_at = clock::now();
  }
  requeue(self, st.current->generation);
  st.replicate_after.clear(); // (the pipeline that owed them is gone)
  st.current->broken = true;
  st.old.push_back(std::move(*st.current));
  st.current.reset();
  enter(self, algorithms::serve_event::failure);
  plan_next(self, "failure: " + what);
}

// A pipeline other than the current one lost a stage.
void break_other(self_ptr self, const caf::actor_addr& who, const std::string& what) {
  auto& st = self->state;
  auto has = [&](const serve_pipeline& p) {
    for (auto& s : p.stages) {
      if (s && s.address() == who) {
        return true;
      }
    }
    return false;
  };
  if (st.next && has(*st.next)) {
    log()->warn("{} (while the next plan pulled its layers)", what);
    plan_next(self, "failure during a launch: " + what);
    return;
  }
  for (auto it = st.old.begin(); it != st.old.end(); ++it) {
    if (has(*it) && !it->broken) {
      requeue(self, it->generation);
      stop_pipeline(self, *it);
      st.old.erase(it);
      dispatch(self);
      return;
    }
  }
}

bool pipeline_on(const serve_pipeline& p, size_t n) {
  return std::find(p.plan.nodes.begin(), p.plan.nodes.end(), n) != p.plan.nodes.end();
}

} // namespace

void settle_replication(self_ptr self, uint64_t answered) {
  auto& st = self->state;
  if (st.replicate_after.erase(answered) > 0 && st.replicate_after.empty()) {
    replicate_chain(self);
  }
}

std::vector<size_t> live_nodes(const serve_job_state& st) {
  std::vector<size_t> out;
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    if (!st.nodes[n].dead && !st.nodes[n].refused) {
      out.push_back(n);
    }
  }
  return out;
}

std::string describe_plan(const serve_job_state& st, const stage_plan& p) {
  std::string out;
  for (size_t i = 0; i < p.ranges.size(); ++i) {
    out += (i ? " " : "") + st.nodes[p.nodes[i]].name + "[" +
           std::to_string(p.ranges[i].first) + "," + std::to_string(p.ranges[i].second) +
           ")";
  }
  return out;
}

void stop_pipeline(self_ptr self, serve_pipeline& p) {
  for (auto& s : p.stages) {
    if (s) {
      self->demonitor(s.address());
      self->send_exit(s, caf::exit_reason::user_shutdown);
    }
  }
  p.stages.clear();
}

std::string plan_next(self_ptr self, const std::string& reason) {
  auto& st = self->state;
  if (over(st)) {
    return "the serving job has ended";
  }
  std::vector<size_t> balance = st.cfg.balance;
  if (!st.replan_balance.empty()) {
    try {
      balance = parse_balance(st.replan_balance);
    } catch (const std::exception& e) {
      st.replan_balance.clear();
      return e.what();
    }
  }
  st.replan_balance.clear();
  auto plan = choose_plan(st, balance);
  if (!plan) {
    auto why = plan.error().context().match_elements<std::string>()
                   ? plan.error().context().get_as<std::string>(0)
                   : self->system().render(plan.error());
    if (st.current) {
      log()->warn("no re-plan ({}): {}", reason, why);
      return why;
    }
    if (st.status.serving.requests == 0 && st.status.pipeline.recoveries == 0 &&
        st.old.empty()) {
      fail(self, why);
      return why;
    }
    st.waiting_for = why;
    enter(self, algorithms::serve_event::no_plan);
    log_event(self, "waiting", {{"why", why}});
    return why;
  }
  if (st.current && !st.current->broken && plan->ranges == st.current->plan.ranges &&
      plan->nodes == st.current->plan.nodes) {
    if (st.next) { // a launch of another plan is under way: this one serves on
      stop_pipeline(self, *st.next);
      st.next.reset();
    }
    log()->info("re-plan ({}): the plan that serves is still the best", reason);
    return "";
  }
  launch(self, std::move(*plan), reason);
  return "";
}

void first_plan(self_ptr self) {
  auto& st = self->state;
  // one node leaves nothing to choose: it holds every layer
  if (st.cfg.auto_plan && st.cfg.balance.empty() && live_nodes(st).size() > 1) {
    enter(self, algorithms::serve_event::profile);
    auto timeout = st.cfg.profile_timeout + 2 * tuning::link_probe_timeout;
    self->request(st.cluster, timeout, profile_atom_v, st.desc.spec.canonical(),
                  static_cast<uint32_t>(st.cfg.max_batch))
        .then([=](cluster_profile& round) { on_profiles(self, round); },
              [=](caf::error& err) { fail(self, self->system().render(err)); });
    return;
  }
  plan_next(self, "first plan");
}

void on_profiles(self_ptr self, cluster_profile& round) {
  auto& st = self->state;
  if (over(st)) {
    return;
  }
  for (auto& r : round.devices) {
    if (r.forward_s.empty()) {
      continue;
    }
    double total = 0;
    for (auto f : r.forward_s) {
      total += f;
    }
    log_event(self, "profile",
              {{"node", r.node},
               {"forward_s", total},
               {"memory_bytes", r.memory_bytes},
               {"device_type", r.device_type}});
  }
  st.capacity.set_profiles(round);
  plan_next(self, "first plan");
}

void on_ready(self_ptr self) {
  auto& st = self->state;
  if (!st.next || !st.next->launched || st.next->ready_pending == 0) {
    return;
  }
  auto sender = self->current_sender();
  bool ours = std::any_of(st.next->stages.begin(), st.next->stages.end(), [&](auto& s) {
    return caf::actor_cast<caf::strong_actor_ptr>(s) == sender;
  });
  if (ours && --st.next->ready_pending == 0) {
    become_ready(self);
  }
}

void on_down(self_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  st.dead_stages.insert(dm.source);
  if (over(st)) {
    return;
  }
  // a stage whose link went away: its node is gone too (the cluster's
  // news of it follows), so the next plan leaves the node out at once
  if (dm.reason == caf::exit_reason::remote_link_unreachable) {
    auto mark = [&](const serve_pipeline& p) {
      for (size_t i = 0; i < p.stages.size(); ++i) {
        if (p.stages[i] && p.stages[i].address() == dm.source) {
          auto n = p.plan.nodes[i];
          if (!st.nodes[n].dead) {
            st.nodes[n].dead = true;
            st.status.dead_nodes.push_back(st.nodes[n].name);
            st.chain_copies.erase(n);
          }
        }
      }
    };
    if (st.current) {
      mark(*st.current);
    }
    if (st.next) {
      mark(*st.next);
    }
    for (auto& p : st.old) {
      mark(p);
    }
  }
  if (st.current) {
    auto& p = *st.current;
    for (size_t i = 0; i < p.stages.size(); ++i) {
      if (p.stages[i] && p.stages[i].address() == dm.source) {
        break_current(self, "stage " + std::to_string(i) + " on node " +
                                st.nodes[p.plan.nodes[i]].name +
                                " went down: " + exit_text(self->system(), dm.reason));
        return;
      }
    }
  }
  break_other(self, dm.source, "a stage went down: " + exit_text(self->system(), dm.reason));
}

void on_node_lost(self_ptr self, uint32_t n, const std::string& why) {
  auto& st = self->state;
  if (n >= st.nodes.size() || st.nodes[n].refused) {
    return;
  }
  auto what = "node " + st.nodes[n].name + " went away: " + why;
  if (!st.nodes[n].dead) {
    st.nodes[n].dead = true;
    st.status.dead_nodes.push_back(st.nodes[n].name);
  }
  st.chain_copies.erase(n);
  for (auto it = st.peered.begin(); it != st.peered.end();) {
    it = it->first == n || it->second == n ? st.peered.erase(it) : std::next(it);
  }
  if (st.phase == algorithms::serve_phase::starting ||
      st.phase == algorithms::serve_phase::profiling) {
    fail(self, what + " (during start-up)");
    return;
  }
  if (st.current && pipeline_on(*st.current, n)) {
    break_current(self, what);
    return;
  }
  if (st.next && pipeline_on(*st.next, n)) {
    plan_next(self, "failure during a launch: " + what);
    return;
  }
  bool staged = false;
  for (auto it = st.old.begin(); it != st.old.end();) {
    if (!it->broken && pipeline_on(*it, n)) {
      requeue(self, it->generation);
      stop_pipeline(self, *it);
      it = st.old.erase(it);
      staged = true;
    } else {
      ++it;
    }
  }
  if (staged) {
    dispatch(self);
  } else {
    log_event(self, "spare_lost", {{"node", st.nodes[n].name}, {"why", why}});
  }
  if (!st.current && !st.next && st.phase == algorithms::serve_phase::waiting) {
    plan_next(self, "retry after the loss of " + st.nodes[n].name);
  }
}

caf::result<std::string> on_node_joined(self_ptr self, uint32_t n,
                                        const cluster_member& m) {
  auto& st = self->state;
  if (auto how = st.node_joins(n, m, &st.capacity); !how) {
    return how.error();
  }
  if (st.phase == algorithms::serve_phase::starting ||
      st.phase == algorithms::serve_phase::profiling) {
    return "node " + m.name + " joined; planned in once the service runs";
  }
  plan_next(self, "join of " + m.name);
  return "node " + m.name + " joined; planned in while the service goes on";
}

void check_pipelines(self_ptr self) {
  auto& st = self->state;
  if (over(st)) {
    return;
  }
  auto now = clock::now();
  bool freed = false;
  for (auto it = st.old.begin(); it != st.old.end();) {
    // a launch may be pulling layers from an old pipeline's stages: they
    // stay until it is up (broken ones are kept as sources anyway)
    if (it->broken || st.next) {
      ++it;
      continue;
    }
    if (in_flight_on(st, it->generation) == 0) {
      stop_pipeline(self, *it);
      it = st.old.erase(it);
    } else if (clock::now() - it->since > tuning::serve_drain_timeout) {
      requeue(self, it->generation);
      stop_pipeline(self, *it);
      it = st.old.erase(it);
      freed = true;
    } else {
      ++it;
    }
  }
  if (st.next && now - st.next->since > st.cfg.launch_timeout) {
    log()->warn("plan {} was not up after {} s; launching again", st.next->generation,
                st.cfg.launch_timeout.count() / 1000);
    plan_next(self, "the last launch timed out");
  }
  // a pipeline that answers nothing while its nodes still beat (a stage
  // hung, a message lost) is replaced like a broken one
  if (st.current) {
    auto oldest = now;
    for (auto& [id, m] : st.micros) {
      if (m.generation == st.current->generation) {
        oldest = std::min(oldest, m.sent);
      }
    }
    if (now - oldest > st.cfg.stall_timeout) {
      break_current(self, "the pipeline answered nothing for " +
                              std::to_string(st.cfg.stall_timeout.count() / 1000) +
                              " s (plan " + describe_plan(st, st.current->plan) + ")");
      return;
    }
  }
  // no pipeline and none starting (a launch failed, the plan did not fit):
  // plan again now and then, on whatever is live by then
  if (!st.current && !st.next && st.phase == algorithms::serve_phase::waiting && now >= st.retry_at) {
    st.retry_at = now + st.retry_wait;
    st.retry_wait = std::min(2 * st.retry_wait, std::chrono::milliseconds(8000));
    if (!live_nodes(st).empty()) {
      plan_next(self, "retry: " + st.waiting_for);
    }
  }
  if (freed) {
    dispatch(self);
  }
}

} // namespace salamander::actors::serve_detail
