// The training loop of the job supervisor: phases, feeding batches,
// committing them, epochs, evaluation, and how the job ends.
//
// One batch, from here to the loss and back (README, "Following one batch"):
// feed() cuts batch (seed, epoch, id) into M micro-batches and sends each to
// stage 0 (forward) and its labels to the last stage; the stages pass
// activations forward and gradients back (actors/pipeline/stage.cpp); after
// its last backward every stage steps its optimizer and reports done; when
// every stage has reported the oldest batch in flight, commit() adds it to
// the lineage and feeds the next.
#include "actors/job/metrics.hpp"
#include "actors/elapsed.hpp"
#include "actors/logging.hpp"
#include "actors/train/stream.hpp"
#include "actors/train/train_job_impl.hpp"
#include "algorithms/recovery.hpp"
#include "algorithms/sampling.hpp"
#include "messages/errors.hpp"
#include "models/trainer.hpp"

namespace salamander::actors::train_detail {

bool enter(self_ptr self, job_event e) {
  auto& st = self->state;
  auto next = algorithms::next_phase(st.phase, e);
  if (!next) {
    subsystem_log("job")->debug("event {} does not apply while {}",
                                algorithms::to_string(e),
                                algorithms::to_string(st.phase));
    return false;
  }
  bool was_recovering = recovering(st);
  st.phase = *next;
  st.phase_entered = clock::now();
  st.status.phase = status_phase_from_text(algorithms::to_string(st.phase));
  if (algorithms::is_over(st.phase) || recovering(st) != was_recovering) {
    become_for_phase(self);
  }
  return true;
}

void back_to_training(self_ptr self, job_event e) {
  if (enter(self, e) && self->state.user_paused) {
    enter(self, job_event::pause);
  }
}

bool recovering(const train_job_state& st) {
  return st.phase == job_phase::recovering || st.phase == job_phase::waiting;
}

void log_event(self_ptr self, const std::string& kind, nlohmann::json fields) {
  self->state.log_event(kind, std::move(fields));
}

namespace {

// The end of the job in the metrics log: how it ended and the lineage of the
// final weights, checked (the audit: every batch exactly once).
void log_end(self_ptr self) {
  auto& st = self->state;
  auto problem = check_lineage(st.status.training.lineage);
  log_event(self, "end",
            {{"phase", to_string(st.status.phase)},
             {"stopped", st.status.stopped},
             // why it failed; a finished job's last (recovered) failure is history
             {"error", st.phase == job_phase::failed ? st.status.error : std::string()},
             {"last_failure", st.status.error},
             {"committed", st.status.training.committed},
             {"accuracy", st.status.test_accuracy},
             {"recoveries", st.status.pipeline.recoveries},
             {"replans", st.status.pipeline.replans},
             {"redone_batches", st.status.training.redone_batches},
             {"lineage_ok", problem.empty()},
             {"exact", st.status.training.exact},
             {"missed_layer_updates", st.status.training.missed_layer_updates},
             {"lineage_problem", problem},
             {"lineage", st.status.training.lineage}});
  persist_state(self);
}

void finish(self_ptr self) {
  auto& st = self->state;
  if (!enter(self, job_event::finish)) {
    return;
  }
  st.status.elapsed_s = since(st.started);
  st.status.stopped = st.stop_requested;
  if (!st.stop_requested.empty()) {
    subsystem_log("job")->warn("stopped ({}) at the flush after batch {}",
                               st.stop_requested, st.committed);
  }
  for (auto& c : st.checkpoints) {
    c.promise.deliver(caf::make_error(
        errc::job_ended, "the job finished first; use --save for the final weights"));
  }
  st.checkpoints.clear();
  log_end(self);
}

// The next evaluation chunk to the first stage, if any is left.
bool send_eval_chunk(self_ptr self) {
  auto& st = self->state;
  auto chunk = st.cfg.eval_chunk;
  if (st.eval_next >= st.test->size()) {
    return false;
  }
  auto begin = st.eval_next;
  auto b = models::get_range(*st.test, begin, std::min(st.test->size(), begin + chunk));
  self->send(st.stages.front(), eval_atom_v, st.eval_round,
             static_cast<uint32_t>(begin / chunk), tensor_payload{b.x.contiguous()});
  st.eval_next = begin + chunk;
  st.eval_pending++;
  return true;
}

// The test set streams through the stages a few chunks at a time (one per
// stage, and one more): sent all at once, tens of megabytes would queue in
// the supervisor's network layer, which then reads nothing else, and live
// nodes' heartbeats would wait behind them until their connections timed out.
void evaluate(self_ptr self) {
  auto& st = self->state;
  st.eval_round++;
  st.eval_correct = 0;
  st.eval_pending = 0;
  st.eval_next = 0;
  for (size_t k = 0; k < st.stages.size() + 1 && send_eval_chunk(self); ++k) {
  }
}

// An epoch's last batch committed: evaluate, or go on.
void end_epoch(self_ptr self) {
  auto& st = self->state;
  st.status.train_s += since(st.epoch_started);
  if (st.cfg.evaluate && enter(self, job_event::epoch_end)) {
    evaluate(self);
  } else {
    after_epoch(self);
  }
}

// The recent rate: the last commits (the epoch's average hides a slow-down
// or a recovery).
void track_rate(train_job_state& st, int64_t samples) {
  st.recent.emplace_back(clock::now(), samples);
  while (st.recent.size() > st.cfg.recent_commits) {
    st.recent.pop_front();
  }
  if (st.recent.size() >= 2) {
    int64_t n = 0;
    for (size_t i = 1; i < st.recent.size(); ++i) {
      n += st.recent[i].second;
    }
    auto span =
        std::chrono::duration<double>(st.recent.back().first - st.recent.front().first);
    st.status.training.recent_samples_per_s =
        span.count() > 0 ? static_cast<double>(n) / span.count() : 0;
  }
}

void log_batch(self_ptr self, uint64_t g) {
  auto& st = self->state;
  if (!st.metrics) {
    return;
  }
  auto stages = nlohmann::json::array();
  for (auto& r : st.last_reports) {
    stages.push_back({{"stage", r.stage},
                      {"node", st.nodes[st.plan.nodes[r.stage]].name},
                      {"compute_s", r.compute_s},
                      {"wait_s", r.wait_s},
                      {"send_s", r.send_s}});
  }
  log_event(self, "batch",
            {{"batch", g},
             {"epoch", st.status.training.epoch},
             {"samples_per_s", st.status.training.recent_samples_per_s},
             {"loss", st.status.loss},
             {"plan_version", st.status.pipeline.plan_version},
             {"stages", stages}});
}

// The test accuracy after an epoch (for a stream, also how far training is
// behind the data: batches arrived but not yet trained).
void log_evaluated(self_ptr self) {
  auto& st = self->state;
  if (!st.metrics) {
    return;
  }
  nlohmann::json fields = {{"epoch", st.status.training.epoch},
                           {"committed", st.committed},
                           {"accuracy", st.status.test_accuracy}};
  if (st.cfg.stream) {
    fields["stream_arrived"] = st.cfg.stream->arrived();
    fields["stream_samples"] = st.cfg.stream->samples();
  }
  log_event(self, "evaluated", fields);
}

} // namespace

void stop_stages(self_ptr self) {
  for (auto& s : self->state.stages) {
    self->send_exit(s, caf::exit_reason::user_shutdown);
  }
}

void fail(self_ptr self, const std::string& what) {
  auto& st = self->state;
  if (!enter(self, job_event::fail)) {
    return;
  }
  st.status.error = what;
  st.status.elapsed_s = since(st.started);
  subsystem_log("job")->error("job failed: {}", what);
  stop_stages(self);
  for (auto& c : st.checkpoints) {
    c.promise.deliver(caf::make_error(errc::job_ended, "the job failed: " + what));
  }
  st.checkpoints.clear();
  log_end(self);
}

uint64_t total_batches(const train_job_state& st) {
  return static_cast<uint64_t>(st.batches_per_epoch * st.cfg.epochs);
}

int64_t micro_batch_size(const job_config& cfg) {
  return (cfg.batch_size + cfg.micro_batches - 1) / cfg.micro_batches;
}

bool is_async(const job_config& cfg) {
  return cfg.schedule == "async";
}

bool drains_at_epochs(const train_job_state& st) {
  return !is_async(st.cfg) || st.cfg.evaluate;
}

uint64_t async_row_batches(const train_job_state& st) {
  return drains_at_epochs(st)
             ? std::min<uint64_t>(tuning::async_row_batches, st.batches_per_epoch)
             : tuning::async_row_batches;
}

uint32_t async_delay_now(const train_job_state& st) {
  return st.async_delay > 0 ? st.async_delay : st.cfg.async_delay;
}

std::vector<size_t> live_nodes(const train_job_state& st) {
  std::vector<size_t> out;
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    if (!st.nodes[i].dead) {
      out.push_back(i);
    }
  }
  return out;
}

