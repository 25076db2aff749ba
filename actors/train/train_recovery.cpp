// Failures of the training job (DESIGN.md, "Recovery"). One node failure,
// from the cluster supervisor to the recovered job (README, "Following a
// failure"):
//
//   cluster_supervisor.cpp  down_msg of the node -> lost(node, why) to the job
//   train_job.cpp           lost: mark the node dead -> on_failure
//   train_recovery.cpp      on_failure: freeze, wait `failure_window` for
//                           failures that come together -> recover: pause the
//                           survivors, start a recovery round over every live
//                           holder and surviving stage
//   recovery_round.cpp      inventories with bounded timeouts -> the decision
//                           (algorithms/recovery.hpp: rollback version or
//                           fast sources)
//   train_recovery.cpp      recover_with: re-plan over the survivors, roll the
//                           counters back, assign each layer its source
//   train_plan.cpp          launch: the new stages pull their layers -> ready
//                           -> resume_after_replan: training goes on at v + 1
#include "actors/logging.hpp"
#include "actors/replication/recovery_round.hpp"
#include "actors/train/train_job_impl.hpp"
#include "algorithms/recovery.hpp"
#include "messages/errors.hpp"

namespace salamander::actors::train_detail {

namespace {

auto log() {
  return subsystem_log("recovery");
}

// The plan over the survivors: the partitioner with the profiles; a
// data-parallel job without them gets even shares; an even-split job an
// even split over every survivor when it fits their memory, else a plan
// with costs from the model's FLOPs and each node's memory.
caf::expected<stage_plan> survivor_plan(self_ptr self) {
  auto& st = self->state;
  auto live = live_nodes(st);
  try {
    if (st.capacity.profiled()) {
      return plan_to_stages(algorithms::plan_partition(planner_request(st)), live);
    }
    if (st.cfg.data_parallel) {
      return balanced_plan(st, {}, false);
    }
    auto req = planner_request(st);
    req.allow_data_parallel = false; // the job is a pipeline; it stays one
    // the user planned evenly: the survivors share the layers evenly, every
    // live node with a stage, when that fits their memory (a guess at
    // costs from FLOPs would gather the model where no measure says so)
    if (auto even = balanced_plan(st, {}, false)) {
      bool fits = true;
      for (size_t i = 0; i < even->ranges.size(); ++i) {
        auto mem = st.nodes[even->nodes[i]].info.memory_bytes;
        auto need =
            algorithms::stage_memory(req, even->ranges[i].first, even->ranges[i].second,
                                     algorithms::in_flight(req, i, even->ranges.size()));
        fits = fits && (mem <= 0 || need <= mem);
      }
      if (fits) {
        return even;
      }
    }
    req.devices.clear();
    for (auto n : live) {
      algorithms::device_profile d;
      d.name = st.nodes[n].name;
      for (auto& l : st.desc.layers) {
        d.forward_s.push_back(l.flops * 1e-9);
        d.backward_s.push_back(2 * l.flops * 1e-9);
      }
      auto mem = st.nodes[n].info.memory_bytes;
      d.memory_bytes = mem > 0 ? mem : 1e18;
      d.link_bytes_per_s = st.cfg.default_link_bytes_per_s;
      d.link_latency_s = 1e-4;
      req.devices.push_back(std::move(d));
    }
    return plan_to_stages(algorithms::plan_partition(req), live);
  } catch (const std::exception& e) {
    return caf::make_error(errc::bad_config,
                           std::string("the surviving nodes cannot hold the model: ") +
                               e.what());
  }
}

// The rate at which each source can send to `node`, as far as known: the
// profilers' measure of that pair; for the central holder (beside the
// supervisor, whose links nobody measures) or an unmeasured pair, the
// receiving node's median measured link; else its profile's, else the
// default rate.
std::vector<double> pull_rates(const train_job_state& st,
                               const std::vector<algorithms::recovery_source>& sources,
                               size_t node, const std::vector<bool>& dead) {
  double fallback = st.cfg.default_link_bytes_per_s;
  if (auto [rate, latency] = st.capacity.measured_link(node, dead); rate > 0) {
    fallback = rate;
  } else if (node < st.nodes.size() && st.nodes[node].info.link_bytes_per_s > 0) {
    fallback = st.nodes[node].info.link_bytes_per_s;
  }
  std::vector<double> out;
  for (auto& s : sources) {
    double measured = s.central ? 0.0 : st.capacity.link_rate(s.node, node);
    out.push_back(measured > 0 ? measured : fallback);
  }
  return out;
}

// The counters after a recovery decision. Exact: roll back to v, the
// batches after it are replayed. Fast: no rollback; the lost layers miss the
// updates since their replica (not exact, and the audit says so). Returns
// the fast policy's per-layer sources.
std::vector<algorithms::layer_pick> roll_back(self_ptr self, const recovery_decision& d) {
  auto& st = self->state;
  std::vector<algorithms::layer_pick> fast_picks;
  if (d.fast) {
    auto stale = nlohmann::json::array();
    for (size_t l = 0; l < d.pick_source.size(); ++l) {
      fast_picks.push_back({static_cast<size_t>(d.pick_source[l]), d.pick_version[l]});
      if (d.pick_version[l] != current_version) {
        stale.push_back({{"layer", l}, {"version", d.pick_version[l]}});
      }
    }
    auto missed = algorithms::missed_updates(fast_picks, st.committed);
    st.status.training.exact = false;
    st.status.training.missed_layer_updates += missed;
    st.status.pipeline.rollback_version = static_cast<int64_t>(st.committed);
    log_event(self, "recovery_plan",
              {{"policy", "fast"},
               {"rollback_version", st.committed},
               {"redone_batches", 0},
               {"stale_layers", stale},
               {"missed_layer_updates", missed},
               {"detect_to_plan_s", since(st.failure_at)},
               {"unanswered_sources", d.unanswered},
               {"live_nodes", live_nodes(st).size()}});
  } else {
    log_event(self, "recovery_plan",
              {{"policy", "exact"},
               {"rollback_version", d.version},
               {"redone_batches", st.committed - d.version},
               {"detect_to_plan_s", since(st.failure_at)},
               {"unanswered_sources", d.unanswered},
               {"live_nodes", live_nodes(st).size()}});
    st.status.training.redone_batches += static_cast<int64_t>(st.committed - d.version);
    st.status.pipeline.rollback_version = static_cast<int64_t>(d.version);
    st.status.training.lineage.resize(d.version);
    st.committed = d.version;
  }
  return fast_picks;
}

// The plan a recovery launches: over the survivors; a resumed job goes on
// with the plan that ran, when all its nodes are back.
caf::expected<stage_plan> recovery_plan(self_ptr self) {
  auto& st = self->state;
  auto plan = survivor_plan(self);
  if (st.resume_plan) {
    bool back =
        std::all_of(st.resume_plan->nodes.begin(), st.resume_plan->nodes.end(),
                    [&](size_t n) { return n < st.nodes.size() && !st.nodes[n].dead; });
    if (back) {
      plan = *st.resume_plan;
    }
    st.resume_plan.reset();
  }
  return plan;
}

// The time the busiest sender's link needs for what it sends (bytes by
// sender, bytes/s by sender; a rate of 0 is an unshaped link).
double link_limit_s(const std::map<std::string, int64_t>& sent,
                    const std::map<std::string, double>& rates) {
  double limit = 0;
  for (auto& [sender, bytes] : sent) {
    if (auto rate = rates.find(sender); rate != rates.end() && rate->second > 0) {
      limit = std::max(limit, static_cast<double>(bytes) / rate->second);
    }
  }
  return limit;
}

// Step 2, once the round decided: re-plan, roll back (exact) or keep going
// (fast), and launch stages that pull each layer from its source.
void recover_with(self_ptr self, uint64_t attempt, recovery_decision d) {
  auto& st = self->state;
  if (attempt != st.attempt || st.phase != job_phase::recovering) {
    return;
  }
  st.round = recovery_round_actor{};
  if (!d.fallback.empty()) {
    log_event(self, "policy_fallback", {{"why", d.fallback}});
  }
  auto plan = recovery_plan(self);
  if (!plan) {
    wait_for_capacity(self, self->system().render(plan.error()));
    return;
  }
  st.rollback_from = st.committed;
  st.recovery_planned_at = clock::now();
  auto fast_picks = roll_back(self, d);
  log()->info("rolling back to version {} over {} live node(s), plan {} stage(s)",
              st.status.pipeline.rollback_version, live_nodes(st).size(),
              plan->ranges.size());
  st.fed = st.committed;
  st.reports.clear();
  st.status.training.committed = static_cast<int64_t>(st.committed);
  st.evaluated_epochs = std::min<int64_t>(
      st.evaluated_epochs, static_cast<int64_t>(st.committed / st.batches_per_epoch));
  // exact: each layer from a source on the stage's own node when it has
  // the layer, else spread over the other sources by their links to it
  // (algorithms::spread_pulls); fast: from the decision's picks
  auto sources = as_recovery_sources(d.sources);
  auto handles = std::make_shared<std::vector<caf::actor>>();
  for (auto& f : d.sources) {
    handles->push_back(f.handle);
  }
  bool fast = d.fast;
  auto v = d.version;
  auto on_nodes = plan->nodes;
  std::map<size_t, std::vector<double>> rates; // node -> each source's rate to it
  if (!fast) {
    auto dead = dead_mask(st);
    for (auto n : on_nodes) {
      rates.emplace(n, pull_rates(st, sources, n, dead));
    }
  }
  auto names = node_names(st);
  st.recovery_sent.clear();
  auto send_rate =
      std::make_shared<std::map<std::string, double>>(); // bytes/s; 0: unshaped
  std::vector<int64_t> layer_bytes;
  for (auto& l : st.desc.layers) {
    layer_bytes.push_back(l.param_bytes * state_factor(st.cfg));
  }
  auto pull_from = [=](stage_spec& spec) {
    if (!fast && v == 0) {
      return; // the seed: nothing to pull
    }
    std::vector<algorithms::layer_pick> picks;
    if (fast) {
      picks.assign(fast_picks.begin() + static_cast<std::ptrdiff_t>(spec.begin),
                   fast_picks.begin() + static_cast<std::ptrdiff_t>(spec.end));
    } else {
      auto node = spec.index < on_nodes.size() ? on_nodes[spec.index] : SIZE_MAX;
      auto r = rates.find(node);
      picks =
          *algorithms::spread_pulls(sources, spec.begin, spec.end, v, node, layer_bytes,
                                    r != rates.end() ? r->second : std::vector<double>{});
    }
    auto from = nlohmann::json::array();
    auto to = spec.index < on_nodes.size() ? on_nodes[spec.index] : SIZE_MAX;
    for (auto& p : algorithms::merge_pulls(picks, spec.begin)) {
      spec.sources.push_back((*handles)[p.source]);
      spec.source_begin.push_back(p.begin);
      spec.source_end.push_back(p.end);
      spec.source_version.push_back(p.version);
      auto& s = sources[p.source];
      auto sender = s.central               ? std::string{"central"}
                    : s.node < names.size() ? names[s.node]
                                            : std::string{"?"};
      from.push_back(
          {{"source", sender}, {"stage", s.stage}, {"begin", p.begin}, {"end", p.end}});
      if (s.central || s.node != to) { // (from its own node: no bytes on a link)
        auto& sent = self->state.recovery_sent[sender];
        for (auto l = p.begin; l < p.end && l < layer_bytes.size(); ++l) {
          sent += layer_bytes[l];
        }
        (*send_rate)[sender] = s.central ? self->state.cfg.central_link_mbps * 1e6 / 8
                               : s.node < self->state.nodes.size()
                                   ? self->state.nodes[s.node].info.link_bytes_per_s
                                   : 0.0;
      }
    }
    // where each stage's layers come from (a source on its own node too)
    log_event(self, "pulls", {{"stage", spec.index}, {"from", from}});
  };
  launch(self, std::move(*plan), launch_kind::recovery, pull_from);
  st.recovery_link_limit_s = link_limit_s(st.recovery_sent, *send_rate);
}

// The round decided and the links are measured again: plan the recovery.
void plan_when_ready(self_ptr self, uint64_t attempt) {
  auto& st = self->state;
  if (attempt != st.attempt || !st.decision || !st.links_probed) {
    return;
  }
  auto d = std::move(*st.decision);
  st.decision.reset();
  recover_with(self, attempt, std::move(d));
}

// A job planned by measure plans its recovery over the survivors' links
// as they are now, not as they were at the start (a link may have slowed,
// or its node been replaced): every ordered pair of live nodes is probed
// again while the round asks for inventories, for at most
// tuning::recovery_probe_budget; pairs not reached keep their old measure.
void reprobe_links(self_ptr self, uint64_t attempt) {
  auto& st = self->state;
  auto live = live_nodes(st);
  st.links_probed = !st.capacity.profiled() || live.size() < 2;
  if (st.links_probed) {
    return;
  }
  std::vector<std::string> names;
  for (auto n : live) {
    names.push_back(st.nodes[n].name);
  }
  auto started = clock::now();
  auto budget = static_cast<uint32_t>(tuning::recovery_probe_budget.count());
  auto done = [=](const std::vector<link_entry>& links) {
    auto& st = self->state;
    if (attempt != st.attempt) {
      return;
    }
    st.capacity.update_links(links);
    auto measured = nlohmann::json::array();
    for (auto& l : links) {
      measured.push_back({{"from", l.report.from},
                          {"to", l.report.to},
                          {"bytes_per_s", l.report.bytes_per_s},
                          {"latency_s", l.report.latency_s}});
    }
    log_event(self, "links_probed",
              {{"pairs", links.size()},
               {"of", names.size() * (names.size() - 1)},
               {"probe_s", since(started)},
               {"links", measured}});
    st.links_probed = true;
    plan_when_ready(self, attempt);
  };
  self->request(st.cluster, tuning::recovery_probe_budget + tuning::helper_margin,
                probe_atom_v, names, budget)
      .then([=](cluster_profile& p) { done(p.links); },
            [=](caf::error& err) {
              log()->warn("probing the survivors' links failed ({}); planning with the "
                          "links as first measured",
                          self->system().render(err));
              done({});
            });
}

} // namespace

// Too little capacity is left: keep every replica and wait for a node to
// join (the job is not failed, nothing is discarded).
void wait_for_capacity(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (!enter(self, job_event::no_capacity)) {
    return;
  }
  st.waiting_for = why;
  st.status.error = "paused: " + why + "; waiting for a node to join";
  st.status.health = "paused: too little capacity";
  log()->warn("{}", st.status.error);
  log_event(self, "paused", {{"why", why}});
}

// The pause for capacity outlasted --pause-timeout: the job ends, failed,
// with the newest version of the whole model the central holder keeps (the
// global replicas), rolled back to it so that its lineage is that of the
// weights it ends with, which the runner fetches for --save.
void give_up(self_ptr self) {
  auto& st = self->state;
  if (st.giving_up) {
    return;
  }
  st.giving_up = true;
  auto waited = std::to_string(st.cfg.pause_timeout.count() / 1000);
  auto why = "paused for " + waited + " s (" + st.waiting_for +
             ") and no node came back; gave up (--pause-timeout " + waited + ")";
  auto end = [=](const std::string& weights) {
    auto& st = self->state;
    if (st.phase != job_phase::waiting) {
      return; // a node came back meanwhile
    }
    st.status.stopped = "the pause timeout";
    log_event(self, "gave_up", {{"why", why}, {"weights", weights}});
    fail(self, why + "; " + weights);
  };
  auto layers = st.layers();
  self->request(st.central_holder, st.cfg.request_timeout, caf::get_atom_v)
      .then(
          [=](replica_inventory& inv) {
            // the newest version every layer has, of those committed (a
            // stage replicates before its batch commits: a version past
            // the last commit holds a batch the lineage does not)
            std::map<uint64_t, std::set<uint64_t>> by_version;
            auto committed = self->state.committed;
            for (size_t i = 0; i < inv.layers.size() && i < inv.versions.size(); ++i) {
              if (inv.versions[i] <= committed) {
                by_version[inv.versions[i]].insert(inv.layers[i]);
              }
            }
            std::optional<uint64_t> v;
            for (auto& [version, have] : by_version) {
              if (have.size() == layers) {
                v = version;
              }
            }
            if (!v) {
              end("no complete copy of the weights is kept here (--global-every), so "
                  "none is saved");
              return;
            }
            self->request(st.central_holder, st.cfg.request_timeout, snapshot_atom_v,
                          uint64_t{0}, static_cast<uint64_t>(layers), *v)
                .then(
                    [=](snapshot_payload& p) {
                      auto& st = self->state;
                      if (st.phase != job_phase::waiting) {
                        return;
                      }
                      st.final_weights = std::move(p.snapshot);
                      st.committed = *v;
                      st.status.training.committed = static_cast<int64_t>(*v);
                      st.status.pipeline.rollback_version = static_cast<int64_t>(*v);
                      st.status.training.lineage.resize(*v);
                      end("the weights it ends with are those after batch " +
                          std::to_string(*v) + " (the newest global replica)");
                    },
                    [=](caf::error& err) {
                      end("the global replica could not be read (" +
                          self->system().render(err) + "), so none is saved");
                    });
          },
          [=](caf::error& err) {
            end("the global replica could not be read (" + self->system().render(err) +
                "), so none is saved");
          });
}

// A stage or node was lost while the job ran: freeze, and recover after the
// failure window (so that a node's stages and the node itself, or two
// neighbours killed together, are handled as one failure). A newer failure
// supersedes a round in progress.
void on_failure(self_ptr self, const std::string& what) {
  auto& st = self->state;
  if (algorithms::is_over(st.phase)) {
    return;
  }
  if (!recovering(st)) {
    st.failure_at = clock::now();
  }
  if (st.phase != job_phase::recovering && !enter(self, job_event::failure)) {
    return;
  }
  st.status.error = what; // the last failure, for status displays
  st.status.health = "recovering: " + what;
  log()->warn("FAILURE: {}", what);
  log_event(self, "failure", {{"what", what}, {"committed", st.committed}});
  ++st.attempt;
  if (st.round) {
    self->send_exit(st.round, caf::exit_reason::user_shutdown);
    st.round = recovery_round_actor{};
  }
  self->delayed_send(self, st.cfg.failure_window, recover_atom_v, st.attempt);
}

// Step 1 of recovery: freeze the surviving stages and ask a recovery round
// what every live replica holder and surviving stage holds (a stage's kept
// snapshots are the freshest copy of its layers when the holder of its chain
// replica died). Survivors stay up until the new stages have pulled from
// them; the rest stop now.
void recover(self_ptr self, uint64_t attempt) {
  auto& st = self->state;
  if (attempt != st.attempt || st.phase != job_phase::recovering) {
    return;
  }
  recovery_request req;
  req.layers = st.layers();
  req.committed = st.committed;
  // (a resume has no survivors to keep their weights: it rolls back)
  req.fast = st.cfg.recovery_policy == "fast" && st.committed > 0 && !st.resuming;
  req.stage_timeout = st.cfg.stage_inventory_timeout;
  req.holder_timeout = st.cfg.holder_inventory_timeout;
  recovery_source_info central;
  central.handle = caf::actor_cast<caf::actor>(st.central_holder);
  central.central = true;
  req.sources.push_back(central);
  for (auto n : live_nodes(st)) {
    if (st.nodes[n].holder) {
      recovery_source_info h;
      h.handle = caf::actor_cast<caf::actor>(st.nodes[n].holder);
      h.node = n;
      req.sources.push_back(h);
    }
  }
  std::vector<stage_actor> keep;
  auto consider = [&](const stage_actor& s, uint64_t node, uint64_t b, uint64_t e) {
    if (!s) {
      return;
    }
    self->demonitor(s.address());
    if (st.dead_stages.count(s.address()) > 0) {
      return; // a request to it would wait its whole timeout
    }
    if (node >= st.nodes.size()) {
      if (auto it = st.stage_node.find(s.address()); it != st.stage_node.end()) {
        node = it->second;
      }
    }
    bool node_known = node < st.nodes.size();
    if (!node_known || !st.nodes[node].dead) {
      self->send(s, pause_atom_v); // before get: what it reports stays true
      keep.push_back(s);
      recovery_source_info src;
      src.handle = caf::actor_cast<caf::actor>(s);
      src.node = node;
      src.stage = true;
      src.begin = b;
      src.end = e;
      req.sources.push_back(src);
    } else {
      self->send_exit(s, caf::exit_reason::user_shutdown);
    }
  };
  bool stages_match = st.stages.size() == st.plan.ranges.size();
  for (size_t i = 0; i < st.stages.size(); ++i) {
    consider(st.stages[i], stages_match ? st.plan.nodes[i] : ~uint64_t{0},
             stages_match ? st.plan.ranges[i].first : 0,
             stages_match ? st.plan.ranges[i].second : 0);
  }
  for (auto& s : st.old_stages) {
    // a previous plan's stages (an interrupted re-plan or recovery): their
    // kept snapshots only, unless their node is gone too
    consider(s, ~uint64_t{0}, 0, 0);
  }
  st.old_stages = keep; // stopped once the new stages are ready
  st.stages.clear();
  st.replan_requested = false;
  st.pending_plan.reset();
  st.replaced_plan.reset(); // (it has the lost node in it)
  st.replan_looks.clear();
  st.replan_candidate.reset();
  st.ready_pending = 0;
  st.eval_round++; // results of an interrupted evaluation are ignored
  if (live_nodes(st).empty()) {
    wait_for_capacity(self, "no nodes are left");
    return;
  }
  st.round = self->spawn(recovery_round, std::move(req));
  st.decision.reset();
  reprobe_links(self, attempt);
  auto limit = st.cfg.holder_inventory_timeout + tuning::helper_margin;
  self->request(st.round, limit, recover_atom_v)
      .then(
          [=](recovery_decision& d) {
            if (attempt == self->state.attempt) {
              self->state.decision = std::move(d);
              plan_when_ready(self, attempt);
            }
          },
          [=](caf::error& err) {
            if (attempt == self->state.attempt &&
                !algorithms::is_over(self->state.phase)) {
              fail(self, "recovery failed: " + self->system().render(err));
            }
          });
}

// A resumed job (its supervisor died): the counters and lineage are the
// dead supervisor's up to the newest version it may have reached, and the
// job recovers as from a failure of every stage at once. The central holder
// holds the version read back from disk, the nodes' holders what they kept
// (a node admitted by this new supervisor starts with an empty one), so the
// recovery round rolls back to the newest version every layer has, at or
// below what was committed, and replays from there. Nodes of the persisted
// plan that are gone are recovered without (and dialled again).
void resume_job(self_ptr self) {
  auto& st = self->state;
  auto& r = *st.cfg.resume;
  auto on_disk = r.weights ? r.weights->version : 0;
  st.committed = std::min<uint64_t>(std::max(r.committed, on_disk), total_batches(st));
  st.status.training.lineage.resize(st.committed);
  for (uint64_t g = 0; g < st.committed; ++g) {
    st.status.training.lineage[g] = g;
  }
  st.fed = st.committed;
  st.status.training.committed = static_cast<int64_t>(st.committed);
  st.status.pipeline.recoveries = r.recoveries;
  st.status.pipeline.replans = r.replans;
  st.async_delay = r.async_delay; // the same math as before the restart
  st.status.training.redone_batches = r.redone_batches;
  st.status.test_accuracy = r.test_accuracy;
  st.evaluated_epochs = r.evaluated_epochs;
  st.evaluated_at = static_cast<uint64_t>(r.evaluated_epochs * st.batches_per_epoch);
  st.status.training.epoch =
      static_cast<int64_t>(st.committed / st.batches_per_epoch) + 1;
  st.epoch_started = clock::now();
  st.user_plan = r.user_plan || !st.cfg.balance.empty() || st.cfg.stages > 0;
  // the plan that ran, by name, over this cluster's nodes
  if (!r.plan_nodes.empty() && r.plan_nodes.size() == r.plan_ranges.size()) {
    stage_plan p;
    p.ranges = r.plan_ranges;
    p.split = r.plan_split;
    for (auto& name : r.plan_nodes) {
      for (size_t n = 0; n < st.nodes.size(); ++n) {
        if (st.nodes[n].name == name) {
          p.nodes.push_back(n);
        }
      }
    }
    if (p.nodes.size() == p.ranges.size()) {
      st.resume_plan = std::move(p);
    }
  }
  std::vector<std::string> gone;
  for (auto& n : st.nodes) {
    if (n.dead && !n.refused) {
      gone.push_back(n.name);
      st.status.dead_nodes.push_back(n.name);
    }
  }
  log()->warn("RESUMING the job of a supervisor that died: {} batch(es) committed, the "
              "central replica at version {}{}",
              r.committed, on_disk,
              gone.empty() ? std::string() : "; nodes gone meanwhile: " + [&] {
                std::string s;
                for (auto& g : gone) {
                  s += (s.empty() ? "" : ", ") + g;
                }
                return s;
              }());
  log_event(self, "restarted",
            {{"committed", r.committed},
             {"central_version", on_disk},
             {"resumes", r.resumes + 1},
             {"nodes_gone", gone}});
  st.resuming = true;
  st.failure_at = clock::now();
  st.status.health = "resuming";
  // starting -> training -> recovering: the phase table's way into a recovery
  enter(self, job_event::launched);
  enter(self, job_event::failure);
  ++st.attempt;
  recover(self, st.attempt);
}

} // namespace salamander::actors::train_detail
