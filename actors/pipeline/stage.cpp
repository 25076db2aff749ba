#include "actors/pipeline/stage.hpp"
#include "actors/logging.hpp"
#include "actors/replication/replica_holder.hpp"
#include "actors/tuning.hpp"
#include "algorithms/recovery.hpp"

#include "messages/errors.hpp"

#include <thread>

namespace salamander::actors {

namespace {

using clock = std::chrono::steady_clock;

double seconds(clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// When a piece of compute began: the wall clock and the thread's CPU time.
struct compute_start {
  clock::time_point wall = clock::now();
  double cpu = thread_cpu();
};

// The compute since `start` as the device took it. Emulated by dilation,
// the device's time is the CPU time over its share, and the stage waits out
// what of it the host's wall time has not yet covered: a wait for one of the
// host's cores is not the device's time (it is with a cgroup quota, and on a
// real device, whose wall time this is).
double emulated(stage_actor::stateful_pointer<stage_state> self,
                const compute_start& start) {
  auto [device, pause] =
      device_time(self->state.emulation, seconds(clock::now() - start.wall),
                  thread_cpu() - start.cpu);
  if (pause.count() > 0) {
    std::this_thread::sleep_for(pause);
  }
  return device;
}

// Sends to a neighbour, through the emulated link when there is one.
template <class... Ts>
void send_on_link(stage_actor::stateful_pointer<stage_state> self, const stage_actor& to,
                  const torch::Tensor& t, Ts&&... xs) {
  auto& link = self->state.link;
  auto delay = link ? link->delay_for(t.nbytes()) : std::chrono::microseconds(0);
  if (delay.count() > 0) {
    self->delayed_send(to, delay, std::forward<Ts>(xs)..., tensor_payload{t});
  } else {
    self->send(to, std::forward<Ts>(xs)..., tensor_payload{t});
  }
}

// A holder in this process gets the snapshot itself (CAF passes it on
// without a copy); one in another process gets it in parts (replica_store.hpp:
// one message that takes longer than the receiver's connection timeout to
// arrive has this node dropped as hung), encoded once into `parts` for all
// such holders by the first of their couriers to start (off this stage's
// thread: the stage goes on computing), taken there by a courier a window
// at a time (replica_holder.hpp) after `previous`, this stage's last courier
// to that holder, which it replaces (with none when the holder got the
// snapshot at once).
// With `asked`, the courier starts at the first message it gets (the
// asker's done request, sent at once): started eagerly, a small snapshot
// could be all taken, and its courier gone, before that request arrived.
void send_snapshot(stage_actor::stateful_pointer<stage_state> self,
                   const replica_holder_actor& holder, const snapshot_payload& snap,
                   std::shared_ptr<const snapshot_encoding>& parts, caf::actor& previous,
                   bool asked = false) {
  if (holder.node() == self->node()) {
    self->send(holder, replicate_atom_v, snap);
    previous = caf::actor{};
    return;
  }
  if (!parts) {
    parts = std::make_shared<const snapshot_encoding>(snap.snapshot,
                                                      tuning::snapshot_part_bytes);
  }
  auto transfer = ++self->state.transfers;
  previous = asked ? self->spawn<caf::lazy_init>(replica_courier, holder, transfer, parts,
                                                 previous)
                   : self->spawn(replica_courier, holder, transfer, parts, previous);
}

// The version batch `batch` trains on under the async schedule: the same
// for the whole job, across rows, drains, re-plans and recoveries.
uint64_t version_of(const stage_state& st, uint64_t batch) {
  return algorithms::async_version(batch, 0, st.spec.async_delay);
}

std::string stashed_name(const std::string& param, uint64_t back) {
  return param + "@-" + std::to_string(back);
}

// Layers [begin, end) of the newest weights, with their optimizer state, to
// replicate, pull or checkpoint. Under the async schedule also what the
// batches from this version on need, so that whoever restores it replays
// them exactly without the pipeline having drained: the older versions they
// train on (stashed), and the BatchNorm statistics as they were before this
// version's first forward (a stage that ran ahead has run some since).
models::weight_snapshot capture_state(stage_actor::stateful_pointer<stage_state> self,
                                      size_t begin, size_t end) {
  auto& st = self->state;
  auto snap =
      models::capture(*st.model, begin, end, st.opt.get(), st.spec.optimizer, st.version);
  if (!st.async) {
    return snap;
  }
  auto before = st.buffers_before.find(st.version);
  torch::NoGradGuard no_grad;
  for (auto& lw : snap.layers) {
    if (before != st.buffers_before.end()) {
      auto& saved = before->second.at(lw.index - st.spec.begin);
      for (size_t i = 0; i < lw.buffers.size(); ++i) {
        lw.buffers[i].tensor = saved.at(i).clone();
      }
    }
    for (auto v = version_of(st, st.version); v < st.version; ++v) {
      auto copy = st.versions.find(v);
      if (copy == st.versions.end()) {
        throw std::logic_error("no copy of weight version " + std::to_string(v) +
                               " to stash with version " + std::to_string(st.version));
      }
      for (auto& p : copy->second.model->layer(lw.index).ptr()->named_parameters()) {
        lw.stashed.push_back({stashed_name(p.key(), st.version - v), p.value().clone()});
      }
    }
  }
  return snap;
}

// Sends the snapshot at the current version to the chain and global
// holders. A copy now; sending (for a remote holder, its courier and CAF's
// middleman) happens off this actor while training goes on.
void replicate(stage_actor::stateful_pointer<stage_state> self) {
  auto& st = self->state;
  auto& spec = st.spec;
  snapshot_payload snap{capture_state(self, spec.begin, spec.end)};
  auto chain = caf::actor_cast<replica_holder_actor>(spec.chain_holder);
  auto global = caf::actor_cast<replica_holder_actor>(spec.global_holder);
  std::shared_ptr<const snapshot_encoding> parts;
  // the couriers to the holders it has (others are done with)
  std::map<caf::actor_addr, caf::actor> couriers;
  for (const auto& h : {chain, global}) {
    if (h) {
      couriers[h.address()] = st.couriers[h.address()];
    }
  }
  if (chain) {
    send_snapshot(self, chain, snap, parts, couriers[chain.address()]);
  }
  bool global_turn = spec.replicate_every == 0 || spec.global_every <= 1 ||
                     (st.version / spec.replicate_every) % spec.global_every == 0 ||
                     st.version == st.replicate_at;
  if (global && global != chain && global_turn) {
    send_snapshot(self, global, snap, parts, couriers[global.address()]);
  }
  st.couriers = std::move(couriers);
  if (!st.infer) {
    st.kept.add(snap.snapshot); // a serving stage's weights never change
  }
}

// Serving: runs the micro-batches that are waiting, in order.
void stream(stage_actor::stateful_pointer<stage_state> self) {
  auto& st = self->state;
  while (!st.stream.empty()) {
    auto [id, micro, x] = std::move(st.stream.front());
    st.stream.pop_front();
    compute_start start;
    if (st.busy_reported == clock::time_point{}) {
      st.busy_reported = start.wall;
    } else if (st.last_op_end > st.busy_reported) {
      st.busy.wait_s += seconds(start.wall - st.last_op_end);
    }
    torch::Tensor out;
    {
      torch::NoGradGuard no_grad;
      out = st.exec->infer(x);
    }
    st.busy.compute_s += emulated(self, start);
    st.busy.samples += x.size(0);
    st.busy.batch++;
    auto computed = clock::now();
    if (st.last) {
      self->send(st.supervisor, eval_atom_v, id, micro, tensor_payload{out});
    } else {
      send_on_link(self, st.next, out, eval_atom_v, id, micro);
    }
    st.last_op_end = clock::now();
    st.busy.send_s += seconds(st.last_op_end - computed);
    if (st.last_op_end - st.busy_reported > tuning::serve_stage_report) {
      st.busy.stage = st.spec.index;
      self->send(st.supervisor, done_atom_v, st.busy);
      st.busy = batch_stats{};
      st.busy_reported = st.last_op_end;
    }
  }
}

// Runs the forward or backward of micro-batch `micro` of `batch` on `exec`
// (`id`: the micro-batch's key there) and sends its output on; false, doing
// nothing, when its input has not arrived yet.
bool run_op(stage_actor::stateful_pointer<stage_state> self, models::range_executor& exec,
            algorithms::op_kind kind, uint64_t batch, uint32_t micro, int64_t id) {
  auto& st = self->state;
  stage_state::key k{batch, micro};
  compute_start start;
  if (kind == algorithms::op_kind::forward) {
    auto in = st.inputs.find(k);
    if (in == st.inputs.end()) {
      return false;
    }
    if (st.batch_started) {
      st.stats.wait_s += seconds(start.wall - st.last_op_end);
    }
    st.batch_started = true;
    auto out = exec.forward(id, in->second);
    st.inputs.erase(in);
    st.stats.compute_s += emulated(self, start);
    auto computed = clock::now();
    if (!st.last) {
      send_on_link(self, st.next, out, forward_atom_v, batch, micro);
      st.stats.send_s += seconds(clock::now() - computed);
    }
  } else {
    torch::Tensor grad_in;
    if (st.last) {
      auto lab = st.labels.find(k);
      if (lab == st.labels.end()) {
        return false;
      }
      st.stats.wait_s += seconds(start.wall - st.last_op_end);
      auto r = exec.loss_backward(id, lab->second.second, lab->second.first);
      st.stats.loss += r.loss * lab->second.first;
      st.stats.correct += r.correct;
      st.stats.samples += lab->second.second.size(0);
      grad_in = r.grad_input;
      st.labels.erase(lab);
    } else {
      auto g = st.grads.find(k);
      if (g == st.grads.end()) {
        return false;
      }
      st.stats.wait_s += seconds(start.wall - st.last_op_end);
      grad_in = exec.backward(id, g->second);
      st.grads.erase(g);
    }
    st.stats.compute_s += emulated(self, start);
    auto computed = clock::now();
    if (!st.first) {
      send_on_link(self, st.prev, grad_in, backward_atom_v, batch, micro);
      st.stats.send_s += seconds(clock::now() - computed);
    }
  }
  st.last_op_end = clock::now();
  return true;
}

// ---- the asynchronous schedule (algorithms/schedule.hpp)

// Buffers (BatchNorm's running statistics) follow the forwards in the
// stage's order, whichever copy runs them: in from the newest weights before
// a forward on a copy, back after it.
void copy_buffers(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto fb = from.buffers();
  auto tb = to.buffers();
  for (size_t i = 0; i < fb.size() && i < tb.size(); ++i) {
    tb[i].copy_(fb[i]);
  }
}

// A copy of the stage's layers for one version (a spare one if there is).
stage_state::version_copy new_copy(stage_state& st) {
  stage_state::version_copy c;
  if (!st.spare.empty()) {
    c = std::move(st.spare.back());
    st.spare.pop_back();
  } else {
    c.model = std::make_unique<models::layered_model>(st.model->desc(), st.spec.seed,
                                                      st.spec.begin, st.spec.end);
    c.exec = std::make_unique<models::range_executor>(c.model->all(), st.first, st.last);
  }
  return c;
}

// The optimizer's rate for stepping batch `batch` (stage_spec::warmup_batches).
void rate_for(stage_state& st, uint64_t batch) {
  models::set_lr(*st.opt, models::warmup_lr(st.spec.lr, batch, st.spec.warmup_batches));
}

// Keeps a copy of the newest weights (and buffers) as version `v`, for the
// batches that use it: under weight prediction, the weights the optimizer's
// running direction gives async_delay steps on, where those batches'
// updates will land (stage_spec::predict_weights), at the rate of the next
// step, batch v's.
void keep_version(stage_actor::stateful_pointer<stage_state> self, uint64_t v) {
  auto& st = self->state;
  rate_for(st, v);
  auto c = new_copy(st);
  torch::NoGradGuard no_grad;
  auto from = st.model->all();
  auto to = c.model->all();
  auto fp = from->parameters();
  auto tp = to->parameters();
  auto ahead = st.spec.predict_weights ? static_cast<double>(st.spec.async_delay) : 0.0;
  for (size_t i = 0; i < fp.size(); ++i) {
    models::predict_weights(*st.opt, st.spec.optimizer, fp[i], ahead, tp[i]);
  }
  copy_buffers(*from, *to);
  st.versions[v] = std::move(c);
}

// The older versions a restored snapshot stashed (capture_state), as the
// copies the batches from its version on train on.
void restore_versions(stage_actor::stateful_pointer<stage_state> self,
                      const models::weight_snapshot& snap) {
  auto& st = self->state;
  torch::NoGradGuard no_grad;
  for (auto v = version_of(st, snap.version); v < snap.version; ++v) {
    auto c = new_copy(st);
    for (auto& lw : snap.layers) {
      auto params = c.model->layer(lw.index).ptr()->named_parameters();
      for (auto& p : params) {
        auto name = stashed_name(p.key(), snap.version - v);
        auto it = std::find_if(lw.stashed.begin(), lw.stashed.end(),
                               [&](const models::named_tensor& t) { return t.name == name; });
        if (it == lw.stashed.end() || !it->tensor.sizes().equals(p.value().sizes())) {
          throw std::invalid_argument(
              "the weights of layer " + lw.name + " at version " +
              std::to_string(snap.version) + " do not carry " + name + " (weight version " +
              std::to_string(v) + "), which batch " +
              std::to_string(v + st.spec.async_delay) +
              " trains on under the async schedule (taken by a build before stashed "
              "versions, or under another --async-delay)");
        }
        p.value().copy_(it->tensor);
      }
    }
    st.versions[v] = std::move(c);
  }
}

// The stage's row over its current segment (algorithms::async_order).
void build_row(stage_state& st) {
  auto& spec = st.spec;
  st.async_row = algorithms::async_order(
      static_cast<int>(spec.stages), static_cast<int>(spec.index),
      static_cast<int>(spec.micro_batches), st.segment.first, st.segment.second,
      spec.async_delay, static_cast<int>(spec.async_slack));
}

// Versions before `oldest` are done with: their copies wait in `spare`.
void drop_versions_before(stage_state& st, uint64_t oldest) {
  for (auto it = st.versions.begin(); it != st.versions.end() && it->first < oldest;) {
    st.spare.push_back(std::move(it->second));
    it = st.versions.erase(it);
  }
}

// The next row, once every batch before it has stepped: from here to the
// next of row_batches, an epoch's end, the job's end, or the drain the job
// asked for. No version changes: the batches after it train on the
// versions the ones before it made (version_of), so a row's end costs only
// the pipeline's drain and fill.
void begin_segment(stage_actor::stateful_pointer<stage_state> self) {
  auto& st = self->state;
  auto& spec = st.spec;
  st.segment = algorithms::async_segment(
      st.version, st.version, spec.row_batches, spec.epoch_batches,
      spec.total_batches > 0 ? spec.total_batches : UINT64_MAX);
  if (st.drain_at > st.version) {
    st.segment.second = std::min(st.segment.second, st.drain_at);
  }
  build_row(st);
  st.cursor = 0;
  // (the older versions the row's first batches use were kept by the steps
  // before it or restored from a snapshot; pump_async checks each at use)
  drop_versions_before(st, version_of(st, st.version));
  if (!st.versions.count(st.version)) {
    keep_version(self, st.version);
  }
}

// The job asked for a drain before `batch` (it feeds nothing from there
// until every batch before it is through): the row ends there. The row
// from the same start to `batch` is the current one without the operations
// of `batch` on (algorithms::async_order), none of which can have run, so
// the operations done are its beginning and the cursor stays.
void drain_before(stage_actor::stateful_pointer<stage_state> self, uint64_t batch) {
  auto& st = self->state;
  st.drain_at = batch;
  if (st.async_row.empty() || batch <= st.segment.first || batch >= st.segment.second) {
    return; // begin_segment takes it (or the row ends there anyway)
  }
  st.segment.second = batch;
  build_row(st);
  if (st.cursor > st.async_row.size()) {
    throw std::logic_error("drained before batch " + std::to_string(batch) +
                           " after running past it");
  }
}

// The async schedule's weight aggregation (FTPipeHD): every
// `aggregate_every` updates the newest weights become the mean of
// themselves and the kept versions that batches in flight use,
// max(0, v - d) .. v - 1, summed oldest first. Parameters only:
// BatchNorm statistics, and the optimizer's state, stay.
void aggregate_versions(stage_actor::stateful_pointer<stage_state> self) {
  auto& st = self->state;
  auto& spec = st.spec;
  auto v = st.version;
  if (spec.aggregate_every == 0 || v % spec.aggregate_every != 0) {
    return;
  }
  auto from = version_of(st, v);
  std::vector<std::vector<torch::Tensor>> kept;
  for (auto it = st.versions.lower_bound(from); it != st.versions.end() && it->first < v;
       ++it) {
    kept.push_back(it->second.model->all()->parameters());
  }
  if (kept.empty()) {
    return;
  }
  torch::NoGradGuard no_grad;
  auto newest = st.model->all()->parameters();
  auto n = static_cast<double>(kept.size() + 1);
  for (size_t i = 0; i < newest.size(); ++i) {
    auto sum = newest[i].clone();
    for (auto& k : kept) {
      sum.add_(k[i]);
    }
    newest[i].copy_(sum.div_(n));
  }
}

// Steps the optimizer with the gradients of `batch` (the step's compute
// time counted from `start`), replicates when it is time and reports the
// batch to the supervisor. Both schedules end a batch here.
void step_and_report(stage_actor::stateful_pointer<stage_state> self, uint64_t batch,
                     const compute_start& start) {
  auto& st = self->state;
  auto& spec = st.spec;
  rate_for(st, batch);
  st.opt->step();
  st.opt->zero_grad();
  st.version = batch + 1;
  if (st.async) {
    aggregate_versions(self); // before its replica is taken
  }
  st.stats.compute_s += emulated(self, start);
  auto stepped = clock::now(); // (after the emulated device's step)
  if ((spec.replicate_every > 0 && st.version % spec.replicate_every == 0) ||
      st.version == st.replicate_at) {
    replicate(self);
    st.stats.send_s += seconds(clock::now() - stepped);
  }
  st.stats.batch = batch;
  st.stats.stage = spec.index;
  self->send(st.supervisor, done_atom_v, st.stats);
  st.stats = batch_stats{};
}

// Batch `batch` is through this stage: its gradients (in the copy its
// micro-batches ran on) step the newest weights, and the versions the
// batches after it use are kept.
void step_async(stage_actor::stateful_pointer<stage_state> self, uint64_t batch,
                stage_state::version_copy& used) {
  auto& st = self->state;
  auto& spec = st.spec;
  compute_start start;
  {
    auto from = used.model->all()->parameters();
    auto to = st.model->all()->parameters();
    for (size_t i = 0; i < from.size(); ++i) {
      to[i].mutable_grad() = from[i].grad();
      from[i].mutable_grad() = torch::Tensor();
    }
  }
  step_and_report(self, batch, start);
  st.batch = batch + 1;
  // versions older than the next batch's are done with
  drop_versions_before(st, version_of(st, st.version));
  st.buffers_before.erase(st.buffers_before.begin(),
                          st.buffers_before.lower_bound(st.version));
  if (spec.total_batches == 0 || st.version < spec.total_batches) {
    keep_version(self, st.version); // batch version + delay will use it
  }
  st.last_op_end = clock::now(); // (the step is not a wait for input)
}

// The step the last batch through this stage waits for, if any (see
// stage_state::unstepped): taken now.
void settle_step(stage_actor::stateful_pointer<stage_state> self) {
  auto& st = self->state;
  if (!st.unstepped) {
    return;
  }
  auto [batch, v] = *st.unstepped;
  st.unstepped.reset();
  step_async(self, batch, st.versions.at(v));
}

// Runs as many operations of the asynchronous row as have their inputs,
// each on the copy of the version its batch uses.
void pump_async(stage_actor::stateful_pointer<stage_state> self) {
  auto& st = self->state;
  auto m = static_cast<uint64_t>(st.spec.micro_batches);
  while (true) {
    if (st.cursor >= st.async_row.size()) {
      settle_step(self); // a segment ends with every batch stepped
      begin_segment(self);
      if (st.async_row.empty()) {
        return; // past the job's last batch
      }
    }
    auto op = st.async_row[st.cursor];
    auto v = version_of(st, op.batch);
    bool forward = op.op == algorithms::op_kind::forward;
    if (st.unstepped && (forward ? !st.versions.count(v) : st.unstepped->second == v)) {
      // a forward on the version the step makes, or a backward whose
      // gradients would join those of the batch not yet stepped
      settle_step(self);
    }
    auto copy = st.versions.find(v);
    if (copy == st.versions.end()) {
      throw std::logic_error("no copy of weight version " + std::to_string(v) +
                             " for batch " + std::to_string(op.batch) + " (at version " +
                             std::to_string(st.version) + ")");
    }
    auto& used = copy->second;
    if (forward && op.micro == 0 && st.has_buffers && !st.buffers_before.count(op.batch)) {
      // for a replica at this version taken once this batch has begun
      auto& saved = st.buffers_before[op.batch];
      torch::NoGradGuard no_grad;
      for (size_t i = st.spec.begin; i < st.spec.end; ++i) {
        saved.emplace_back();
        for (auto& b : st.model->layer(i).ptr()->buffers()) {
          saved.back().push_back(b.clone());
        }
      }
    }
    if (forward) {
      copy_buffers(*st.exec->net(), *used.exec->net());
    }
    auto id = static_cast<int64_t>(op.batch * m + static_cast<uint64_t>(op.micro));
    if (!run_op(self, *used.exec, op.op, op.batch, static_cast<uint32_t>(op.micro), id)) {
      settle_step(self); // a gap: the input is not here yet
      return;
    }
    if (forward) {
      copy_buffers(*used.exec->net(), *st.exec->net());
    }
    st.cursor++;
    if (!forward && static_cast<uint64_t>(op.micro) + 1 == m) {
      settle_step(self); // batches step in order
      st.unstepped = std::make_pair(op.batch, v);
    }
  }
}

void finish_batch(stage_actor::stateful_pointer<stage_state> self);
void start_reduce(stage_actor::stateful_pointer<stage_state> self);
void reduce_chunk(stage_actor::stateful_pointer<stage_state> self, uint32_t chunk,
                  const torch::Tensor& partial);
void take_summed(stage_actor::stateful_pointer<stage_state> self, uint32_t chunk,
                 const torch::Tensor& merged);
void apply_reduce(stage_actor::stateful_pointer<stage_state> self,
                  const torch::Tensor& merged);

// Runs as many operations of the stage's row as have their inputs.
void pump(stage_actor::stateful_pointer<stage_state> self) {
  auto& st = self->state;
  auto& spec = st.spec;
  if (!st.ready || st.frozen || st.reducing || !st.wired) {
    // inputs wait until the state (or the members' sum) has arrived, and
    // until the supervisor has named the neighbours: a neighbour's first
    // activation can overtake the supervisor's wire message, and an output
    // sent before it would go nowhere
    return;
  }
  if (st.infer) {
    stream(self);
    return;
  }
  if (st.async) {
    pump_async(self);
    return;
  }
  if (spec.members > 1 && !st.have_stats_before) {
    st.stats_before.clear();
    for (auto& t : models::batchnorm_stats(*st.exec->net())) {
      st.stats_before.push_back(t.clone());
    }
    st.have_stats_before = true;
  }
  while (st.cursor < st.order.size()) {
    auto op = st.order[st.cursor];
    if (!run_op(self, *st.exec, op.op, st.batch, static_cast<uint32_t>(op.micro),
                op.micro)) {
      return;
    }
    st.cursor++;
  }
  // the flush: every micro-batch is through
  if (spec.members > 1) {
    start_reduce(self);
    return;
  }
  finish_batch(self);
}

// Data parallelism, at the flush: the step waits for the members' sum
// (models::dp_chunks), through the supervisor or along the chain of
// members: there member 0 starts every chunk, the others fold in the chunks
// that came from the member before (or come later, to reduce_chunk).
void start_reduce(stage_actor::stateful_pointer<stage_state> self) {
  auto& st = self->state;
  compute_start start;
  int64_t grad_values = 0;
  st.contribution = models::dp_contribution(*st.exec->net(), st.stats_before,
                                            static_cast<int64_t>(st.order.size() / 2),
                                            st.spec.member == 0, grad_values);
  bool chain = st.spec.reduce == "chain";
  if (chain) {
    st.chunks =
        models::dp_chunks::of(st.contribution, grad_values, tuning::dp_chunk_values);
    st.summed.assign(st.chunks.count(), torch::Tensor{});
    st.summed_count = 0;
  }
  st.stats.compute_s += emulated(self, start);
  st.reducing = true;
  st.reduce_sent = clock::now();
  if (!chain) {
    self->send(st.supervisor, reduce_atom_v, st.batch, st.spec.member,
               static_cast<uint64_t>(grad_values), tensor_payload{st.contribution});
    return;
  }
  for (uint32_t j = 0; j < st.chunks.count(); ++j) {
    if (st.spec.member == 0) {
      reduce_chunk(self, j, {});
    } else if (auto p = st.partials.find({st.batch, j}); p != st.partials.end()) {
      auto partial = std::move(p->second);
      st.partials.erase(p);
      reduce_chunk(self, j, partial);
    }
  }
}

// Chunk `chunk` of the members before this one (none at member 0): fold
// this member's contribution in and pass it on, or, at the last member,
// the chunk is summed.
void reduce_chunk(stage_actor::stateful_pointer<stage_state> self, uint32_t chunk,
                  const torch::Tensor& partial) {
  auto& st = self->state;
  compute_start start;
  auto folded = st.chunks.fold(partial, st.contribution, chunk);
  st.stats.compute_s += emulated(self, start);
  if (st.spec.member + 1 < st.spec.members) {
    send_on_link(self, st.next, folded, reduce_atom_v, st.batch, chunk);
  } else {
    take_summed(self, chunk, st.chunks.finish(folded, chunk));
  }
}

// Chunk `chunk` of the sum: down the chain to the member before, and, with
// every chunk here, the step.
void take_summed(stage_actor::stateful_pointer<stage_state> self, uint32_t chunk,
                 const torch::Tensor& merged) {
  auto& st = self->state;
  if (chunk >= st.summed.size() || st.summed[chunk].defined()) {
    throw std::invalid_argument("chunk " + std::to_string(chunk) +
                                " of the data-parallel sum came twice or out of range");
  }
  if (st.spec.member > 0) {
    send_on_link(self, st.prev, merged, summed_atom_v, st.batch, chunk);
  }
  st.summed[chunk] = merged;
  if (++st.summed_count == st.summed.size()) {
    apply_reduce(self, st.chunks.assemble(st.summed));
  }
}

// Steps the optimizer, replicates when it is time, reports the batch and
// goes on with the next one.
void finish_batch(stage_actor::stateful_pointer<stage_state> self) {
  auto& st = self->state;
  step_and_report(self, st.batch, compute_start{});
  st.batch_started = false;
  st.cursor = 0;
  st.batch++;
  st.have_stats_before = false;
  st.last_op_end = clock::now();
  // the next batch's inputs may already be here
  pump(self);
}

// Runs `fn`; a LibTorch or validation error becomes a failure report to the
// supervisor and the end of this stage, never an exception across actors.
template <class F> void guarded(stage_actor::stateful_pointer<stage_state> self, F&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    auto& st = self->state;
    std::string what = "stage " + std::to_string(st.spec.index) + " (layers " +
                       std::to_string(st.spec.begin) + ".." +
                       std::to_string(st.spec.end) + "): " + e.what();
    subsystem_log("stage")->error("{}", what);
    if (st.supervisor) {
      self->send(st.supervisor, failed_atom_v, st.spec.index, what);
    }
    self->quit(caf::make_error(errc::stage_failed, what));
  }
}

void check_batch(stage_actor::stateful_pointer<stage_state> self, uint64_t batch) {
  if (batch < self->state.batch) {
    throw std::invalid_argument("message for batch " + std::to_string(batch) +
                                ", which this stage already stepped (now at batch " +
                                std::to_string(self->state.batch) + ")");
  }
}

// Builds the stage's layers, optimizer and schedule row from `spec`;
// throws std::invalid_argument when the spec does not describe a valid range.
void build(stage_actor::stateful_pointer<stage_state> self, stage_spec spec,
           node_emulation emulation) {
  auto& st = self->state;
  st.emulation = std::move(emulation);
  st.link = st.emulation.link; // shared with everything else the node sends
  if (!st.link && st.emulation.config.link_mbps > 0) {
    st.link = std::make_shared<link_shaper>(st.emulation.config.link_mbps);
  }
  auto desc = models::describe(models::model_spec::parse(spec.model));
  if (desc.fingerprint != spec.fingerprint) {
    throw std::invalid_argument("model " + spec.model + " has fingerprint " +
                                desc.fingerprint + " here, the supervisor expects " +
                                spec.fingerprint);
  }
  st.model =
      std::make_unique<models::layered_model>(desc, spec.seed, spec.begin, spec.end);
  // Data-parallel members each hold the whole pipeline (one position).
  if (spec.members > 1 && (spec.begin != 0 || spec.end != desc.layers.size())) {
    throw std::invalid_argument("a data-parallel stage must hold every layer, not " +
                                std::to_string(spec.begin) + ".." +
                                std::to_string(spec.end));
  }
  if (spec.members > 1 && spec.reduce != "supervisor" && spec.reduce != "chain") {
    throw std::invalid_argument("a data-parallel sum is taken by the supervisor or "
                                "along the chain, not by '" +
                                spec.reduce + "'");
  }
  int position = spec.members > 1 ? 0 : static_cast<int>(spec.index);
  int positions = spec.members > 1 ? 1 : static_cast<int>(spec.stages);
  st.first = position == 0;
  st.last = position + 1 == positions;
  st.exec = std::make_unique<models::range_executor>(st.model->all(), st.first, st.last);
  if (spec.mode == "infer") {
    st.infer = true;
    st.exec->net()->eval();
    st.spec = std::move(spec);
    return;
  }
  if (spec.mode != "train") {
    throw std::invalid_argument("stage mode '" + spec.mode + "' is not train or infer");
  }
  models::optimizer_config ocfg{spec.optimizer, spec.lr, spec.momentum, 0.0};
  st.opt = models::make_optimizer(ocfg, st.model->all()->parameters());
  auto micro_end = spec.micro_end > 0 ? spec.micro_end : spec.micro_batches;
  if (spec.micro_begin > micro_end || micro_end > spec.micro_batches) {
    throw std::invalid_argument("micro-batches " + std::to_string(spec.micro_begin) +
                                ".." + std::to_string(micro_end) +
                                " are not within the batch's " +
                                std::to_string(spec.micro_batches));
  }
  auto kind = algorithms::parse_schedule(spec.schedule);
  if (kind == algorithms::schedule_kind::async) {
    // (rows span many batches: pump_async builds them once ready)
    if (spec.members > 1 || spec.row_batches == 0) {
      throw std::invalid_argument(
          "the async schedule runs pipeline stages (not data-parallel members) and "
          "needs rows of a bounded length (row_batches > 0)");
    }
    st.async = true;
    st.has_buffers = !st.model->all()->buffers().empty();
  } else {
    for (auto op : algorithms::stage_order(kind, positions,
                                           static_cast<int>(spec.micro_batches), position)) {
      if (op.micro >= static_cast<int>(spec.micro_begin) &&
          op.micro < static_cast<int>(micro_end)) {
        st.order.push_back(op);
      }
    }
  }
  st.batch = spec.start_batch;
  st.version = spec.start_batch;
  st.spec = std::move(spec);
}

// A re-planned or recovering stage: pull the weights and optimizer state of
// every layer from its sources (a source on this node answers locally, no
// bytes on the wire), then tell the supervisor. Each source's range comes in
// parts of whole layers, about tuning::pull_part_bytes of weights each, at
// most tuning::pull_window_parts asked of one source at a time: no one
// message takes long on a slow link (CAF drops a peer whose message takes
// longer than its connection timeout to arrive), a part's timeout is that of
// one part, and the sources send side by side.
void pull_sources(stage_actor::stateful_pointer<stage_state> self) {
  struct pulling {
    std::vector<algorithms::pull> parts;      ///< in layer order
    std::vector<models::weight_snapshot> got; ///< by part
    std::vector<std::vector<size_t>> queue;   ///< by source: parts not yet asked
    size_t pending = 0;
  };
  auto& st = self->state;
  st.ready = false;
  std::vector<int64_t> layer_bytes;
  for (auto& l : models::describe(models::model_spec::parse(st.spec.model)).layers) {
    layer_bytes.push_back(l.param_bytes);
  }
  auto p = std::make_shared<pulling>();
  p->queue.resize(st.spec.sources.size());
  for (size_t i = 0; i < st.spec.sources.size(); ++i) {
    auto version = i < st.spec.source_version.size() ? st.spec.source_version[i]
                                                     : st.spec.start_batch;
    algorithms::pull whole{i, st.spec.source_begin[i], st.spec.source_end[i], version};
    for (auto& part : algorithms::split_pull(
             whole, layer_bytes, static_cast<int64_t>(tuning::pull_part_bytes))) {
      p->queue[i].push_back(p->parts.size());
      p->parts.push_back(part);
    }
  }
  p->got.resize(p->parts.size());
  p->pending = p->parts.size();
  for (auto& q : p->queue) {
    std::reverse(q.begin(), q.end()); // asked from the back: in layer order
  }
  // all parts in: restore them as one snapshot, and report ready
  auto restore_all = [=] {
    auto& st = self->state;
    auto merged = p->got[0];
    merged.layers.clear();
    for (auto& part : p->got) {
      for (auto& l : part.layers) {
        merged.layers.push_back(std::move(l));
      }
    }
    if (merged.layers.size() != st.spec.end - st.spec.begin) {
      throw std::invalid_argument("received " + std::to_string(merged.layers.size()) +
                                  " layers for a range of " +
                                  std::to_string(st.spec.end - st.spec.begin));
    }
    models::restore(*st.model, st.opt.get(), merged);
    if (st.async) {
      restore_versions(self, merged);
    }
    st.ready = true;
    if (st.supervisor) {
      self->send(st.supervisor, ready_atom_v, st.spec.index);
    } // else: reported when wired
    pump(self);
  };
  auto ask = std::make_shared<std::function<void(size_t)>>();
  *ask = [=](size_t source) {
    auto& q = p->queue[source];
    if (q.empty()) {
      return;
    }
    auto k = q.back();
    q.pop_back();
    auto part = p->parts[k];
    auto src = caf::actor_cast<stage_actor>(self->state.spec.sources[source]);
    self->request(src, tuning::pull_timeout, snapshot_atom_v, part.begin, part.end,
                  part.version)
        .then(
            [=](snapshot_payload& got) {
              p->got[k] = std::move(got.snapshot);
              if (--p->pending > 0) {
                if (*ask) { // (none once a part failed)
                  (*ask)(source);
                }
                return;
              }
              *ask = nullptr; // (it holds itself)
              guarded(self, restore_all);
            },
            [=](caf::error& err) {
              *ask = nullptr;
              guarded(self, [&] {
                throw std::runtime_error(
                    "could not pull layers " + std::to_string(part.begin) + ".." +
                    std::to_string(part.end) + ": " + self->system().render(err));
              });
            });
  };
  if (p->parts.empty()) {
    throw std::invalid_argument("a stage told to pull its layers was given none to pull");
  }
  for (size_t i = 0; i < p->queue.size(); ++i) {
    for (size_t w = 0; w < tuning::pull_window_parts && *ask; ++w) {
      (*ask)(i);
    }
  }
}

// An input for `batch` (activations, gradients, labels): buffered by
// `store`, and run as soon as the stage's row reaches it.
template <class F>
void take_input(stage_actor::stateful_pointer<stage_state> self, uint64_t batch,
                F&& store) {
  guarded(self, [&] {
    check_batch(self, batch);
    store();
    if (batch == self->state.batch || self->state.async) {
      pump(self);
    }
  });
}

// Forward only, for the test set: the last stage returns the logits.
void evaluate(stage_actor::stateful_pointer<stage_state> self, uint64_t id,
              uint32_t micro, const torch::Tensor& x) {
  auto& st = self->state;
  auto net = st.exec->net();
  net->eval();
  auto out = st.exec->infer(x);
  net->train();
  if (st.last) {
    self->send(st.supervisor, eval_atom_v, id, micro, tensor_payload{out});
  } else {
    self->send(st.next, eval_atom_v, id, micro, tensor_payload{out});
  }
}

// Data parallelism: the members' summed gradients are in; step with them.
void apply_reduce(stage_actor::stateful_pointer<stage_state> self,
                  const torch::Tensor& merged) {
  auto& st = self->state;
  compute_start start;
  st.stats.wait_s += seconds(start.wall - st.reduce_sent);
  auto own = static_cast<int64_t>(st.order.size() / 2);
  models::dp_apply(*st.exec->net(), merged,
                   static_cast<int64_t>(st.spec.micro_batches) - own);
  st.stats.compute_s += emulated(self, start);
  st.reducing = false;
  st.contribution = torch::Tensor{};
  st.summed.clear();
  finish_batch(self);
}

// Layers [begin, end) at `version` for a stage that pulls them: as they are
// now, or from the snapshots this stage kept of its last replications.
caf::result<snapshot_payload>
serve_layers(stage_actor::stateful_pointer<stage_state> self, uint64_t begin,
             uint64_t end, uint64_t version) {
  auto& st = self->state;
  if (version != st.version && version != current_version) {
    if (auto kept = st.kept.get(begin, end, version); kept.snapshot) {
      return answer_on_link(self, st.link, snapshot_payload{std::move(*kept.snapshot)},
                            begin, end, version);
    }
    return caf::make_error(errc::node_lost, "stage " + std::to_string(st.spec.index) +
                                                " is at version " +
                                                std::to_string(st.version) + ", not " +
                                                std::to_string(version));
  }
  try {
    return answer_on_link(
        self, st.link,
        snapshot_payload{capture_state(self, begin, end)},
        begin, end, version);
  } catch (const std::exception& e) {
    return caf::make_error(errc::stage_failed, e.what());
  }
}

// The job's wiring: the neighbours and the supervisor. A stage that pulled
// its layers before it knew its supervisor reports ready now.
void wire(stage_actor::stateful_pointer<stage_state> self, caf::actor prev,
          caf::actor next, caf::actor supervisor) {
  auto& st = self->state;
  bool report = !st.supervisor && st.ready && !st.spec.sources.empty();
  st.prev = caf::actor_cast<stage_actor>(prev);
  st.next = caf::actor_cast<stage_actor>(next);
  st.supervisor = caf::actor_cast<train_job_actor>(supervisor);
  st.wired = true;
  if (report) {
    self->send(st.supervisor, ready_atom_v, st.spec.index);
  }
  guarded(self, [&] { pump(self); }); // inputs that came before the wiring
}

// The weights as they are now, to `to`; answered once `to` has them all
// (the asker then takes them from it).
caf::result<uint64_t, uint64_t, uint64_t>
snapshot_to(stage_actor::stateful_pointer<stage_state> self, const caf::actor& to) {
  auto& st = self->state;
  try {
    snapshot_payload snap{capture_state(self, st.spec.begin, st.spec.end)};
    std::shared_ptr<const snapshot_encoding> parts;
    caf::actor courier;
    send_snapshot(self, caf::actor_cast<replica_holder_actor>(to), snap, parts, courier,
                  true);
    uint64_t version = st.version;
    uint64_t begin = st.spec.begin;
    uint64_t end = st.spec.end;
    if (!courier) {
      return caf::result<uint64_t, uint64_t, uint64_t>(version, begin, end);
    }
    auto rp = self->make_response_promise<uint64_t, uint64_t, uint64_t>();
    self->request(courier, caf::infinite, done_atom_v)
        .then([=](uint64_t) mutable { rp.deliver(version, begin, end); },
              [=](caf::error& e) mutable { rp.deliver(std::move(e)); });
    return rp;
  } catch (const std::exception& e) {
    return caf::make_error(errc::stage_failed, e.what());
  }
}

} // namespace

stage_actor::behavior_type stage(stage_actor::stateful_pointer<stage_state> self,
                                 stage_spec spec, node_emulation emulation) {
  if (!spec.sources.empty()) {
    // asked before the layers are built: the senders' links work meanwhile
    // (the answers are taken once this behavior is in place)
    self->state.spec = spec;
    pull_sources(self);
  }
  build(self, std::move(spec), std::move(emulation));
  return {
      [=](wire_atom, caf::actor prev, caf::actor next, caf::actor supervisor) {
        wire(self, std::move(prev), std::move(next), std::move(supervisor));
      },
      [=](forward_atom, uint64_t batch, uint32_t micro, tensor_payload& x) {
        take_input(self, batch, [&] {
          self->state.inputs[{batch, micro}] = std::move(x.tensor);
        });
      },
      [=](backward_atom, uint64_t batch, uint32_t micro, tensor_payload& g) {
        take_input(self, batch, [&] {
          self->state.grads[{batch, micro}] = std::move(g.tensor);
        });
      },
      [=](labels_atom, uint64_t batch, uint32_t micro, double weight, tensor_payload& y) {
        take_input(self, batch, [&] {
          self->state.labels[{batch, micro}] = {weight, std::move(y.tensor)};
        });
      },
      [=](eval_atom, uint64_t id, uint32_t micro, tensor_payload& x) {
        guarded(self, [&] {
          if (self->state.infer) {
            self->state.stream.emplace_back(id, micro, std::move(x.tensor));
            pump(self);
          } else {
            evaluate(self, id, micro, x.tensor);
          }
        });
      },
      [=](pause_atom) { self->state.frozen = true; },
      [=](drain_atom, uint64_t batch) {
        guarded(self, [&] {
          if (self->state.async) {
            drain_before(self, batch);
            pump(self);
          }
        });
      },
      [=](reduce_atom, uint64_t batch, tensor_payload& merged) {
        guarded(self, [&] {
          auto& st = self->state;
          if (st.frozen || !st.reducing || batch != st.batch) {
            return; // late, or recovery froze this stage where it was
          }
          apply_reduce(self, merged.tensor);
        });
      },
      [=](reduce_atom, uint64_t batch, uint32_t chunk, tensor_payload& partial) {
        guarded(self, [&] {
          auto& st = self->state;
          if (st.frozen || batch < st.batch) {
            return; // recovery froze this stage where it was
          }
          if (st.reducing && batch == st.batch) {
            reduce_chunk(self, chunk, partial.tensor);
          } else {
            st.partials[{batch, chunk}] = std::move(partial.tensor);
          }
        });
      },
      [=](summed_atom, uint64_t batch, uint32_t chunk, tensor_payload& merged) {
        guarded(self, [&] {
          auto& st = self->state;
          if (st.frozen || !st.reducing || batch != st.batch) {
            return; // recovery froze this stage where it was
          }
          take_summed(self, chunk, merged.tensor);
        });
      },
      [=](caf::get_atom) { return self->state.kept.inventory(); },
      [=](replicate_atom, uint64_t version) {
        guarded(self, [&] {
          auto& st = self->state;
          if (version == st.version && st.ready) {
            replicate(self);
          } else if (version > st.version) {
            st.replicate_at = version;
          }
        });
      },
      [=](snapshot_atom, const caf::actor& to)
          -> caf::result<uint64_t, uint64_t, uint64_t> { return snapshot_to(self, to); },
      [=](snapshot_atom, uint64_t begin, uint64_t end, uint64_t version) {
        return serve_layers(self, begin, end, version);
      },
  };
}

} // namespace salamander::actors