std::vector<bool> dead_mask(const train_job_state& st) {
  std::vector<bool> out;
  for (auto& n : st.nodes) {
    out.push_back(n.dead);
  }
  return out;
}

std::vector<std::string> node_names(const train_job_state& st) {
  std::vector<std::string> out;
  for (auto& n : st.nodes) {
    out.push_back(n.name);
  }
  return out;
}

// Batch g of the stream into `b`, or false: it has not arrived (the job
// looks again shortly, and waiting for data is not a stall), the stream has
// ended (the job finishes at the flush) or failed (the job fails).
bool stream_batch(self_ptr self, uint64_t g, models::batch& b) {
  auto& st = self->state;
  auto& stream = *st.cfg.stream;
  try {
    if (auto got = stream.get(g)) {
      b = std::move(*got);
      stream.release_below(st.committed);
      return true;
    }
  } catch (const std::exception& e) {
    fail(self, e.what());
    return false;
  }
  if (stream.ended() && g >= stream.arrived()) {
    if (auto why = stream.failure(); !why.empty()) {
      fail(self, "the stream failed: " + why);
    } else if (st.committed == st.fed && st.evaluated_at != st.committed &&
               st.cfg.evaluate) {
      end_epoch(self); // the last, partial epoch is evaluated too; then here again
    } else if (st.committed == st.fed) {
      subsystem_log("job")->info("the stream ended after {} batches", stream.arrived());
      finish(self);
    }
    return false;
  }
  if (st.committed == st.fed) {
    st.last_progress = clock::now(); // nothing in flight: waiting for data
  }
  if (!st.stream_poll_pending) {
    st.stream_poll_pending = true;
    self->delayed_send(self, tuning::stream_poll, dispatch_atom_v);
  }
  return false;
}

