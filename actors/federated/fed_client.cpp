#include "actors/federated/fed_client.hpp"
#include "actors/elapsed.hpp"
#include "actors/logging.hpp"

#include "algorithms/sampling.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>

#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

namespace salamander::actors {

namespace {

using clock = std::chrono::steady_clock;

// CPU time one tick may use before it yields to the mailbox.
constexpr double tick_cpu_s = 0.05;

using client_ptr = fed_client_actor::stateful_pointer<fed_client_state>;

std::pair<double, std::chrono::microseconds> device_time(client_ptr self, double wall,
                                                         double cpu) {
  return actors::device_time(self->state.emulation, wall, cpu, self->state.spec.speed);
}

// Always through the clock, never a plain send to itself: CAF 0.17 runs an
// actor for as long as its mailbox has messages (max-throughput is
// unlimited by default), so a tick sent to itself would hold a scheduler
// thread for the whole round and starve every other actor on it.
void schedule_tick(client_ptr self, std::chrono::microseconds pause) {
  auto id = self->state.work->id;
  self->delayed_send(self, std::max(pause, std::chrono::microseconds(1)), tick_atom_v,
                     id);
}

// Builds the model a work trains: the sub-model of `kept`, its weights from
// `weights` (or the seed's, for the profile), a fresh optimizer.
void build(client_ptr self, fed_work& w, const fed::unit_sets& kept,
           const models::weight_snapshot* weights) {
  auto& st = self->state;
  auto sub = sub_desc(st.desc, kept);
  w.model = std::make_unique<models::layered_model>(sub, st.spec.seed);
  if (weights) {
    load_params(*w.model, *weights);
    w.start = *weights;
  }
  w.net = w.model->all();
  models::optimizer_config ocfg{st.spec.optimizer, st.spec.lr, st.spec.momentum, 0.0};
  w.opt = models::make_optimizer(ocfg, w.net->parameters());
}

int64_t samples(const fed_client_state& st) {
  return st.shard.defined() ? st.shard.size(0) : 0;
}

// One training step on rows `positions` of the shard; the loss.
double step(client_ptr self, fed_work& w, const std::vector<int64_t>& positions) {
  auto& st = self->state;
  auto pos = torch::tensor(positions, torch::kInt64);
  auto idx = st.shard.index_select(0, pos);
  auto x = st.data->images.index_select(0, idx);
  auto y = st.data->labels.index_select(0, idx);
  w.opt->zero_grad();
  auto logits = w.net->forward(x);
  if (st.logit_scale.defined()) {
    logits = logits * st.logit_scale;
  }
  auto loss = torch::nn::functional::cross_entropy(logits, y);
  loss.backward();
  w.opt->step();
  return loss.item<double>();
}

std::vector<int64_t> batch_positions(const fed_client_state& st, const fed_work& w) {
  auto n = static_cast<int64_t>(w.order.size());
  auto b0 = w.batch * st.spec.batch_size;
  auto b1 = std::min(n, b0 + st.spec.batch_size);
  return {w.order.begin() + b0, w.order.begin() + b1};
}

void new_epoch_order(const fed_client_state& st, fed_work& w) {
  w.order = algorithms::epoch_permutation(
      algorithms::mix_seed(st.spec.seed, st.spec.client, w.task.round),
      static_cast<uint64_t>(w.epoch), samples(st));
}

void send_update(client_ptr self, fed_work& w, std::chrono::microseconds pause) {
  auto& st = self->state;
  fed_update u;
  u.round = w.task.round;
  u.client = st.spec.client;
  u.base_version = w.task.base_version;
  u.keep = w.task.keep;
  u.batches = w.trained;
  u.samples = samples(st);
  u.train_s = w.device_s;
  u.loss = w.loss_batches ? w.loss_sum / static_cast<double>(w.loss_batches) : 0.0;
  auto after = models::capture(*w.model, nullptr, "", w.task.base_version);
  for (size_t l = 0; l < after.layers.size(); ++l) {
    for (size_t p = 0; p < after.layers[l].params.size(); ++p) {
      auto& t = after.layers[l].params[p].tensor;
      t = t - w.start.layers[l].params[p].tensor;
    }
  }
  u.delta.snapshot = std::move(after);
  send_with_weights(self, w.reply, update_atom_v, std::move(u), &fed_update::delta,
                    st.transfers, pause);
}

void fail_work(client_ptr self, const std::string& what) {
  auto& st = self->state;
  subsystem_log("federated")->debug("client {} on {}: {}", st.spec.client, st.node, what);
  if (st.work && !st.work->profile) {
    fed_update u;
    u.round = st.work->task.round;
    u.client = st.spec.client;
    u.base_version = st.work->task.base_version;
    u.error = "client " + std::to_string(st.spec.client) + " on " + st.node + ": " + what;
    self->send(st.work->reply, update_atom_v, std::move(u));
  }
  if (st.work && st.work->profile && st.profile_promise) {
    st.profile_promise->deliver(caf::make_error(errc::stage_failed, what));
    st.profile_promise.reset();
  }
  st.work.reset();
}

// Training: batches until the tick's CPU is used; the update once the
// task's batches (w.limit, over its epochs) are trained.
void train_tick(client_ptr self) {
  auto& st = self->state;
  auto& w = *st.work;
  double w0 = since(w.started), c0 = thread_cpu();
  auto n = samples(st);
  auto per_epoch = algorithms::batches_per_epoch(n, st.spec.batch_size, false);
  bool done = false;
  while (thread_cpu() - c0 < tick_cpu_s) {
    if (w.trained >= w.limit) {
      done = true;
      break;
    }
    if (w.batch >= per_epoch) {
      ++w.epoch;
      w.batch = 0;
      new_epoch_order(st, w);
      w.loss_sum = 0;
      w.loss_batches = 0;
    }
    w.loss_sum += step(self, w, batch_positions(st, w));
    ++w.loss_batches;
    ++w.batch;
    ++w.trained;
  }
  auto [device, pause] = device_time(self, since(w.started) - w0, thread_cpu() - c0);
  w.device_s += device;
  if (done) {
    send_update(self, w, pause);
    st.work.reset();
    return;
  }
  schedule_tick(self, pause);
}

// What a batch costs at each kept fraction on this device, measured by the
// first client of a node and reused by the node's other (virtual) clients
// for a minute: a batch's time depends on the device, the model, the batch
// size and the fraction, not on whose examples it holds. 250 clients on a
// node otherwise profile 250 times (20 batches each) before round one.
struct profile_key {
  std::string node, model, emulation;
  int64_t batch_size = 0;
  int32_t threads = 0;
  double keep = 0;
  double share = 1; ///< the emulated share now (a console `slow node` changes it)
  bool operator<(const profile_key& o) const {
    return std::tie(node, model, emulation, batch_size, threads, keep, share) <
           std::tie(o.node, o.model, o.emulation, o.batch_size, o.threads, o.keep, o.share);
  }
};

struct profiled_batch {
  double per_batch_s = -1; ///< < 0: a client of the node is measuring it now
  clock::time_point at{};
};

constexpr std::chrono::seconds profile_reuse{60};
constexpr std::chrono::seconds profile_claim{10}; ///< a measurement still owed after this is dropped

std::mutex profile_cache_mutex;
std::map<profile_key, profiled_batch> profile_cache;

profile_key key_of(const fed_client_state& st, double keep) {
  return {st.node,
          st.spec.model,
          st.emulation.config.describe(),
          st.spec.batch_size,
          st.spec.threads,
          keep,
          st.emulation.limiter ? st.emulation.limiter->share_now() : 1.0};
}

enum class profile_lookup { known, measure, wait };

// Whether this node knows the batch's time at `keep` (into per_batch), or
// this client is to measure it (claimed), or another client measures it now.
profile_lookup look_up(const fed_client_state& st, double keep, double& per_batch) {
  std::lock_guard<std::mutex> guard(profile_cache_mutex);
  auto& e = profile_cache[key_of(st, keep)];
  auto age = clock::now() - e.at;
  if (e.per_batch_s >= 0 && age <= profile_reuse) {
    per_batch = e.per_batch_s;
    return profile_lookup::known;
  }
  if (e.per_batch_s < 0 && e.at != clock::time_point{} && age <= profile_claim) {
    return profile_lookup::wait;
  }
  e = {-1, clock::now()};
  return profile_lookup::measure;
}

void remember_profile(const fed_client_state& st, double keep, double per_batch) {
  std::lock_guard<std::mutex> guard(profile_cache_mutex);
  profile_cache[key_of(st, keep)] = {per_batch, clock::now()};
}

// Profile: one kept fraction per tick, one warm-up batch and then the
// timed ones; seconds per epoch from the median batch (or from the batch
// another client of this node measured within the last minute).
void profile_tick(client_ptr self) {
  auto& st = self->state;
  auto& w = *st.work;
  auto per_epoch = algorithms::batches_per_epoch(samples(st), st.spec.batch_size, false);
  // the node's time for a batch, stretched for a straggler among its clients
  auto record = [&](double keep, double per_batch) {
    st.profile.keep.push_back(keep);
    st.profile.epoch_s.push_back(per_batch / st.spec.speed * static_cast<double>(per_epoch));
    ++w.profile_step;
  };
  while (w.profile_step < st.spec.profile_keeps.size()) {
    auto keep = st.spec.profile_keeps[w.profile_step];
    double known = 0;
    auto found = look_up(st, keep, known);
    if (found == profile_lookup::wait) {
      schedule_tick(self, std::chrono::milliseconds(2));
      return;
    }
    if (found == profile_lookup::measure) {
      break;
    }
    record(keep, known);
  }
  if (w.profile_step >= st.spec.profile_keeps.size()) {
    // answered once the device would have finished it
    st.work.reset();
    if (st.profile_promise) {
      st.profile_promise->deliver(st.profile);
      st.profile_promise.reset();
    }
    return;
  }
  auto keep = st.spec.profile_keeps[w.profile_step];
  build(self, w, fed::mask_prefix(st.layout, keep), nullptr);
  w.task.round = 0;
  w.epoch = 0;
  new_epoch_order(st, w);
  double cpu_total = 0, wall_total = 0;
  std::vector<double> times;
  for (int64_t b = 0; b <= st.spec.profile_batches; ++b) {
    w.batch = b % per_epoch;
    auto t0 = clock::now();
    double c0 = thread_cpu();
    step(self, w, batch_positions(st, w));
    double cpu = thread_cpu() - c0, wall = since(t0);
    cpu_total += cpu;
    wall_total += wall;
    if (b > 0) { // the first one warms up; the node's time, whoever measures it
      times.push_back(actors::device_time(st.emulation, wall, cpu).first);
    }
  }
  std::sort(times.begin(), times.end());
  double per_batch = times[times.size() / 2];
  remember_profile(st, keep, per_batch);
  record(keep, per_batch);
  schedule_tick(self, device_time(self, wall_total, cpu_total).second);
}

void load_data(client_ptr self, const std::string& node_dir) {
  auto& st = self->state;
  auto& spec = st.spec;
  auto shard = load_shard(spec.dataset, st.desc, spec.data_dir, node_dir, spec.client,
                          spec.clients, spec.alpha, spec.classes_apart, spec.seed,
                          spec.max_samples);
  st.data = std::move(shard.data);
  st.shard = std::move(shard.shard);
  st.data_note = std::move(shard.note);
  if (spec.restricted_softmax != 1.0) {
    st.logit_scale = restricted_softmax_scale(label_counts(*st.data, st.shard),
                                              st.desc.classes, spec.restricted_softmax);
  }
}

// A round's task from the job: the sub-model and its weights, a fresh
// optimizer, the batches to train (all of them, or `work` of them), then
// ticks until they are trained.
void start_task(client_ptr self, fed_task& task) {
  auto& st = self->state;
  auto reply = caf::actor_cast<fed_job_actor>(self->current_sender());
  if (st.work && st.work->profile) {
    return; // the job asks for rounds only after the profile
  }
  bool whole = take_weights(st.inbox, self->current_sender(), task, &fed_task::weights);
  st.work.emplace();
  auto& w = *st.work;
  w.id = st.next_work++;
  w.reply = reply;
  w.started = clock::now();
  try {
    auto weights = std::move(task.weights.snapshot);
    w.task = std::move(task);
    if (!whole) {
      throw std::runtime_error("the task's weights did not arrive whole");
    }
    w.limit = fed::work_batches(
        w.task.epochs,
        algorithms::batches_per_epoch(samples(st), st.spec.batch_size, false),
        w.task.work);
    build(self, w, w.task.kept, &weights);
    new_epoch_order(st, w);
  } catch (const std::exception& e) {
    fail_work(self, e.what());
    return;
  }
  schedule_tick(self, std::chrono::microseconds(0));
}

} // namespace


fed_client_actor::behavior_type
fed_client(fed_client_actor::stateful_pointer<fed_client_state> self,
           fed_client_spec spec, node_emulation emulation, std::string node,
           std::string data_dir) {
  auto& st = self->state;
  st.spec = std::move(spec);
  st.emulation = std::move(emulation);
  st.node = std::move(node);
  st.profile.client = st.spec.client;
  std::string error;
  try {
    st.desc = models::describe(models::model_spec::parse(st.spec.model));
    st.layout = width_layout(st.desc);
    load_data(self, data_dir);
    std::sort(st.spec.profile_keeps.begin(), st.spec.profile_keeps.end());
    if (st.spec.profile_keeps.empty() || st.spec.profile_keeps.back() != 1.0) {
      st.spec.profile_keeps.push_back(1.0);
    }
    st.profile.samples = samples(st);
    st.profile.data = st.data_note;
    st.profile.emulation = st.emulation.config.describe();
    if (st.spec.speed < 1) {
      st.profile.emulation += fmt::format("; this client a straggler at {:g} of its node's speed",
                                          st.spec.speed);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  return {
      [=](profile_atom) -> caf::result<fed_profile> {
        auto& st = self->state;
        if (!error.empty()) {
          return caf::make_error(errc::bad_config, "client on " + st.node + ": " + error);
        }
        if (samples(st) == 0) {
          return caf::make_error(errc::bad_config, "client on " + st.node +
                                                       " has no examples (" +
                                                       st.data_note + ")");
        }
        st.profile.keep.clear();
        st.profile.epoch_s.clear();
        st.work.emplace();
        st.work->id = st.next_work++;
        st.work->profile = true;
        st.work->started = clock::now();
        st.profile_promise = self->make_response_promise<fed_profile>();
        schedule_tick(self, std::chrono::microseconds(0));
        return *st.profile_promise;
      },
      [=](round_atom, fed_task& task) { start_task(self, task); },
      part_handler(self, self->state.inbox, "federated"),
      [=](stop_atom) {
        auto& st = self->state;
        if (st.work && !st.work->profile) {
          st.work.reset();
        }
      },
      [=](tick_atom, uint64_t id) {
        auto& st = self->state;
        if (!st.work || st.work->id != id) {
          return; // replaced or stopped
        }
        use_intra_op_threads(st.spec.threads);
        try {
          if (st.work->profile) {
            profile_tick(self);
          } else {
            train_tick(self);
          }
        } catch (const std::exception& e) {
          fail_work(self, e.what());
        }
      },
  };
}

} // namespace salamander::actors
