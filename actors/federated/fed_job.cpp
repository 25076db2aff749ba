// The federated job's behaviour: what the round job core (actors/job/
// round_job.hpp) leaves to the mode: clients profiled, rounds configured by
// the strategy, sub-models out, updates in, aggregation, evaluation and
// checkpoints.
#include "actors/federated/fed_job.hpp"
#include "actors/elapsed.hpp"
#include "actors/logging.hpp"
#include "algorithms/sampling.hpp"
#include "messages/checkpoint.hpp"
#include "messages/errors.hpp"
#include "models/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace salamander::actors {

namespace {

using algorithms::round_event;
using clock = std::chrono::steady_clock;
using self_ptr = fed_job_actor::stateful_pointer<fed_job_state>;

auto log() {
  return subsystem_log("federated");
}

fed_client_actor client(const fed_job_state& st, uint32_t c) {
  return caf::actor_cast<fed_client_actor>(st.core.clients[c].handle);
}

models::weight_snapshot global_snapshot(const fed_job_state& st) {
  return to_snapshot(st.global, st.layout, st.desc, st.version);
}

// Accuracy and loss of the global model on the test split.
void evaluate(self_ptr self) {
  auto& st = self->state;
  if (!st.eval_model) {
    st.eval_model = std::make_unique<models::layered_model>(st.desc, st.cfg.seed);
  }
  auto t0 = clock::now();
  load_params(*st.eval_model, global_snapshot(st));
  auto net = st.eval_model->all();
  auto r = models::evaluate(net, *st.test, 1000);
  st.core.status.test_accuracy = r.accuracy();
  st.core.status.loss = r.mean_loss;
  if (st.core.training_started) {
    st.core.eval_s += since(t0);
  }
}

void save(fed_job_state& st, const std::string& path) {
  messages::checkpoint c;
  c.snapshot = global_snapshot(st);
  c.seed = st.cfg.seed;
  c.epoch = st.version;
  c.note = fmt::format("federated {} round {}; {:.1f} s of training",
                       st.cfg.strategy, st.version, st.core.train_time());
  c.train_s = st.core.train_time();
  messages::save_checkpoint(path, c);
}

int64_t epoch_batches(const fed_job_state& st, int64_t samples) {
  return algorithms::batches_per_epoch(samples, st.cfg.batch_size, false);
}

// The epochs that `batches` batches are for a client of `samples` examples
// (0 when it has none), for its time model: under partial work a client
// trains ceil(work x its batches), at least one, not work x its batches.
double epochs_in(const fed_job_state& st, int64_t samples, int64_t batches) {
  auto e = epoch_batches(st, samples);
  return e > 0 ? static_cast<double>(batches) / static_cast<double>(e) : 0.0;
}

// ", work 0.35" when a task trains part of its batches; "" otherwise.
std::string work_text(double work) {
  return work < 1 ? fmt::format(", work {:.2f}", work) : std::string();
}

nlohmann::json task_json(const fed_job_state& st, const fed::client_task& t) {
  return {{"client", t.client},
          {"node", st.core.nodes[st.core.clients[t.client].node].name},
          {"keep", t.keep},
          {"work", t.work},
          {"predicted_s", t.predicted_s}};
}

// The sub-model a task trains, cut out of the global model.
fed_task make_task(const fed_job_state& st, const fed::client_task& t, uint64_t round) {
  auto kept = t.kept.empty() ? fed::all_units(st.layout) : t.kept;
  fed_task task;
  task.round = round;
  task.base_version = t.base_version;
  task.keep = t.keep;
  task.kept = t.kept;
  task.epochs = st.cfg.settings.local_epochs;
  task.work = t.work;
  task.weights.snapshot = to_snapshot(fed::slice(st.layout, st.global, kept), st.layout,
                                      sub_desc(st.desc, kept), st.version);
  return task;
}

std::vector<fed::client_view> views(const fed_job_state& st) {
  std::vector<fed::client_view> out;
  for (uint32_t i = 0; i < st.info.size(); ++i) {
    auto v = st.info[i].view;
    v.id = i;
    v.available = st.core.available(i);
    out.push_back(v);
  }
  return out;
}

void start_round(self_ptr self);
void send_async_tasks(self_ptr self);

// After an aggregation: evaluate, checkpoint, log, and decide what is next.
void after_step(self_ptr self, const std::vector<fed::update>& taken, double round_s,
                nlohmann::json extra) {
  auto& st = self->state;
  auto& core = st.core;
  ++st.version;
  evaluate(self);
  if (!st.cfg.checkpoint_path.empty()) {
    try {
      save(st, st.cfg.checkpoint_path);
    } catch (const std::exception& e) {
      core.fail(std::string("cannot write the checkpoint: ") + e.what());
      return;
    }
  }
  core.status.rounds.round = static_cast<int64_t>(st.version);
  core.status.rounds.round_s = round_s;
  core.status.rounds.contributed = static_cast<int64_t>(taken.size());
  nlohmann::json contrib = nlohmann::json::array();
  for (auto& u : taken) {
    auto& c = st.info[u.client];
    c.updates++;
    contrib.push_back({{"client", u.client},
                       {"node", core.nodes[core.clients[u.client].node].name},
                       {"keep", u.keep},
                       {"samples", u.samples},
                       {"train_s", c.last_train_s},
                       {"batches", c.last_batches}});
  }
  extra["round"] = st.version;
  extra["accuracy"] = core.status.test_accuracy;
  extra["loss"] = core.status.loss;
  extra["round_s"] = round_s;
  extra["train_s"] = core.train_time();
  extra["contributions"] = contrib;
  core.log_event("round", std::move(extra));
  if (static_cast<int64_t>(st.version) >= st.cfg.rounds) {
    core.end(round_event::finish, "");
  } else {
    core.ended_by_budget();
  }
}

// The strategy's new global model from `updates`; false (and the job
// failed) when it cannot make one.
bool aggregate(self_ptr self, const std::vector<fed::update>& updates) {
  auto& st = self->state;
  try {
    st.global = st.strategy->aggregate(st.layout, st.global, updates, st.version);
  } catch (const std::exception& e) {
    st.core.fail(std::string("aggregation failed: ") + e.what());
    return false;
  }
  return true;
}

// The round in hand ends: aggregate what arrived, drop the rest.
void finish_round(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (!st.in_round) {
    return;
  }
  st.in_round = false;
  nlohmann::json late = nlohmann::json::array();
  auto round_s = since(st.round_started);
  for (auto& [c, t] : st.tasks) {
    late.push_back(c);
    st.core.status.rounds.dropped_updates++;
    // it took at least this long: a device that slowed down gets a
    // smaller part of the model next round instead of missing every one
    if (round_s > t.predicted_s) {
      auto samples = st.info[c].view.samples;
      auto planned = fed::work_batches(st.cfg.settings.local_epochs,
                                       epoch_batches(st, samples), t.work);
      st.info[c].view.time.observe(t.keep, epochs_in(st, samples, planned), round_s);
    }
    if (st.core.clients[c].handle) {
      self->send(client(st, c), stop_atom_v);
    }
  }
  st.tasks.clear();
  auto taken = std::move(st.arrived);
  st.arrived.clear();
  if (!aggregate(self, taken)) {
    return;
  }
  nlohmann::json failed = st.failed;
  st.failed.clear();
  after_step(self, taken, round_s,
             {{"ended", why},
              {"late", late},
              {"failed", failed},
              {"pace_s", st.plan.pace_s},
              {"wait_s", st.plan.wait_s}});
  if (!st.core.over()) {
    start_round(self);
  }
}

void check_round(self_ptr self) {
  auto& st = self->state;
  if (st.in_round && st.tasks.empty()) {
    finish_round(self, "every client answered");
  }
}

void start_round(self_ptr self) {
  auto& st = self->state;
  if (st.in_round) {
    return;
  }
  auto v = views(st);
  if (!st.core.may_start_round(
          std::any_of(v.begin(), v.end(), [](auto& c) { return c.available; }))) {
    return;
  }
  auto round = st.version + 1;
  auto chosen = st.core.round_sample(round);
  for (auto& c : v) {
    c.available = c.available && std::binary_search(chosen.begin(), chosen.end(), c.id);
  }
  try {
    st.plan = st.strategy->configure(round, v, st.layout);
  } catch (const std::exception& e) {
    st.core.fail(std::string("the strategy could not plan the round: ") + e.what());
    return;
  }
  st.in_round = true;
  st.round_started = clock::now();
  st.core.status.rounds.pace_s = st.plan.pace_s;
  nlohmann::json tasks = nlohmann::json::array();
  for (auto& t : st.plan.tasks) {
    try {
      send_with_weights(self, client(st, t.client), round_atom_v, make_task(st, t, round),
                        &fed_task::weights, st.core.transfers);
    } catch (const std::exception& e) {
      st.core.fail(std::string("cannot build a task: ") + e.what());
      return;
    }
    st.info[t.client].last_keep = t.keep;
    st.info[t.client].last_work = t.work;
    st.tasks[t.client] = t;
    tasks.push_back(task_json(st, t));
  }
  st.core.log_event("round_start", {{"round", round},
                                    {"tasks", tasks},
                                    {"pace_s", st.plan.pace_s},
                                    {"wait_s", st.plan.wait_s}});
  auto wait = std::chrono::milliseconds(static_cast<int64_t>(st.plan.wait_s * 1000) + 1);
  self->delayed_send(self, wait, deadline_atom_v, round);
}

// fedbuff: a task for every idle client.
void send_async_tasks(self_ptr self) {
  auto& st = self->state;
  auto& core = st.core;
  if (core.over() || core.user_paused || !core.stop_requested.empty()) {
    return;
  }
  if (static_cast<int64_t>(st.version) >= st.cfg.rounds) {
    core.end(round_event::finish, "");
    return;
  }
  for (auto& c : views(st)) {
    auto& e = st.info[c.id];
    if (!c.available || e.busy || self->clock().now() < core.clients[c.id].retry_at) {
      continue;
    }
    if (!core.training_started) {
      core.training_starts();
      st.round_started = clock::now(); // the first server step's time counts from here
      core.enter(round_event::client_back);
    }
    auto t = st.strategy->next_task(c, st.version, st.layout);
    try {
      // numbered: two tasks from the same version see different example orders
      send_with_weights(self, client(st, c.id), round_atom_v,
                        make_task(st, t, ++st.async_tasks_sent), &fed_task::weights,
                        st.core.transfers);
    } catch (const std::exception& ex) {
      core.fail(std::string("cannot build a task: ") + ex.what());
      return;
    }
    e.busy = true;
    e.last_keep = t.keep;
    e.last_work = t.work;
    st.async_tasks[c.id] = t;
  }
}

fed::update to_update(const fed_job_state& st, const fed_update& u,
                      const fed::client_task& t) {
  fed::update out;
  out.client = u.client;
  out.samples = u.samples;
  out.keep = t.keep;
  out.kept = t.kept;
  out.base_version = t.base_version;
  out.delta = to_flat(u.delta.snapshot, st.layout);
  return out;
}

// fedbuff: the server steps once `buffer` updates are in.
void step_async(self_ptr self) {
  auto& st = self->state;
  if (st.buffer.size() < st.strategy->buffer_size()) {
    return;
  }
  auto taken = std::move(st.buffer);
  st.buffer.clear();
  if (!aggregate(self, taken)) {
    return;
  }
  nlohmann::json stale = nlohmann::json::array();
  for (auto& b : taken) {
    stale.push_back(st.version - std::min(st.version, b.base_version));
  }
  auto step_s = since(st.round_started);
  st.round_started = clock::now();
  nlohmann::json failed = st.failed;
  st.failed.clear();
  after_step(self, taken, step_s, {{"staleness", stale}, {"failed", failed}});
}

void on_update(self_ptr self, fed_update& u) {
  auto& st = self->state;
  if (u.client >= st.info.size()) {
    return;
  }
  auto& c = st.info[u.client];
  auto& slot = st.core.clients[u.client];
  bool async = st.strategy->asynchronous();
  if (!slot.handle ||
      caf::actor_cast<caf::strong_actor_ptr>(slot.handle) != self->current_sender()) {
    return; // a client of before (killed, replaced): its work is void
  }
  if (!take_weights(st.core.inbox, self->current_sender(), u, &fed_update::delta)) {
    u.error = "client " + std::to_string(u.client) + ": its delta did not arrive whole";
  }
  auto& pending = async ? st.async_tasks : st.tasks;
  auto it = pending.find(u.client);
  bool current =
      it != pending.end() && (async ? it->second.base_version == u.base_version
                                    : u.round == st.version + 1 && st.in_round);
  if (!current) {
    // a round's late update was counted when the round ended; its time
    // still tells how slow the device is
    if (!async && u.error.empty() && u.train_s > 0) {
      c.view.time.observe(u.keep, epochs_in(st, u.samples, u.batches), u.train_s);
    }
    log()->debug("dropped a late update of client {} (round {})", u.client, u.round);
    return;
  }
  auto task = it->second;
  pending.erase(it);
  c.busy = false;
  if (!u.error.empty()) {
    log()->warn("{}", u.error);
    st.failed.push_back(u.client);
    st.core.status.rounds.dropped_updates++;
    // fedbuff: not again at once
    slot.retry_at = self->clock().now() + round_job::respawn_wait;
  } else {
    try {
      c.last_train_s = u.train_s;
      c.last_batches = u.batches;
      c.view.time.observe(u.keep, epochs_in(st, u.samples, u.batches), u.train_s);
      (async ? st.buffer : st.arrived).push_back(to_update(st, u, task));
    } catch (const std::exception& e) {
      log()->warn("client {} sent an update that does not fit: {}", u.client, e.what());
      st.failed.push_back(u.client);
      st.core.status.rounds.dropped_updates++;
    }
  }
  if (!async) {
    check_round(self);
    return;
  }
  step_async(self);
  send_async_tasks(self);
}

void profile_client(self_ptr self, uint32_t c) {
  auto& st = self->state;
  auto attempt = st.core.clients[c].attempt;
  self->request(client(st, c), st.cfg.profile_timeout, profile_atom_v)
      .then(
          [=](fed_profile& p) {
            auto& st = self->state;
            if (!st.core.answered(c, attempt)) {
              return; // replaced or gone meanwhile (and settled then)
            }
            auto& info = st.info[c];
            info.profile = p;
            info.view.samples = p.samples;
            info.view.time.keep = p.keep;
            // one noisy timing must not make a narrower model look slower
            info.view.time.seconds = fed::nondecreasing(p.epoch_s);
            info.view.time.scale = 1;
            auto& node = st.core.nodes[st.core.clients[c].node].name;
            log()->info("client {} on {}: {}; {:.2f} s per local epoch at full width, "
                        "{:.2f} s at {:.2f}",
                        c, node, p.data, p.epoch_s.back(), p.epoch_s.front(),
                        p.keep.front());
            st.core.log_event("profile", {{"client", c},
                                          {"node", node},
                                          {"samples", p.samples},
                                          {"data", p.data},
                                          {"emulation", p.emulation},
                                          {"keep", p.keep},
                                          {"epoch_s", p.epoch_s}});
            st.core.ready(c);
          },
          [=](caf::error& err) {
            auto& st = self->state;
            if (st.core.answered(c, attempt)) {
              st.core.start_failed(c, "no profile: " + self->system().render(err));
            }
          });
}

// What the federated mode decides and does for the round job core.
class fed_mode final : public round_mode {
public:
  explicit fed_mode(self_ptr self) : self_(self) {}
  const char* name() const override { return "federated"; }
  const char* enlisting() const override { return "profiling"; }
  caf::message spawn_message(uint32_t c) override {
    auto& st = self_->state;
    fed_client_spec s;
    fill_client_spec(s, st.cfg, c, static_cast<uint32_t>(st.core.clients.size()),
                     st.desc.spec.canonical(), st.desc.fingerprint);
    s.profile_keeps = st.cfg.profile_keeps;
    s.profile_batches = st.cfg.profile_batches;
    s.restricted_softmax = st.cfg.restricted_softmax;
    return caf::make_message(spawn_atom_v, std::move(s));
  }
  void spawned(uint32_t c) override { profile_client(self_, c); }
  void client_out(uint32_t c, const std::string& why) override {
    auto& st = self_->state;
    st.info[c].busy = false;
    st.async_tasks.erase(c);
    if (st.tasks.erase(c) > 0) {
      st.failed.push_back(c);
      st.core.status.rounds.dropped_updates++;
      log()->warn("client {} ({}) is out of round {}: {}", c,
                  st.core.nodes[st.core.clients[c].node].name, st.version + 1, why);
      check_round(self_);
    }
  }
  void next_work() override {
    if (self_->state.strategy->asynchronous()) {
      send_async_tasks(self_);
    } else {
      start_round(self_);
    }
  }
  uint64_t rounds_done() const override { return self_->state.version; }
  std::string stop_note() const override {
    return "(the round in hand is dropped; the global model is that of the last round)";
  }
  std::string role(uint32_t c) const override {
    auto& st = self_->state;
    auto& info = st.info[c];
    return !st.core.clients[c].ready
               ? fmt::format("client {}: profiling", c)
               : fmt::format("client {}: keep {:.2f}{}, {} updates", c, info.last_keep,
                             work_text(info.last_work), info.updates);
  }
  std::string contribution(uint32_t c) const override {
    auto keep = self_->state.info[c].last_keep;
    return keep > 0 ? fmt::format("{:.2f}", keep) : std::string("-");
  }
  double speed(uint32_t c) const override {
    // as the console explains it: measured over profiled (1: as profiled)
    auto& st = self_->state;
    auto scale = st.info[c].view.time.scale;
    return st.core.clients[c].ready && scale > 0 ? 1.0 / scale : 0;
  }
  caf::expected<std::string> checkpoint(const std::string& path) override {
    auto& st = self_->state;
    try {
      save(st, path);
    } catch (const std::exception& e) {
      return caf::make_error(errc::io_failed, e.what());
    }
    return "wrote the global model of round " + std::to_string(st.version) + " to " + path;
  }
  std::string why_no_replan() const override {
    return "a federated job has no pipeline to re-plan: every client trains the model; "
           "the strategy sizes each round";
  }
  std::string why_no_replicate() const override {
    return "a federated job keeps the global model beside the job and checkpoints it "
           "every round (--checkpoint)";
  }

private:
  self_ptr self_;
};

// The configuration, the strategy, the test split and the global model
// (the seed's, or the checkpoint's); throws what is wrong.
void prepare(fed_job_state& st) {
  check_round_config(st.cfg);
  if (st.cfg.profile_batches < 1) {
    throw std::invalid_argument("the profile needs at least one batch of one example");
  }
  if (!(st.cfg.restricted_softmax >= 0 && st.cfg.restricted_softmax <= 1)) {
    throw std::invalid_argument(fmt::format(
        "--restricted-softmax scales the logits of a client's missing classes: "
        "from 0 to 1 (1: plain softmax), got {}",
        st.cfg.restricted_softmax));
  }
  st.strategy = fed::make_strategy(st.cfg.strategy, [&] {
    auto s = st.cfg.settings;
    s.seed = st.cfg.seed;
    return s;
  }());
  if (st.strategy->asynchronous() && st.cfg.fraction_fit < 1) {
    throw std::invalid_argument("--fraction-fit samples the clients of a round; " +
                                st.cfg.strategy +
                                " has no rounds (every idle client gets a task)");
  }
  st.desc = models::describe(models::model_spec::parse(st.cfg.model));
  st.layout = width_layout(st.desc);
  st.test = load_test_split(st.cfg, st.desc);
  if (st.cfg.resume) {
    auto ckpt = messages::load_checkpoint(st.cfg.checkpoint_path, st.desc.fingerprint);
    st.global = to_flat(ckpt.snapshot, st.layout);
    st.version = ckpt.epoch;
    st.core.train_s_before = ckpt.train_s;
    log()->info("resuming from {}: round {} ({})", st.cfg.checkpoint_path, st.version,
                ckpt.note);
  } else {
    models::layered_model init(st.desc, st.cfg.seed);
    st.global = to_flat(models::capture(init, nullptr, "", 0), st.layout);
  }
  st.core.open_metrics();
}

} // namespace

