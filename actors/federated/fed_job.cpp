// The federated job's behaviour: clients spawned and profiled, rounds
// configured by the strategy, sub-models out, updates in, aggregation,
// evaluation, checkpoints, faults and the console's commands.
#include "actors/federated/fed_job.hpp"
#include "actors/job/client_roster.hpp"
#include "actors/job/metrics.hpp"
#include "actors/logging.hpp"
#include "messages/checkpoint.hpp"
#include "messages/errors.hpp"
#include "models/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace salamander::actors {

namespace {

using clock = std::chrono::steady_clock;
using self_ptr = fed_job_actor::stateful_pointer<fed_job_state>;

constexpr auto tick_period = std::chrono::milliseconds(500);
using roster::respawn_wait;

auto log() {
  return subsystem_log("federated");
}

double since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

bool over(const fed_job_state& st) {
  return st.phase == "finished" || st.phase == "failed";
}

void log_event(self_ptr self, const std::string& kind, nlohmann::json fields = {}) {
  if (auto& m = self->state.metrics) {
    m->write(kind, fields.is_null() ? nlohmann::json::object() : std::move(fields));
  }
}

void set_phase(self_ptr self, const std::string& phase) {
  self->state.phase = phase;
  self->state.status.phase = phase;
}

// Wall time since the first round started, without the supervisor's
// evaluations of the global model (an experimenter's measurement, not
// part of federated training).
double train_time(const fed_job_state& st) {
  return st.training_started ? std::max(0.0, since(st.train_started) - st.eval_s) : 0.0;
}

models::weight_snapshot global_snapshot(const fed_job_state& st) {
  return to_snapshot(st.global, st.layout, st.desc, st.version);
}

void stop_clients(self_ptr self) {
  for (auto& c : self->state.clients) {
    if (c.handle) {
      self->send_exit(c.handle, caf::exit_reason::user_shutdown);
      c.handle = nullptr;
    }
  }
}

void end(self_ptr self, const std::string& phase, const std::string& error) {
  auto& st = self->state;
  if (over(st)) {
    return;
  }
  stop_clients(self);
  st.status.error = error;
  st.status.train_s = train_time(st);
  set_phase(self, phase);
  if (!error.empty()) {
    log()->error("federated job failed: {}", error);
  }
  log_event(self, "end",
            {{"phase", phase},
             {"error", error},
             {"stopped", st.stop_requested},
             {"rounds", st.version},
             {"accuracy", st.status.test_accuracy},
             {"train_s", st.status.train_s}});
  if (st.metrics) {
    st.metrics->flush();
  }
}

void fail(self_ptr self, const std::string& what) {
  end(self, "failed", what);
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
  st.status.test_accuracy = r.accuracy();
  st.status.loss = r.mean_loss;
  if (st.training_started) {
    st.eval_s += since(t0);
  }
}

void save(fed_job_state& st, const std::string& path) {
  messages::checkpoint c;
  c.snapshot = global_snapshot(st);
  c.seed = st.cfg.seed;
  c.epoch = st.version;
  c.note = fmt::format("federated {} round {}; {:.1f} s of training in this run",
                       st.cfg.strategy, st.version, train_time(st));
  messages::save_checkpoint(path, c);
}

nlohmann::json task_json(const fed_job_state& st, const fed::client_task& t) {
  return {{"client", t.client},
          {"node", st.nodes[t.client].name},
          {"keep", t.keep},
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
  task.weights.snapshot = to_snapshot(fed::slice(st.layout, st.global, kept), st.layout,
                                      sub_desc(st.desc, kept), st.version);
  return task;
}

std::vector<fed::client_view> views(const fed_job_state& st) {
  std::vector<fed::client_view> out;
  for (size_t i = 0; i < st.clients.size(); ++i) {
    auto v = st.clients[i].view;
    v.id = static_cast<uint32_t>(i);
    v.available = st.clients[i].handle && st.clients[i].profiled && !st.nodes[i].dead;
    out.push_back(v);
  }
  return out;
}

bool budget_spent(const fed_job_state& st) {
  return st.cfg.time_budget_s > 0 && st.training_started &&
         train_time(st) >= st.cfg.time_budget_s;
}

// The time budget is spent: the job ends (the round in hand is dropped).
bool ended_by_budget(self_ptr self) {
  auto& st = self->state;
  if (!budget_spent(st)) {
    return false;
  }
  st.stop_requested = "the time budget";
  st.status.stopped = st.stop_requested;
  end(self, "finished", "");
  return true;
}

std::string contributions(const fed_job_state& st) {
  std::string out;
  for (size_t i = 0; i < st.clients.size(); ++i) {
    auto& c = st.clients[i];
    out += fmt::format("{}{}:{}", out.empty() ? "" : " ", st.nodes[i].name,
                       !c.handle || st.nodes[i].dead ? std::string("down")
                       : c.last_keep > 0             ? fmt::format("{:.2f}", c.last_keep)
                                                     : std::string("-"));
  }
  return out;
}

void start_round(self_ptr self);
void send_async_tasks(self_ptr self);

// After an aggregation: evaluate, checkpoint, log, and decide what is next.
void after_step(self_ptr self, const std::vector<fed::update>& taken, double round_s,
                nlohmann::json extra) {
  auto& st = self->state;
  ++st.version;
  evaluate(self);
  if (!st.cfg.checkpoint_path.empty()) {
    try {
      save(st, st.cfg.checkpoint_path);
    } catch (const std::exception& e) {
      fail(self, std::string("cannot write the checkpoint: ") + e.what());
      return;
    }
  }
  st.status.round = static_cast<int64_t>(st.version);
  st.status.round_s = round_s;
  st.status.contributed = static_cast<int64_t>(taken.size());
  nlohmann::json contrib = nlohmann::json::array();
  for (auto& u : taken) {
    auto& c = st.clients[u.client];
    c.updates++;
    contrib.push_back({{"client", u.client},
                       {"node", st.nodes[u.client].name},
                       {"keep", u.keep},
                       {"samples", u.samples},
                       {"train_s", c.last_train_s}});
  }
  extra["round"] = st.version;
  extra["accuracy"] = st.status.test_accuracy;
  extra["loss"] = st.status.loss;
  extra["round_s"] = round_s;
  extra["train_s"] = train_time(st);
  extra["contributions"] = contrib;
  log_event(self, "round", std::move(extra));
  if (static_cast<int64_t>(st.version) >= st.cfg.rounds) {
    end(self, "finished", "");
  } else {
    ended_by_budget(self);
  }
}

// The strategy's new global model from `updates`; false (and the job
// failed) when it cannot make one.
bool aggregate(self_ptr self, const std::vector<fed::update>& updates) {
  auto& st = self->state;
  try {
    st.global = st.strategy->aggregate(st.layout, st.global, updates, st.version);
  } catch (const std::exception& e) {
    fail(self, std::string("aggregation failed: ") + e.what());
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
  for (auto& [client, t] : st.tasks) {
    late.push_back(client);
    st.status.dropped_updates++;
    auto& c = st.clients[client];
    // it took at least this long: a device that slowed down gets a
    // smaller part of the model next round instead of missing every one
    if (round_s > t.predicted_s) {
      c.view.time.observe(t.keep, st.cfg.settings.local_epochs, round_s);
    }
    if (c.handle) {
      self->send(c.handle, stop_atom_v);
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
  if (!over(st)) {
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
  if (over(st) || st.in_round || st.user_paused || !st.stop_requested.empty()) {
    return;
  }
  if (ended_by_budget(self)) {
    return;
  }
  if (static_cast<int64_t>(st.version) >= st.cfg.rounds) {
    end(self, "finished", ""); // resumed with every round done already
    return;
  }
  auto v = views(st);
  if (std::none_of(v.begin(), v.end(), [](auto& c) { return c.available; })) {
    if (st.phase != "waiting") {
      log()->warn("no client can train now; waiting for one");
      set_phase(self, "waiting");
    }
    return; // the tick tries again
  }
  set_phase(self, "training");
  if (!st.training_started) {
    st.training_started = true;
    st.train_started = clock::now();
  }
  auto round = st.version + 1;
  try {
    st.plan = st.strategy->configure(round, v, st.layout);
  } catch (const std::exception& e) {
    fail(self, std::string("the strategy could not plan the round: ") + e.what());
    return;
  }
  st.in_round = true;
  st.round_started = clock::now();
  st.round_loss = 0;
  st.status.pace_s = st.plan.pace_s;
  nlohmann::json tasks = nlohmann::json::array();
  for (auto& t : st.plan.tasks) {
    try {
      self->send(st.clients[t.client].handle, round_atom_v, make_task(st, t, round));
    } catch (const std::exception& e) {
      fail(self, std::string("cannot build a task: ") + e.what());
      return;
    }
    st.clients[t.client].last_keep = t.keep;
    st.tasks[t.client] = t;
    tasks.push_back(task_json(st, t));
  }
  log_event(self, "round_start",
            {{"round", round},
             {"tasks", tasks},
             {"pace_s", st.plan.pace_s},
             {"wait_s", st.plan.wait_s}});
  auto wait = std::chrono::milliseconds(static_cast<int64_t>(st.plan.wait_s * 1000) + 1);
  self->delayed_send(self, wait, deadline_atom_v, round);
}

// fedbuff: a task for every idle client.
void send_async_tasks(self_ptr self) {
  auto& st = self->state;
  if (over(st) || st.user_paused || !st.stop_requested.empty()) {
    return;
  }
  if (static_cast<int64_t>(st.version) >= st.cfg.rounds) {
    end(self, "finished", "");
    return;
  }
  auto v = views(st);
  for (auto& c : v) {
    auto& e = st.clients[c.id];
    if (!c.available || e.busy || clock::now() < e.retry_at) {
      continue;
    }
    if (!st.training_started) {
      st.training_started = true;
      st.train_started = clock::now();
      st.round_started =
          st.train_started; // the first server step's time counts from here
      set_phase(self, "training");
    }
    auto t = st.strategy->next_task(c, st.version, st.layout);
    try {
      // numbered: two tasks from the same version see different example orders
      self->send(e.handle, round_atom_v, make_task(st, t, ++st.async_tasks_sent));
    } catch (const std::exception& ex) {
      fail(self, std::string("cannot build a task: ") + ex.what());
      return;
    }
    e.busy = true;
    e.last_keep = t.keep;
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

void on_update(self_ptr self, fed_update& u) {
  auto& st = self->state;
  if (over(st) || u.client >= st.clients.size()) {
    return;
  }
  auto& c = st.clients[u.client];
  bool async = st.strategy->asynchronous();
  if (!c.handle ||
      caf::actor_cast<caf::strong_actor_ptr>(c.handle) != self->current_sender()) {
    return; // a client of before (killed, replaced): its work is void
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
      c.view.time.observe(u.keep, st.cfg.settings.local_epochs, u.train_s);
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
    st.status.dropped_updates++;
    c.retry_at = clock::now() + respawn_wait; // fedbuff: not again at once
  } else {
    try {
      c.last_train_s = u.train_s;
      c.view.time.observe(u.keep, st.cfg.settings.local_epochs, u.train_s);
      if (st.strategy->asynchronous()) {
        st.buffer.push_back(to_update(st, u, task));
      } else {
        st.arrived.push_back(to_update(st, u, task));
      }
    } catch (const std::exception& e) {
      log()->warn("client {} sent an update that does not fit: {}", u.client, e.what());
      st.failed.push_back(u.client);
      st.status.dropped_updates++;
    }
  }
  if (!st.strategy->asynchronous()) {
    check_round(self);
    return;
  }
  if (st.buffer.size() >= st.strategy->buffer_size()) {
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
  send_async_tasks(self);
}

// The first profiles: training starts once every client of the start has
// answered (or failed, or gone); clients that come later join the round
// after theirs. Each client settles once.
void settle_first_profile(self_ptr self, uint32_t client) {
  auto& st = self->state;
  auto& c = st.clients[client];
  if (!c.first_profile_pending) {
    return;
  }
  c.first_profile_pending = false;
  if (st.phase != "profiling" || st.profiles_pending == 0 || --st.profiles_pending > 0) {
    return;
  }
  set_phase(self, "training");
  if (st.strategy->asynchronous()) {
    send_async_tasks(self);
  } else {
    start_round(self);
  }
}

// A spawn or profile failed: try again later, spaced out (up to half a
// minute between attempts).
void client_failed(self_ptr self, uint32_t client, const std::string& why) {
  roster::spawn_failed(self->state.clients[client], why);
}

// A client is gone (its node, or itself): out of the round in hand.
void client_gone(self_ptr self, uint32_t client, const std::string& why) {
  auto& st = self->state;
  auto& c = st.clients[client];
  c.handle = nullptr;
  c.profiled = false;
  c.busy = false;
  c.spawning = false;
  c.attempt++; // answers about the client of before are stale
  c.retry_at = std::max(c.retry_at, clock::now() + respawn_wait);
  st.async_tasks.erase(client);
  if (st.tasks.erase(client) > 0) {
    st.failed.push_back(client);
    st.status.dropped_updates++;
    log()->warn("client {} ({}) is out of round {}: {}", client, st.nodes[client].name,
                st.version + 1, why);
    check_round(self);
  }
  settle_first_profile(self, client);
}

// The client a spawn or profile answer is about, or null when the answer
// is stale: the job ended, or the client was replaced or went meanwhile.
fed_client_entry* answered(self_ptr self, uint32_t client, uint64_t attempt) {
  auto& st = self->state;
  auto& c = st.clients[client];
  return over(st) || c.attempt != attempt ? nullptr : &c;
}

void profile_client(self_ptr self, uint32_t client) {
  auto& st = self->state;
  auto handle = st.clients[client].handle;
  auto attempt = st.clients[client].attempt;
  self->request(handle, st.cfg.profile_timeout, profile_atom_v)
      .then(
          [=](fed_profile& p) {
            auto* cp = answered(self, client, attempt);
            if (!cp) {
              return; // replaced or gone meanwhile (and settled then)
            }
            auto& st = self->state;
            auto& c = *cp;
            c.profile = p;
            c.view.samples = p.samples;
            c.view.time.keep = p.keep;
            c.view.time.seconds = p.epoch_s;
            c.view.time.scale = 1;
            c.profiled = true;
            c.failures = 0;
            log()->info("client {} on {}: {}; {:.2f} s per local epoch at full width, "
                        "{:.2f} s at {:.2f}",
                        client, st.nodes[client].name, p.data, p.epoch_s.back(),
                        p.epoch_s.front(), p.keep.front());
            log_event(self, "profile",
                      {{"client", client},
                       {"node", st.nodes[client].name},
                       {"samples", p.samples},
                       {"data", p.data},
                       {"emulation", p.emulation},
                       {"keep", p.keep},
                       {"epoch_s", p.epoch_s}});
            settle_first_profile(self, client);
          },
          [=](caf::error& err) {
            if (!answered(self, client, attempt)) {
              return;
            }
            auto& st = self->state;
            auto why = self->system().render(err);
            log()->warn("client {} on {} could not profile: {}", client,
                        st.nodes[client].name, why);
            self->send_exit(handle, caf::exit_reason::user_shutdown);
            client_gone(self, client, "no profile");
            client_failed(self, client, why);
          });
}

fed_client_spec client_spec(const fed_job_state& st, uint32_t client) {
  fed_client_spec s;
  s.client = client;
  s.clients = static_cast<uint32_t>(st.clients.size());
  s.model = st.desc.spec.canonical();
  s.fingerprint = st.desc.fingerprint;
  s.dataset = st.cfg.dataset;
  s.data_dir = st.cfg.data_dir;
  s.alpha = st.cfg.alpha;
  s.seed = st.cfg.seed;
  s.batch_size = st.cfg.batch_size;
  s.optimizer = st.cfg.optimizer;
  s.lr = st.cfg.lr;
  s.momentum = st.cfg.momentum;
  s.threads = st.cfg.threads;
  s.profile_keeps = st.cfg.profile_keeps;
  s.profile_batches = st.cfg.profile_batches;
  s.max_samples = st.cfg.max_samples;
  return s;
}

// Spawns client `client` on its node; it is profiled, then trains.
void spawn_client(self_ptr self, uint32_t client) {
  auto& st = self->state;
  auto& c = st.clients[client];
  c.spawning = true;
  auto attempt = ++c.attempt;
  self->request(st.nodes[client].handle, st.cfg.node_timeout, spawn_atom_v,
                client_spec(st, client))
      .then(
          [=](caf::actor& a) {
            auto* cp = answered(self, client, attempt);
            if (!cp) {
              self->send_exit(a, caf::exit_reason::user_shutdown); // nobody's client
              return;
            }
            auto& c = *cp;
            c.spawning = false;
            c.handle = caf::actor_cast<fed_client_actor>(a);
            self->monitor(a);
            profile_client(self, client);
          },
          [=](caf::error& err) {
            auto* cp = answered(self, client, attempt);
            if (!cp) {
              return;
            }
            auto& st = self->state;
            auto& c = *cp;
            c.spawning = false;
            auto why = self->system().render(err);
            log()->warn("cannot start client {} on {}: {}", client, st.nodes[client].name,
                        why);
            client_failed(self, client, why);
            settle_first_profile(self, client);
          });
}

// No client has ever trained and none can start: say why instead of
// waiting for ever.

void on_tick(self_ptr self) {
  auto& st = self->state;
  if (over(st)) {
    return;
  }
  self->delayed_send(self, tick_period, tick_atom_v);
  if (st.phase == "starting" || st.phase == "profiling") {
    return;
  }
  if (!st.stop_requested.empty()) {
    return;
  }
  if (ended_by_budget(self)) {
    return;
  }
  if (roster::hopeless(st, [](auto& c) { return c.profiled; })) {
    std::string why;
    for (size_t i = 0; i < st.clients.size(); ++i) {
      if (!st.clients[i].last_error.empty()) {
        why = st.nodes[i].name + ": " + st.clients[i].last_error;
      }
    }
    fail(self, "no client could start (3 attempts on every node); last: " + why);
    return;
  }
  // clients to start again: a node back, a client that died
  for (uint32_t i = 0; i < st.clients.size(); ++i) {
    auto& c = st.clients[i];
    if (!c.handle && !c.spawning && !st.nodes[i].dead && clock::now() >= c.retry_at) {
      log()->info("starting client {} on {} again", i, st.nodes[i].name);
      spawn_client(self, i);
    }
  }
  if (st.strategy->asynchronous()) {
    send_async_tasks(self);
  } else {
    start_round(self);
  }
  if (st.metrics) {
    st.metrics->flush();
  }
}

void refresh_status(self_ptr self) {
  auto& st = self->state;
  auto& s = st.status;
  s.elapsed_s = since(st.started);
  s.train_s = train_time(st);
  s.paused_by_user = st.user_paused;
  s.rounds = st.cfg.rounds;
  s.round = static_cast<int64_t>(st.version);
  s.plan = contributions(st);
  s.clients = 0;
  s.nodes.clear();
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    auto row = basic_row(st.nodes[i], i, {}, 0);
    if (i < st.clients.size()) {
      auto& c = st.clients[i];
      bool up = c.handle && !st.nodes[i].dead;
      s.clients += up ? 1 : 0;
      row.role = !up           ? fmt::format("client {}: down", i)
                 : !c.profiled ? fmt::format("client {}: profiling", i)
                               : fmt::format("client {}: keep {:.2f}, {} updates", i,
                                             c.last_keep, c.updates);
      // as the console explains it: measured over profiled (1: as profiled)
      row.speed = c.profiled && c.view.time.scale > 0 ? 1.0 / c.view.time.scale : 0;
    } else {
      row.role = "unused (joined after the shards were drawn)";
    }
    s.nodes.push_back(row);
  }
}

void on_down(self_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  for (uint32_t i = 0; i < st.clients.size(); ++i) {
    if (st.clients[i].handle && st.clients[i].handle.address() == dm.source) {
      client_gone(self, i, "its actor went down: " + self->system().render(dm.reason));
    }
  }
}

void on_node_lost(self_ptr self, uint32_t n, const std::string& why) {
  auto& st = self->state;
  if (roster::mark_lost(st, n, why) && n < st.clients.size()) {
    client_gone(self, n, "node " + st.nodes[n].name + " lost: " + why);
  }
}

caf::result<std::string> on_stop(self_ptr self, const std::string& why) {
  auto& st = self->state;
  if (over(st)) {
    return caf::make_error(errc::bad_config, "the federated job has ended");
  }
  st.stop_requested = why.empty() ? std::string("stop") : why;
  st.status.stopped = st.stop_requested;
  log_event(self, "stop", {{"why", st.stop_requested}});
  end(self, "finished", "");
  return "stopped after round " + std::to_string(st.version) +
         " (the round in hand is dropped; the global model is that of the last round)";
}

void first_clients(self_ptr self) {
  auto& st = self->state;
  set_phase(self, "profiling");
  st.clients.resize(st.nodes.size());
  st.profiles_pending = 0;
  for (uint32_t i = 0; i < st.nodes.size(); ++i) {
    if (!st.nodes[i].dead) {
      ++st.profiles_pending;
      st.clients[i].first_profile_pending = true;
      spawn_client(self, i);
    }
  }
  if (st.profiles_pending == 0) {
    fail(self, "no node can run a client");
  }
}

} // namespace

fed_job_actor::behavior_type fed_job(fed_job_actor::stateful_pointer<fed_job_state> self,
                                     fed_config cfg, cluster_actor cluster) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.cluster = std::move(cluster);
  st.started = clock::now();
  st.status.mode = "federate";
  st.status.strategy = st.cfg.strategy;
  st.status.rounds = st.cfg.rounds;
  set_phase(self, "starting");
  self->set_down_handler([=](caf::down_msg& dm) { on_down(self, dm); });
  bool ok = true;
  try {
    if (st.cfg.rounds < 1) {
      throw std::invalid_argument("--rounds must be at least 1, got " +
                                  std::to_string(st.cfg.rounds));
    }
    if (st.cfg.profile_batches < 1 || st.cfg.batch_size < 1) {
      throw std::invalid_argument("the profile needs at least one batch of one example");
    }
    st.strategy = fed::make_strategy(st.cfg.strategy, [&] {
      auto s = st.cfg.settings;
      s.seed = st.cfg.seed;
      return s;
    }());
    st.desc = models::describe(models::model_spec::parse(st.cfg.model));
    st.layout = width_layout(st.desc);
    models::check_fits(st.cfg.dataset, st.desc);
    auto test = models::load_dataset(st.cfg.dataset, false, st.desc, st.cfg.data_dir);
    if (st.cfg.test_samples > 0 && st.cfg.test_samples < test.size()) {
      test.images = test.images.narrow(0, 0, st.cfg.test_samples);
      test.labels = test.labels.narrow(0, 0, st.cfg.test_samples);
    }
    st.test = std::make_shared<const models::dataset>(std::move(test));
    if (st.cfg.resume) {
      auto ckpt = messages::load_checkpoint(st.cfg.checkpoint_path, st.desc.fingerprint);
      st.global = to_flat(ckpt.snapshot, st.layout);
      st.version = ckpt.epoch;
      log()->info("resuming from {}: round {} ({})", st.cfg.checkpoint_path, st.version,
                  ckpt.note);
    } else {
      models::layered_model init(st.desc, st.cfg.seed);
      st.global = to_flat(models::capture(init, nullptr, "", 0), st.layout);
    }
    if (!st.cfg.metrics_path.empty()) {
      st.metrics = std::make_shared<metrics_log>(st.cfg.metrics_path);
      st.status.metrics_path = st.cfg.metrics_path;
    }
    evaluate(self);
  } catch (const std::exception& e) {
    fail(self, e.what());
    ok = false;
  }
  if (ok) {
    self->request(st.cluster, st.cfg.node_timeout + tuning::helper_margin, submit_atom_v,
                  caf::actor_cast<caf::actor>(self))
        .then(
            [=](std::vector<cluster_member>& members) {
              auto& st = self->state;
              if (over(st)) {
                return; // stopped while the nodes were connecting
              }
              nlohmann::json names = nlohmann::json::array();
              for (auto& m : members) {
                st.nodes.push_back(node_of(m));
                names.push_back(m.name);
              }
              log_event(
                  self, "start",
                  {{"mode", "federate"},
                   {"strategy", st.cfg.strategy},
                   {"model", st.desc.spec.canonical()},
                   {"nodes", names},
                   {"rounds", st.cfg.rounds},
                   {"local_epochs", st.cfg.settings.local_epochs},
                   {"alpha", st.cfg.alpha},
                   {"seed", st.cfg.seed},
                   {"resumed_at", st.version},
                   {"accuracy", st.status.test_accuracy},
                   {"unix_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count()}});
              first_clients(self);
            },
            [=](caf::error& err) { fail(self, self->system().render(err)); });
  }
  self->delayed_send(self, tick_period, tick_atom_v);
  return {
      [=](caf::get_atom) {
        refresh_status(self);
        return self->state.status;
      },
      [=](pause_atom) -> caf::result<std::string> {
        return roster::pause_rounds(self->state);
      },
      [=](resume_atom) -> caf::result<std::string> {
        bool resumed = false;
        auto answer = roster::resume_rounds(self->state, resumed);
        (void)resumed; // the tick starts the next round
        return answer;
      },
      [=](checkpoint_atom, std::string& path) -> caf::result<std::string> {
        auto& st = self->state;
        if (path.empty()) {
          return caf::make_error(errc::bad_config, "checkpoint save needs a PATH");
        }
        try {
          save(st, path);
        } catch (const std::exception& e) {
          return caf::make_error(errc::bad_config, e.what());
        }
        return "wrote the global model of round " + std::to_string(st.version) + " to " +
               path;
      },
      [=](stop_atom, const std::string& why) { return on_stop(self, why); },
      [=](lost_atom, uint32_t node, std::string& why) { on_node_lost(self, node, why); },
      [=](join_atom, uint32_t node, cluster_member& m) {
        auto& st = self->state;
        return roster::node_joined(st, over(st), "federated", node, m);
      },
      [=](capacity_atom, const std::string&, double) {
        // the clients' own round times correct their time models
      },
      [=](event_atom, const std::string& kind, const std::string& fields) {
        log_event(self, kind, nlohmann::json::parse(fields, nullptr, false));
      },
      [=](leave_atom) {
        stop_clients(self);
        if (self->state.metrics) {
          self->state.metrics->flush();
        }
        self->quit();
      },
      [=](update_atom, fed_update& u) { on_update(self, u); },
      [=](deadline_atom, uint64_t round) {
        auto& st = self->state;
        if (st.in_round && round == st.version + 1) {
          finish_round(self, "the round's wait ended");
        }
      },
      [=](tick_atom) { on_tick(self); },
      [=](kill_atom, uint32_t client) -> caf::result<std::string> {
        auto& st = self->state;
        if (client >= st.clients.size() || !st.clients[client].handle) {
          return caf::make_error(errc::bad_config, "there is no client " +
                                                       std::to_string(client) +
                                                       " running");
        }
        self->send_exit(st.clients[client].handle, caf::exit_reason::kill);
        return "client " + std::to_string(client) + " on node " + st.nodes[client].name +
               " killed; it starts again and rejoins a later round";
      },
      [=](replan_atom, std::string&) -> caf::result<std::string> {
        return caf::make_error(errc::bad_config,
                               "a federated job has no pipeline to re-plan: every client "
                               "trains the model; the strategy sizes each round");
      },
      [=](replicate_atom) -> caf::result<std::string> {
        return caf::make_error(
            errc::bad_config, "a federated job keeps the global model beside the job and "
                              "checkpoints it every round (--checkpoint)");
      },
      [=](snapshot_atom) -> caf::result<snapshot_payload> {
        return snapshot_payload{global_snapshot(self->state)};
      },
  };
}

job_result run_fed_job(caf::actor_system& sys, const fed_config& cfg,
                       std::vector<remote_node> nodes, const job_options& opts) {
  auto cluster = sys.spawn(cluster_supervisor, cluster_config_for(cfg), std::move(nodes));
  auto job = sys.spawn(fed_job, cfg, cluster);
  return run_to_end(sys, caf::actor_cast<caf::actor>(job), cluster, cfg.node_timeout,
                    opts);
}

} // namespace salamander::actors