// Feeds batches while fewer than the window are in flight, up to the
// epoch's end where the job evaluates there (drains_at_epochs).
void feed_batches(self_ptr self);

void feed(self_ptr self) {
  auto& st = self->state;
  if (st.phase == job_phase::replanning || st.phase == job_phase::checkpointing) {
    return;
  }
  // a stop, checkpoint or re-plan waits for a flush (nothing in flight);
  // under the async schedule the batches in flight finish once the stages'
  // rows end before the next one (a pause lets them finish too)
  bool wants_flush = !st.stop_requested.empty() || !st.checkpoints.empty() ||
                     st.replan_requested || st.phase == job_phase::paused;
  if (wants_flush && is_async(st.cfg) && st.fed > st.committed &&
      st.drained_before != st.fed) {
    st.drained_before = st.fed;
    for (auto& s : st.stages) {
      self->send(s, drain_atom_v, st.fed);
    }
  }
  if (!st.stop_requested.empty() && st.checkpoints.empty()) {
    // asked to stop: nothing more is fed; at the flush the job ends
    if (st.committed == st.fed &&
        (st.phase == job_phase::training || st.phase == job_phase::paused)) {
      finish(self);
    }
    return;
  }
  if (!st.checkpoints.empty()) {
    if (st.committed == st.fed &&
        (st.phase == job_phase::training || st.phase == job_phase::paused)) {
      take_checkpoints(self); // at the flush: every stage at one version
    }
    return;
  }
  if (st.phase != job_phase::training) {
    return; // paused by the console (what is in flight finishes), or busy
  }
  if (st.replan_requested) {
    if (st.committed == st.fed) {
      begin_replan(self); // at the flush: nothing in flight
    }
    return;
  }
  feed_batches(self);
}