fed_job_actor::behavior_type fed_job(fed_job_actor::stateful_pointer<fed_job_state> self,
                                     fed_config cfg, cluster_actor cluster) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.core.cluster = std::move(cluster);
  st.mode = std::make_unique<fed_mode>(self);
  auto snapshot = [self]() -> caf::result<snapshot_payload> {
    return snapshot_payload{global_snapshot(self->state)};
  };
  auto ended = [self, snapshot] {
    return round_job_ended(self, self->state.core, snapshot,
                           drop<update_atom, fed_update>(), drop<deadline_atom, uint64_t>());
  };
  st.core.attach(st.cfg, *st.mode,
                 std::make_unique<port_of<std::remove_pointer_t<decltype(self)>>>(self, ended));
  st.core.status.mode = job_mode::federate;
  st.core.status.rounds.strategy = st.cfg.strategy;
  self->set_down_handler([=](caf::down_msg& dm) { self->state.core.down(dm); });
  st.core.begin(
      [self] {
        prepare(self->state);
        evaluate(self);
      },
      [self](std::vector<cluster_member>& members) {
        auto& st = self->state;
        st.info.resize(st.core.clients_for(members.size()));
        st.core.start(members, {{"mode", "federate"},
                                {"strategy", st.cfg.strategy},
                                {"model", st.desc.spec.canonical()},
                                {"local_epochs", st.cfg.settings.local_epochs},
                                {"partial_work", st.cfg.settings.partial_work},
                                {"restricted_softmax", st.cfg.restricted_softmax}});
      });
  if (st.core.over()) {
    return ended(); // it failed here (its model, its data, its metrics log)
  }
  return round_job_handlers(
      self, st.core, [=](update_atom, fed_update& u) { on_update(self, u); },
      [=](deadline_atom, uint64_t round) {
        auto& st = self->state;
        if (st.in_round && round == st.version + 1) {
          finish_round(self, "the round's wait ended");
        }
      },
      [snapshot](snapshot_atom) { return snapshot(); });
}

job_result run_fed_job(caf::actor_system& sys, const fed_config& cfg,
                       std::vector<remote_node> nodes, const job_options& opts) {
  auto cluster = sys.spawn(cluster_supervisor, cluster_config_for(cfg), std::move(nodes));
  auto job = sys.spawn(fed_job, cfg, cluster);
  return run_to_end(sys, caf::actor_cast<caf::actor>(job), cluster, cfg.node_timeout,
                    opts);
}

} // namespace salamander::actors
