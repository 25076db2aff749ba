// The training job supervisor's behaviour: start-up, the messages of its
// stages, the cluster supervisor's news (a node lost, a node joined) and the
// console's training commands. The work is in train_loop.cpp (batches),
// train_plan.cpp (plans), train_recovery.cpp (failures) and train_ops.cpp
// (status, weights, checkpoints).
#include "actors/exit_text.hpp"
#include "actors/job/ended.hpp"
#include "actors/job/running.hpp"
#include "actors/job/metrics.hpp"
#include "actors/logging.hpp"
#include "actors/replication/replica_holder.hpp"
#include "actors/train/train_job_impl.hpp"
#include "algorithms/sampling.hpp"
#include "messages/errors.hpp"
#include "models/trainer.hpp"

#include <sstream>

namespace salamander::actors {

using namespace train_detail;

namespace {

auto log() {
  return subsystem_log("job");
}

void write_start(self_ptr self) {
  auto& st = self->state;
  nlohmann::json names = nlohmann::json::array();
  for (auto& n : st.nodes) {
    names.push_back(n.name);
  }
  log_event(self, "start",
            {{"model", st.cfg.model},
             {"nodes", names},
             {"epochs", st.cfg.epochs},
             {"batches_per_epoch", st.batches_per_epoch},
             {"batch_size", st.cfg.batch_size},
             {"micro_batches", st.cfg.micro_batches},
             {"schedule", st.cfg.schedule},
             {"replicate_every", st.cfg.replicate_every},
             {"resumed", st.cfg.resume != nullptr},
             {"unix_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count()}});
}

// The cluster admitted its nodes: the job starts on them.
void on_members(self_ptr self, std::vector<cluster_member>& members) {
  auto& st = self->state;
  for (auto& m : members) {
    st.nodes.push_back(node_of(m));
  }
  write_start(self);
  for (auto& m : members) {
    if (m.refused && !m.lost) {
      log_event(self, "refused", {{"node", m.name}, {"why", "cluster secret"}});
    }
  }
  if (st.cfg.resume) {
    // a resumed job's nodes that are gone were lost while no supervisor
    // ran: it recovers without them (they are dialled again)
    resume_job(self);
    return;
  }
  for (auto& m : members) {
    if (m.lost) {
      fail(self, "node " + m.name + " went away during start-up: " + m.why);
      return;
    }
  }
  first_plan(self);
}

// The cluster lost one of the job's nodes.
void on_node_lost(self_ptr self, uint32_t n, const std::string& why) {
  auto& st = self->state;
  if (n >= st.nodes.size() || st.nodes[n].refused) {
    return; // never part of the job
  }
  bool running = algorithms::is_running(st.phase);
  auto what = "node " + st.nodes[n].name + " went away" +
              (running ? ": " : " during start-up: ") + why;
  if (!running) {
    fail(self, what);
    return;
  }
  if (!st.nodes[n].dead) {
    st.nodes[n].dead = true;
    st.status.dead_nodes.push_back(st.nodes[n].name);
  }
  for (auto it = st.peered.begin(); it != st.peered.end();) {
    it = it->first == n || it->second == n ? st.peered.erase(it) : std::next(it);
  }
  // a spare node (no stage of the plan, so none of its replicas either: a
  // stage's chain replica lives on the next stage's node) is dropped as it
  // is, with no rollback, while the plan runs undisturbed
  bool steady = st.phase == job_phase::training || st.phase == job_phase::paused ||
                st.phase == job_phase::evaluating || st.phase == job_phase::checkpointing;
  bool staged =
      std::find(st.plan.nodes.begin(), st.plan.nodes.end(), n) != st.plan.nodes.end();
  if (steady && !staged) {
    log()->warn("{} (it held no stage: nothing to recover)", what);
    log_event(self, "spare_lost", {{"node", st.nodes[n].name}, {"why", why}});
    st.pending_plan.reset(); // it may have planned the spare in
    st.replaced_plan.reset();
    st.replan_looks.clear();
    st.replan_candidate.reset();
    return;
  }
  on_failure(self, what);
}

// A node joined the cluster (new, or back after a failure).
caf::result<std::string> on_node_joined(self_ptr self, uint32_t n,
                                        const cluster_member& m) {
  auto& st = self->state;
  if (auto how = st.node_joins(n, m, &st.capacity); !how) {
    return how.error();
  }
  if (st.phase == job_phase::waiting) {
    enter(self, job_event::joined);
    ++st.attempt;
    recover(self, st.attempt);
    return "node " + m.name + " joined; the paused job resumes";
  }
  st.replan_requested = true;
  st.replan_balance.clear();
  st.replan_reason = "join of " + m.name;
  feed(self);
  return "node " + m.name + " joined; planned in at the next flush";
}

// A stage of the current plan went down (crashed, killed, its node gone).
void on_down(self_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  for (size_t i = 0; i < st.stages.size(); ++i) {
    if (!st.stages[i] || st.stages[i].address() != dm.source) {
      continue;
    }
    st.dead_stages.insert(dm.source); // recovery does not ask it (a request would hang)
    auto what = "stage " + std::to_string(i) + " on node " +
                st.nodes[st.plan.nodes[i]].name +
                " went down: " + exit_text(self->system(), dm.reason);
    if (!algorithms::is_running(st.phase)) {
      fail(self, what);
      return;
    }
    on_failure(self, what);
    return;
  }
  // a stage of the old plan while the new stages pull their layers from it:
  // they cannot finish, so this is a failure like any other
  for (size_t i = 0; i < st.old_stages.size(); ++i) {
    if (st.phase != job_phase::replanning || st.old_stages[i].address() != dm.source) {
      continue;
    }
    st.dead_stages.insert(dm.source);
    auto node = i < st.old_plan.nodes.size() ? st.nodes[st.old_plan.nodes[i]].name : "?";
    on_failure(self,
               "stage " + std::to_string(i) + " of the old plan on node " + node +
                   " went down during a re-plan: " + exit_text(self->system(), dm.reason));
    return;
  }
}

bool from_current_stage(self_ptr self) {
  auto sender = self->current_sender();
  auto& stages = self->state.stages;
  return std::any_of(stages.begin(), stages.end(), [&](const stage_actor& a) {
    return caf::actor_cast<caf::strong_actor_ptr>(a) == sender;
  });
}

// Data parallelism through the supervisor (--dp-reduce supervisor): sum
// the members' gradients, chain their BatchNorm statistics, and send every
// member the result.
void on_reduce(self_ptr self, uint64_t batch, uint32_t member, uint64_t grad_values,
               torch::Tensor part) {
  auto& st = self->state;
  if (st.plan.split.empty() || member >= st.stages.size() ||
      caf::actor_cast<caf::strong_actor_ptr>(st.stages[member]) !=
          self->current_sender()) {
    return; // a stage of a plan that was replaced
  }
  auto& parts = st.reduce_parts[batch];
  parts.resize(st.stages.size());
  parts[member] = std::move(part);
  for (auto& p : parts) {
    if (!p.defined()) {
      return;
    }
  }
  try {
    auto merged = models::dp_merge(parts, static_cast<int64_t>(grad_values));
    st.reduce_parts.erase(batch);
    for (auto& s : st.stages) {
      self->send(s, reduce_atom_v, batch, tensor_payload{merged});
    }
  } catch (const std::exception& e) {
    fail(self, std::string("data-parallel sum failed: ") + e.what());
  }
}

caf::result<std::string> on_replicate(self_ptr self) {
  auto& st = self->state;
  if (st.phase == job_phase::replanning || st.stages.empty()) {
    return caf::make_error(errc::not_ready, "the job is " + to_string(st.status.phase) +
                                                 "; replicate once it trains again");
  }
  // every stage reaches version `fed` once the batches in flight are
  // stepped (at a flush it is there already); under the async schedule the
  // replica carries the older versions the batches after it train on
  auto version = st.fed;
  if (version == 0) {
    return caf::make_error(errc::not_ready,
                           "nothing trained yet; the seed needs no replica");
  }
  for (auto& s : st.stages) {
    self->send(s, replicate_atom_v, version);
  }
  st.status.training.replicated_version = static_cast<int64_t>(version);
  log_event(self, "replicate", {{"version", version}});
  return "replicating version " + std::to_string(version) + " of all " +
         std::to_string(st.stages.size()) + " stages to their chain and global holders";
}

// The console paused the job (the job core took it): batches in flight
// finish, none start.
caf::result<std::string> on_pause(self_ptr self) {
  auto& st = self->state;
  if (st.phase == job_phase::training) {
    enter(self, job_event::pause);
  }
  log_event(self, "pause", {{"committed", st.committed}});
  auto in_flight = st.fed - st.committed;
  return "paused at batch " + std::to_string(st.committed) + ": " +
         std::to_string(in_flight) +
         " batch(es) in flight finish, no new ones start; resume carries on";
}

std::string not_paused(self_ptr self) {
  return self->state.phase == job_phase::waiting
             ? "not paused by the console; the job waits for a node to join"
             : "not paused";
}

caf::result<std::string> on_resume(self_ptr self) {
  auto& st = self->state;
  log_event(self, "resume", {{"committed", st.committed}});
  if (enter(self, job_event::resume)) {
    st.last_progress = clock::now();
    st.recent.clear();
    feed(self);
  }
  return "resumed at batch " + std::to_string(st.committed);
}

caf::result<std::string> on_checkpoint(self_ptr self, const std::string& path) {
  auto& st = self->state;
  auto rp = self->make_response_promise<std::string>();
  st.checkpoints.push_back({path, rp});
  feed(self); // at a flush already: now
  return rp;
}

// A profiler's capacity report, passed on by the cluster supervisor.
void on_capacity(self_ptr self, const std::string& name, double factor) {
  auto& st = self->state;
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    if (st.nodes[n].name != name || st.nodes[n].dead || !(factor > 0)) {
      continue;
    }
    log_event(self, "capacity", {{"node", name}, {"factor", factor}});
    bool staged =
        std::find(st.plan.nodes.begin(), st.plan.nodes.end(), n) != st.plan.nodes.end();
    st.capacity.report_capacity(n, factor, staged);
  }
}

void on_done(self_ptr self, const batch_stats& s) {
  auto& st = self->state;
  if (!from_current_stage(self)) {
    return; // a stage of a plan that was replaced
  }
  auto& r = st.reports[s.batch];
  r.push_back(s);
  if (r.size() == st.stages.size() && s.batch == st.committed) {
    commit(self, s.batch);
  }
}

void on_stage_failed(self_ptr self, uint32_t stage, const std::string& what) {
  auto& st = self->state;
  if (!from_current_stage(self) || stage >= st.plan.nodes.size()) {
    return; // a stage of a replaced plan
  }
  auto text = "stage " + std::to_string(stage) + " on node " +
              st.nodes[st.plan.nodes[stage]].name + " failed: " + what;
  if (st.phase == job_phase::replanning || st.phase == job_phase::recovering) {
    // it could not pull its layers: a source went away, which recovery
    // handles (the stage's own down message follows and joins this failure)
    on_failure(self, text);
    return;
  }
  fail(self, text);
}

// A re-planned or recovering stage pulled its state.
void on_ready(self_ptr self) {
  auto& st = self->state;
  bool waiting = st.phase == job_phase::replanning || st.phase == job_phase::recovering;
  if (waiting && st.ready_pending > 0 && from_current_stage(self) &&
      --st.ready_pending == 0) {
    resume_after_replan(self);
  }
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  auto limit_s = std::to_string(st.cfg.progress_timeout.count() / 1000);
  if (st.phase == job_phase::training &&
      clock::now() - st.last_progress > st.cfg.progress_timeout) {
    fail(self, "no batch committed for " + limit_s + " s (batch " +
                   std::to_string(st.committed) + ")");
    return;
  }
  // a re-plan or recovery that cannot finish ends the job with a reason
  // rather than holding it forever (waiting for capacity is another matter)
  bool moving = st.phase == job_phase::replanning || st.phase == job_phase::recovering;
  if (moving && clock::now() - st.phase_entered > st.cfg.progress_timeout) {
    fail(self, "the " + to_string(st.status.phase) + " phase did not complete in " + limit_s +
                   " s (batch " + std::to_string(st.committed) + ")");
    return;
  }
  if (st.phase == job_phase::waiting && st.cfg.pause_timeout.count() > 0 &&
      clock::now() - st.phase_entered > st.cfg.pause_timeout) {
    give_up(self);
  }
  look_at_plan(self); // (also between commits: a slow stage commits rarely)
  st.flush_metrics();
  self->delayed_send(self, st.cfg.tick_period, tick_atom_v);
}

caf::result<std::string> on_kill_stage(self_ptr self, uint32_t stage) {
  auto& st = self->state;
  if (stage >= st.stages.size() || !st.stages[stage]) {
    return caf::make_error(
        errc::no_such_worker, "there is no stage " + std::to_string(stage) +
                              " (the plan has " + std::to_string(st.stages.size()) + ")");
  }
  self->send_exit(st.stages[stage], caf::exit_reason::kill);
  return "stage " + std::to_string(stage) + " on node " +
         st.nodes[st.plan.nodes[stage]].name + " killed";
}

caf::result<std::string> on_replan(self_ptr self, const std::string& balance) {
  auto& st = self->state;
  try {
    // a balance that cannot be planned is refused now, and the job goes on
    if (auto layers = parse_balance(balance); !layers.empty()) {
      if (auto plan = balanced_plan(st, layers, true); !plan) {
        return caf::make_error(errc::bad_config,
                               "repartition " + balance + " refused: " +
                                   plan.error().context().get_as<std::string>(0));
      }
    }
  } catch (const std::exception& e) {
    return caf::make_error(errc::bad_config, e.what());
  }
  st.replan_requested = true;
  st.replan_balance = balance;
  st.replan_reason = balance.empty() ? "console" : "console, balance " + balance;
  // a balance is the user's plan and holds; a bare repartition hands the
  // plan back to the planner
  st.user_plan = !balance.empty();
  st.replaced_plan.reset();
  feed(self); // starts it now if nothing is in flight
  return std::string("re-plan scheduled at the next flush") +
         (st.user_paused ? " (the job is paused: it happens after resume)" : "");
}

// Stop at the next flush (SIGINT, SIGTERM): the job ends `finished` with
// every stage at one version, so its weights can be saved. Where no stage
// runs (start-up, no nodes left) there is no flush to wait for.
caf::result<std::string> on_stop(self_ptr self) {
  auto& st = self->state;
  log_event(self, "stop", {{"why", st.stop_requested}, {"committed", st.committed}});
  bool staged = st.phase == job_phase::training || st.phase == job_phase::paused ||
                st.phase == job_phase::evaluating || st.phase == job_phase::replanning ||
                st.phase == job_phase::checkpointing ||
                (st.phase == job_phase::recovering && !live_nodes(st).empty());
  if (!staged) {
    fail(self, "stopped (" + st.stop_requested + ") while " + to_string(st.status.phase) +
                   ", before any weights could be gathered");
    return std::string("stopped at once: no stage runs (" + to_string(st.status.phase) + ")");
  }
  feed(self); // at a flush already: ends now
  return std::string("stopping at the next flush (after the batches in flight)");
}

caf::result<snapshot_payload> on_snapshot(self_ptr self) {
  if (self->state.stages.empty() && self->state.final_weights) {
    return snapshot_payload{*self->state.final_weights}; // the job gave up
  }
  if (self->state.stages.empty()) {
    return caf::make_error(errc::not_ready, "the job has no stages");
  }
  auto rp = self->make_response_promise<snapshot_payload>();
  collect_weights(self, [=](caf::expected<models::weight_snapshot> all, size_t) mutable {
    if (all) {
      rp.deliver(snapshot_payload{std::move(*all)});
    } else {
      rp.deliver(std::move(all.error()));
    }
  });
  return rp;
}

// The job's workers stop (the caller quits).
void stop_workers(self_ptr self) {
  auto& st = self->state;
  st.flush_metrics();
  stop_stages(self);
  for (auto& s : st.old_stages) {
    self->send_exit(s, caf::exit_reason::user_shutdown);
  }
  if (st.round) {
    self->send_exit(st.round, caf::exit_reason::user_shutdown);
  }
  self->send_exit(st.central_holder, caf::exit_reason::user_shutdown);
}

// Batches to an epoch: the data set's, at most max_batches (a stream's:
// max_batches, or the default).
int64_t epoch_batches(const train_job_state& st) {
  if (st.cfg.stream) {
    return st.cfg.max_batches > 0 ? st.cfg.max_batches : tuning::stream_epoch;
  }
  auto n = algorithms::batches_per_epoch(st.train->size(), st.cfg.batch_size, false);
  return st.cfg.max_batches > 0 ? std::min(n, st.cfg.max_batches) : n;
}

// The job's central replica holder: kept in memory, or persisted to the
// state directory (a supervisor that can be resumed).
replica_holder_actor spawn_central_holder(self_ptr self) {
  auto& st = self->state;
  std::shared_ptr<link_shaper> link;
  if (st.cfg.central_link_mbps > 0) {
    link = std::make_shared<link_shaper>(st.cfg.central_link_mbps);
  }
  if (st.cfg.state_dir.empty()) {
    return self->spawn(replica_holder, std::string("central"), link);
  }
  holder_persistence keep;
  keep.path = st.cfg.state_dir + "/central.ckpt";
  keep.layers = st.layers();
  keep.seed = st.cfg.seed;
  if (st.cfg.resume) {
    keep.initial = st.cfg.resume->weights;
  }
  // (it writes on a thread of its own: an fsync held one of the
  // supervisor's scheduler threads, and the job fed the pipeline late
  // after every replica)
  return self->spawn(persistent_replica_holder, std::string("central"), std::move(keep),
                     link);
}

job_status status_of(self_ptr self) {
  refresh_rows(self);
  return self->state.status;
}

// What training does at each word of the job interface (actors/job/running.hpp).
job_hooks hooks_of(self_ptr self) {
  auto hooks = bind_hooks<self_ptr>(
      self, {status_of, on_pause, on_resume, on_stop, on_checkpoint, on_node_lost,
             on_node_joined, on_capacity, stop_workers});
  hooks.not_paused = [self] { return not_paused(self); };
  return hooks;
}

// The job interface and what both phase groups take alike, then the
// group's own handlers (`group`).
template <class... Group>
train_job_actor::behavior_type with_common(self_ptr self, Group... group) {
  return running_behavior(
      self, self->state, hooks_of(self),
      // ---- from the stages
      [=](failed_atom, uint32_t stage, std::string& what) {
        on_stage_failed(self, stage, what);
      },
      [=](ready_atom, uint32_t) { on_ready(self); },
      // ---- its own timers
      [=](tick_atom) { on_tick(self); },
      [=](dispatch_atom) { // a starved stream's poll
        self->state.stream_poll_pending = false;
        feed(self);
      },
      [=](recover_atom, uint64_t attempt) { recover(self, attempt); },
      // ---- the console's training commands (the cluster checked the console)
      [=](kill_atom, uint32_t stage) { return on_kill_stage(self, stage); },
      [=](replan_atom, std::string& balance) { return on_replan(self, balance); },
      [=](snapshot_atom) { return on_snapshot(self); }, std::move(group)...);
}

// The behaviour while stages train: every phase but the recovering group
// (recovering, waiting) and the ends.
train_job_actor::behavior_type running(self_ptr self) {
  return with_common(
      self, [=](done_atom, batch_stats& s) { on_done(self, s); },
      [=](eval_atom, uint64_t round, uint32_t chunk, tensor_payload& logits) {
        on_eval(self, round, chunk, logits.tensor);
      },
      [=](reduce_atom, uint64_t batch, uint32_t member, uint64_t grad_values,
          tensor_payload& part) {
        on_reduce(self, batch, member, grad_values, part.tensor);
      },
      [=](replicate_atom) { return on_replicate(self); });
}

// The behaviour while the job recovers or waits for a node: the pipeline
// that broke is gone, so what its stages still report (batches, test
// chunks, gradient parts) is dropped, and a replica waits for the new one.
train_job_actor::behavior_type recovering_behavior(self_ptr self) {
  return with_common(
      self, drop<done_atom, batch_stats>(),
      drop<eval_atom, uint64_t, uint32_t, tensor_payload>(),
      drop<reduce_atom, uint64_t, uint32_t, uint64_t, tensor_payload>(),
      [=](replicate_atom) -> caf::result<std::string> {
        return caf::make_error(errc::not_ready,
                               "the job is " + to_string(self->state.status.phase) +
                                   "; replicate once it trains again");
      });
}

// The behaviour once it finished or failed (actors/job/ended.hpp).
train_job_actor::behavior_type ended(self_ptr self) {
  return ended_behavior(
      self,
      {"the job", "use --save for the final weights", [self] { return status_of(self); },
       [self] { return on_snapshot(self); }, [self] { stop_workers(self); },
       self->state.events},
      drop<done_atom, batch_stats>(), drop<failed_atom, uint32_t, std::string>(),
      drop<eval_atom, uint64_t, uint32_t, tensor_payload>(), drop<ready_atom, uint32_t>(),
      drop<reduce_atom, uint64_t, uint32_t, uint64_t, tensor_payload>(),
      drop<recover_atom, uint64_t>(), drop<dispatch_atom>());
}

} // namespace

void train_detail::become_for_phase(self_ptr self) {
  auto& st = self->state;
  if (algorithms::is_over(st.phase)) {
    self->become(ended(self));
  } else if (train_detail::recovering(st)) {
    self->become(recovering_behavior(self));
  } else {
    self->become(running(self));
  }
}

train_job_actor::behavior_type
train_job(train_job_actor::stateful_pointer<train_job_state> self, job_config cfg,
          cluster_actor cluster, std::shared_ptr<const models::dataset> train,
          std::shared_ptr<const models::dataset> test) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.cluster = std::move(cluster);
  st.train = std::move(train);
  st.test = std::move(test);
  st.status.phase = status_phase_from_text(algorithms::to_string(st.phase));
  st.status.training.epochs = st.cfg.epochs;
  st.started = clock::now();
  st.last_progress = clock::now();
  st.batches_per_epoch = epoch_batches(st);
  st.status.training.batches = st.batches_per_epoch;
  st.desc = models::describe(models::model_spec::parse(st.cfg.model));
  st.central_holder = spawn_central_holder(self);
  self->set_down_handler([=](caf::down_msg& dm) { on_down(self, dm); });
  bool ok = true;
  try {
    st.open_metrics(st.cfg.metrics_path);
  } catch (const std::exception& e) {
    fail(self, e.what());
    ok = false;
  }
  if (ok) {
    auto timeout = st.cfg.request_timeout + tuning::helper_margin; // the nodes' hellos
    self->request(st.cluster, timeout, submit_atom_v, caf::actor_cast<caf::actor>(self))
        .then([=](std::vector<cluster_member>& members) { on_members(self, members); },
              [=](caf::error& err) {
                write_start(self);
                fail(self, self->system().render(err));
              });
  }
  self->delayed_send(self, st.cfg.tick_period, tick_atom_v);
  // a job that failed here (its metrics log) starts ended
  return algorithms::is_over(st.phase) ? ended(self) : running(self);
}

cluster_config cluster_config_for(const job_config& cfg) {
  cluster_config c;
  c.secret = cfg.secret;
  c.hello_timeout = cfg.request_timeout;
  c.profile_timeout = cfg.profile_timeout;
  return c;
}

job_result run_job(caf::actor_system& sys, const job_config& cfg,
                   std::vector<remote_node> nodes,
                   std::shared_ptr<const models::dataset> train,
                   std::shared_ptr<const models::dataset> test, const job_options& opts) {
  auto cluster = sys.spawn(cluster_supervisor, cluster_config_for(cfg), std::move(nodes));
  auto job = sys.spawn(train_job, cfg, cluster, std::move(train), std::move(test));
  return run_to_end(sys, caf::actor_cast<caf::actor>(job), cluster, cfg.request_timeout,
                    opts);
}

} // namespace salamander::actors