void feed_batches(self_ptr self) {
  auto& st = self->state;
  auto epoch_end = drains_at_epochs(st)
                       ? (st.committed / st.batches_per_epoch + 1) * st.batches_per_epoch
                       : UINT64_MAX;
  // (async: a stage holds up to d + 1 batches' micro-batches at once)
  auto window = static_cast<uint64_t>(st.cfg.window);
  if (is_async(st.cfg)) {
    window = std::max<uint64_t>(window, st.async_delay + 2);
  }
  while (st.fed < st.committed + window && st.fed < epoch_end &&
         st.fed < total_batches(st)) {
    uint64_t g = st.fed;
    models::batch b;
    if (st.cfg.stream) {
      if (!stream_batch(self, g, b)) {
        return;
      }
    } else {
      auto epoch = g / st.batches_per_epoch;
      auto id = static_cast<int64_t>(g % st.batches_per_epoch);
      b = models::get_batch(*st.train, st.cfg.seed, epoch, id, st.cfg.batch_size);
    }
    st.fed++;
    int64_t m = std::min<int64_t>(st.cfg.micro_batches, b.x.size(0));
    auto xs = models::split_micro(b.x, m);
    auto ys = models::split_micro(b.y, m);
    bool dp = !st.plan.split.empty();
    for (int64_t i = 0; i < m; ++i) {
      auto k = static_cast<size_t>(i);
      double weight =
          static_cast<double>(xs[k].size(0)) / static_cast<double>(b.x.size(0));
      // data parallelism: micro-batch i goes to the member whose block has it
      auto member = dp ? algorithms::member_of_micro(st.plan.split, k) : 0;
      auto& first = dp ? st.stages[member] : st.stages.front();
      auto& last = dp ? st.stages[member] : st.stages.back();
      self->send(first, forward_atom_v, g, static_cast<uint32_t>(i),
                 tensor_payload{xs[k].contiguous()});
      self->send(last, labels_atom_v, g, static_cast<uint32_t>(i), weight,
                 tensor_payload{ys[k].contiguous()});
    }
  }
}

void start_epoch(self_ptr self) {
  auto& st = self->state;
  st.status.training.epoch =
      static_cast<int64_t>(st.committed / st.batches_per_epoch) + 1;
  st.status.training.batch = 0;
  st.epoch_started = clock::now();
  st.epoch_samples = 0;
  feed(self);
}

void after_epoch(self_ptr self) {
  auto& st = self->state;
  st.evaluated_epochs = static_cast<int64_t>(st.committed / st.batches_per_epoch);
  if (st.committed >= total_batches(st)) {
    finish(self);
    return;
  }
  if (st.phase == job_phase::evaluating) {
    back_to_training(self, job_event::evaluated);
  }
  start_epoch(self);
}

void commit(self_ptr self, uint64_t g) {
  auto& st = self->state;
  auto it = st.reports.find(g);
  st.last_reports = std::move(it->second);
  st.reports.erase(it);
  st.status.training.lineage.push_back(g);
  st.committed++;
  st.last_progress = clock::now();
  st.status.pipeline.plan_batches++;
  st.status.pipeline.stage_compute_s.resize(st.stages.size());
  st.status.pipeline.stage_wait_s.resize(st.stages.size());
  st.status.pipeline.stage_send_s.resize(st.stages.size());
  for (auto& r : st.last_reports) {
    st.status.pipeline.stage_compute_s[r.stage] += r.compute_s;
    st.status.pipeline.stage_wait_s[r.stage] += r.wait_s;
    st.status.pipeline.stage_send_s[r.stage] += r.send_s;
  }
  // the last stage computes the loss; data-parallel members each their share
  st.status.loss = 0;
  int64_t samples = 0;
  for (auto& r : st.last_reports) {
    if (r.stage + 1 == st.stages.size() || !st.plan.split.empty()) {
      st.status.loss += r.loss;
      samples += r.samples;
    }
  }
  st.epoch_samples += samples;
  st.status.training.committed = static_cast<int64_t>(st.committed);
  track_capacity(self);
  if (auto it = st.cfg.replan_at.find(st.committed); it != st.cfg.replan_at.end()) {
    st.replan_requested = true;
    st.replan_balance = it->second;
    st.replan_reason = "forced (--replan-at)";
    st.user_plan = !it->second.empty();
    st.replaced_plan.reset();
  }
  st.status.training.batch =
      static_cast<int64_t>((st.committed - 1) % st.batches_per_epoch) + 1;
  st.status.training.samples_per_s =
      static_cast<double>(st.epoch_samples) / since(st.epoch_started);
  st.status.elapsed_s = since(st.started);
  track_rate(st, samples);
  log_batch(self, g);
  if (st.cfg.resume && !st.first_commit_logged) {
    // (bench/run.sh recovery: a restarted supervisor's start to this)
    st.first_commit_logged = true;
    log_event(self, "resumed_commit", {{"batch", g}, {"since_start_s", since(st.started)}});
  }
  if (st.cfg.replicate_every > 0 && st.committed % st.cfg.replicate_every == 0) {
    persist_state(self);
  }
  if (st.committed % st.batches_per_epoch == 0) {
    end_epoch(self);
    return;
  }
  feed(self);
}

// After a re-plan or a recovery: carry on where the committed counter is.
void continue_training(self_ptr self) {
  auto& st = self->state;
  st.recent.clear();
  st.last_progress = clock::now();
  bool at_epoch_end = st.committed > 0 && st.committed % st.batches_per_epoch == 0;
  if (at_epoch_end &&
      st.evaluated_epochs < static_cast<int64_t>(st.committed / st.batches_per_epoch)) {
    if (st.cfg.evaluate && enter(self, job_event::epoch_end)) {
      evaluate(self);
    } else {
      after_epoch(self);
    }
  } else if (st.committed >= total_batches(st)) {
    finish(self);
  } else if (st.committed % st.batches_per_epoch == 0) {
    start_epoch(self);
  } else {
    feed(self);
  }
}

// An evaluation chunk's logits came back from the last stage.
void on_eval(self_ptr self, uint64_t round, uint32_t chunk, const torch::Tensor& logits) {
  auto& st = self->state;
  if (round != st.eval_round || st.phase != job_phase::evaluating) {
    return;
  }
  int64_t begin = static_cast<int64_t>(chunk) * st.cfg.eval_chunk;
  auto b = models::get_range(*st.test, begin, begin + logits.size(0));
  st.eval_correct += models::count_correct(logits, b.y);
  --st.eval_pending;
  send_eval_chunk(self);
  if (st.eval_pending == 0) {
    st.status.test_accuracy =
        static_cast<double>(st.eval_correct) / static_cast<double>(st.test->size());
    st.evaluated_at = st.committed;
    log_evaluated(self);
    after_epoch(self);
  }
}

} // namespace salamander::actors::train_detail
