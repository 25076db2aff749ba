// The round job core: the lifecycle of federated and split jobs, once.
#include "actors/job/round_job.hpp"
#include "actors/exit_text.hpp"
#include "actors/logging.hpp"
#include "algorithms/sampling.hpp"
#include "models/data.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace salamander::actors {

namespace {

using algorithms::round_event;
using algorithms::round_phase;
using clock = std::chrono::steady_clock;

} // namespace

void check_round_config(const round_job_config& c) {
  if (c.rounds < 1) {
    throw std::invalid_argument("--rounds must be at least 1, got " +
                                std::to_string(c.rounds));
  }
  if (c.batch_size < 1) {
    throw std::invalid_argument("--batch-size must be at least 1, got " +
                                std::to_string(c.batch_size));
  }
  if (c.time_budget_s < 0) {
    throw std::invalid_argument("--time-budget must not be negative");
  }
  if (c.resume && c.checkpoint_path.empty()) {
    throw std::invalid_argument("--resume needs --checkpoint PATH");
  }
  if (c.classes_apart < 0) {
    throw std::invalid_argument("--classes-apart must not be negative, got " +
                                std::to_string(c.classes_apart));
  }
  if (c.clients_per_node < 1 || c.clients_per_node > 1024) {
    throw std::invalid_argument("--clients-per-node must be in [1, 1024], got " +
                                std::to_string(c.clients_per_node));
  }
  if (!(c.fraction_fit > 0) || c.fraction_fit > 1) {
    throw std::invalid_argument("--fraction-fit must be in (0, 1], got " +
                                fmt::format("{}", c.fraction_fit));
  }
  if (!(c.straggler_fraction >= 0) || c.straggler_fraction > 1 ||
      !(c.straggler_speed > 0) || c.straggler_speed > 1) {
    throw std::invalid_argument(fmt::format(
        "--stragglers FRACTION:SPEED takes a fraction in [0, 1] and a speed in (0, 1], got "
        "{}:{}",
        c.straggler_fraction, c.straggler_speed));
  }
}

double client_speed(const round_job_config& cfg, uint32_t client, uint32_t clients) {
  if (cfg.straggler_fraction <= 0 || cfg.straggler_speed >= 1) {
    return 1.0;
  }
  auto slow = algorithms::pick_stragglers(cfg.seed, clients, cfg.straggler_fraction);
  return client < slow.size() && slow[client] ? cfg.straggler_speed : 1.0;
}

std::shared_ptr<const models::dataset> load_test_split(const round_job_config& cfg,
                                                       const models::model_desc& desc) {
  models::check_fits(cfg.dataset, desc);
  auto test = models::load_dataset(cfg.dataset, false, desc, cfg.data_dir);
  if (cfg.test_samples > 0 && cfg.test_samples < test.size()) {
    test.images = test.images.narrow(0, 0, cfg.test_samples);
    test.labels = test.labels.narrow(0, 0, cfg.test_samples);
  }
  return std::make_shared<const models::dataset>(std::move(test));
}

void round_job::attach(const round_job_config& cfg, round_mode& mode,
                       std::unique_ptr<job_port> port) {
  cfg_ = &cfg;
  mode_ = &mode;
  port_ = std::move(port);
  started = port_->now();
  status.rounds.total = cfg.rounds;
  status.phase = status_phase_from_text(to_string(phase, mode.enlisting()));
  port_->tick_after(tick_period);
}

std::shared_ptr<spdlog::logger> round_job::log() const {
  return subsystem_log(mode_->name());
}

double round_job::seconds_since(clock::time_point t) const {
  return std::chrono::duration<double>(port_->now() - t).count();
}

bool round_job::enter(round_event e) {
  auto next = algorithms::next_phase(phase, e);
  if (!next) {
    return false;
  }
  phase = *next;
  status.phase = status_phase_from_text(to_string(phase, mode_->enlisting()));
  return true;
}

double round_job::train_time() const {
  double now = training_started ? std::max(0.0, seconds_since(train_started_) - eval_s) : 0.0;
  return train_s_before + now;
}

void round_job::training_starts() {
  if (!training_started) {
    training_started = true;
    train_started_ = port_->now();
  }
}

void round_job::begin(const std::function<void()>& prepare,
                      std::function<void(std::vector<cluster_member>&)> admitted) {
  try {
    prepare();
  } catch (const std::exception& e) {
    fail(e.what());
    return;
  }
  port_->submit(
      cluster, cfg_->node_timeout + tuning::helper_margin,
      [this, admitted](std::vector<cluster_member>& members) {
        if (!over()) { // not stopped while the nodes were connecting
          admitted(members);
        }
      },
      [this](caf::error& err) { fail(port_->render(err)); });
}

void round_job::start(const std::vector<cluster_member>& members,
                      nlohmann::json start_fields) {
  nlohmann::json names = nlohmann::json::array();
  for (auto& m : members) {
    nodes.push_back(node_of(m));
    names.push_back(m.name);
  }
  start_fields["nodes"] = names;
  start_fields["rounds"] = cfg_->rounds;
  start_fields["alpha"] = cfg_->alpha;
  start_fields["classes_apart"] = cfg_->classes_apart;
  start_fields["seed"] = cfg_->seed;
  start_fields["resumed_at"] = mode_->rounds_done();
  start_fields["accuracy"] = status.test_accuracy;
  start_fields["unix_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  log_event("start", std::move(start_fields));
  // clients_per_node on each node of the start, node by node: the data is
  // sharded over them
  clients.resize(clients_for(nodes.size()));
  if (cfg_->classes_apart >= static_cast<int64_t>(clients.size())) {
    fail(fmt::format("--classes-apart {} needs more clients than that; the job has {}",
                     cfg_->classes_apart, clients.size()));
    return;
  }
  auto per_node = static_cast<uint32_t>(cfg_->clients_per_node);
  for (uint32_t i = 0; i < clients.size(); ++i) {
    clients[i].node = i / per_node;
  }
  enter(round_event::enlist);
  first_pending_ = 0;
  for (uint32_t i = 0; i < clients.size(); ++i) {
    if (!nodes[clients[i].node].dead) {
      ++first_pending_;
      clients[i].first_pending = true;
      spawn(i);
    }
  }
  if (first_pending_ == 0) {
    fail("no node can run a client");
  }
}

void round_job::end(round_event how, const std::string& error) {
  if (over()) {
    return;
  }
  refresh_status(); // the roster as it stood: stopping the clients takes them down
  stop_workers();
  status.error = error;
  status.train_s = train_time();
  mode_->fill_status(status);
  enter(how);
  port_->ended(); // the actor switches to the ended behaviour
  if (!error.empty()) {
    log()->error("{} job failed: {}", mode_->name(), error);
  }
  auto fields = mode_->end_fields();
  fields["phase"] = to_string(status.phase);
  fields["error"] = error;
  fields["stopped"] = stop_requested;
  fields["rounds"] = mode_->rounds_done();
  fields["accuracy"] = status.test_accuracy;
  fields["train_s"] = status.train_s;
  log_event("end", std::move(fields));
  flush_metrics();
}

// Every client and the mode's own workers (split: the server) stop.
void round_job::stop_workers() {
  for (auto& c : clients) {
    if (c.handle) {
      port_->exit(c.handle, caf::exit_reason::user_shutdown);
      c.handle = nullptr;
    }
  }
  mode_->stop_workers();
}

void round_job::fail(const std::string& what) {
  end(round_event::fail, what);
}

void round_job::guarded(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    fail(std::string(mode_->name()) + " job: " + e.what());
  }
}

bool round_job::ended_by_budget() {
  if (over() || !training_started || cfg_->time_budget_s <= 0 ||
      train_time() < cfg_->time_budget_s) {
    return false;
  }
  stop_requested = "the time budget";
  status.stopped = stop_requested;
  end(round_event::finish, "");
  return true;
}

bool round_job::may_start_round(bool any_available) {
  if (over() || user_paused || !stop_requested.empty() || ended_by_budget()) {
    return false;
  }
  if (static_cast<int64_t>(mode_->rounds_done()) >= cfg_->rounds) {
    end(round_event::finish, ""); // resumed with every round done already
    return false;
  }
  if (!any_available) {
    if (phase != round_phase::waiting && enter(round_event::no_client)) {
      log()->warn("no client can train now; waiting for one");
    }
    return false; // the tick tries again
  }
  enter(round_event::client_back);
  training_starts();
  return true;
}

bool round_job::available(uint32_t c) const {
  auto& s = clients[c];
  return s.handle && s.ready && !nodes[s.node].dead;
}

size_t round_job::clients_for(size_t n) const {
  return n * static_cast<size_t>(cfg_->clients_per_node);
}

std::vector<uint32_t> round_job::round_sample(uint64_t round) const {
  std::vector<uint32_t> up;
  for (uint32_t c = 0; c < clients.size(); ++c) {
    if (available(c)) {
      up.push_back(c);
    }
  }
  return algorithms::sample_clients(cfg_->seed, round, up, cfg_->fraction_fit);
}

client_slot* round_job::answered(uint32_t c, uint64_t attempt) {
  return over() || clients[c].attempt != attempt ? nullptr : &clients[c];
}

void round_job::spawn(uint32_t c) {
  auto& slot = clients[c];
  slot.spawning = true;
  auto attempt = ++slot.attempt;
  auto& node = nodes[slot.node];
  port_->spawn(
      caf::actor_cast<caf::actor>(node.handle), cfg_->node_timeout,
      mode_->spawn_message(c),
      [this, c, attempt](caf::actor& a) {
        auto* s = answered(c, attempt);
        if (!s) {
          port_->exit(a, caf::exit_reason::user_shutdown); // nobody's client
          return;
        }
        s->spawning = false;
        s->handle = a;
        port_->monitor(a);
        mode_->spawned(c);
      },
      [this, c, attempt](caf::error& err) {
        auto* s = answered(c, attempt);
        if (!s) {
          return;
        }
        s->spawning = false;
        auto why = port_->render(err);
        log()->warn("cannot start client {} on {}: {}", c,
                                   nodes[s->node].name, why);
        spawn_failed(*s, why);
        settle(c);
      });
}

void round_job::spawn_failed(client_slot& c, const std::string& why) {
  c.failures++;
  c.last_error = why;
  c.retry_at = port_->now() + respawn_wait * std::min(c.failures, 15);
}

void round_job::ready(uint32_t c) {
  auto& s = clients[c];
  s.ready = true;
  s.failures = 0;
  settle(c);
}

void round_job::start_failed(uint32_t c, const std::string& why) {
  log()->warn("client {} on {} cannot start: {}", c,
                             nodes[clients[c].node].name, why);
  client_gone(c, why);
  spawn_failed(clients[c], why);
}

void round_job::client_gone(uint32_t c, const std::string& why) {
  auto& s = clients[c];
  if (s.handle) {
    port_->exit(s.handle, caf::exit_reason::kill);
  }
  s.handle = nullptr;
  s.ready = false;
  s.spawning = false;
  s.attempt++; // answers about the client of before are stale
  s.retry_at = std::max(s.retry_at, port_->now() + respawn_wait);
  mode_->client_out(c, why);
  settle(c);
}

// The first clients: rounds start once every client of the start is
// ready, failed or gone; later ones join the round after theirs. Each
// client settles once.
void round_job::settle(uint32_t c) {
  auto& s = clients[c];
  if (!s.first_pending) {
    return;
  }
  s.first_pending = false;
  if (phase != round_phase::enlisting || first_pending_ == 0 || --first_pending_ > 0) {
    return;
  }
  enter(round_event::settled);
  mode_->next_work();
}

// No client has ever trained and none can start (every live node failed
// three times): the job says why instead of waiting for ever.
bool round_job::hopeless() const {
  if (training_started) {
    return false;
  }
  for (auto& s : clients) {
    if (!nodes[s.node].dead && (s.ready || s.failures < 3)) {
      return false;
    }
  }
  return true;
}

std::string round_job::last_error() const {
  std::string why;
  for (auto& s : clients) {
    if (!s.last_error.empty()) {
      why = nodes[s.node].name + ": " + s.last_error;
    }
  }
  return why;
}

job_status round_job::status_now() {
  refresh_status();
  return status;
}

void round_job::refresh_status() {
  auto& s = status;
  s.elapsed_s = seconds_since(started);
  if (over()) {
    return; // as at the end (end() stops the clients: they are not down)
  }
  s.train_s = train_time();
  s.paused_by_user = user_paused;
  s.rounds.total = cfg_->rounds;
  s.rounds.round = static_cast<int64_t>(mode_->rounds_done());
  s.plan.clear();
  s.rounds.clients = 0;
  for (uint32_t i = 0; i < clients.size(); ++i) {
    auto& c = clients[i];
    bool up = c.handle && !nodes[c.node].dead;
    s.rounds.clients += up ? 1 : 0;
    s.plan += fmt::format("{}{}:{}", s.plan.empty() ? "" : " ", nodes[c.node].name,
                          up ? mode_->contribution(i) : std::string("down"));
  }
  s.nodes.clear();
  for (size_t n = 0; n < nodes.size(); ++n) {
    auto row = basic_row(nodes[n], n, {}, 0);
    // the node's clients: their roles, and the first live one's speed
    row.role.clear();
    for (uint32_t i = 0; i < clients.size(); ++i) {
      if (clients[i].node != n) {
        continue;
      }
      bool up = clients[i].handle && !nodes[n].dead;
      row.role += (row.role.empty() ? "" : "; ") +
                  (up ? mode_->role(i) : fmt::format("client {}: down", i));
      if (up && row.speed == 0) {
        row.speed = mode_->speed(i);
      }
    }
    if (row.role.empty()) {
      row.role = "unused (joined after the shards were drawn)";
    }
    s.nodes.push_back(row);
  }
  mode_->fill_status(s);
}

caf::result<std::string> round_job::paused() {
  log_event("pause");
  return std::string("paused: the round in hand finishes, no new one starts");
}

caf::result<std::string> round_job::resumed() {
  log_event("resume");
  if (algorithms::runs_rounds(phase)) {
    mode_->next_work();
  }
  return std::string("resumed: the next round starts");
}

caf::result<std::string> round_job::checkpoint(const std::string& path) {
  auto written = mode_->checkpoint(path);
  if (!written) {
    return written.error();
  }
  return std::move(*written);
}

caf::result<std::string> round_job::stopping() {
  status.stopped = stop_requested;
  log_event("stop", {{"why", stop_requested}});
  end(round_event::finish, "");
  return "stopped after round " + std::to_string(mode_->rounds_done()) + " " +
         mode_->stop_note();
}

job_hooks round_job::hooks() {
  job_hooks h;
  h.status = [this] { return status_now(); };
  h.paused = [this] { return paused(); };
  h.resumed = [this] { return resumed(); };
  h.stopping = [this] { return stopping(); };
  h.checkpoint = [this](const std::string& path) { return checkpoint(path); };
  h.node_lost = [this](uint32_t n, const std::string& why) { node_lost(n, why); };
  h.node_joined = [this](uint32_t n, const cluster_member& m) { return node_joined(n, m); };
  // (no capacity hook: the clients' own round times correct their time models)
  h.leave = [this] { leave(); };
  return h;
}

void round_job::node_lost(uint32_t n, const std::string& why) {
  if (n >= nodes.size() || nodes[n].dead) {
    return;
  }
  nodes[n].dead = true;
  status.dead_nodes.push_back(nodes[n].name);
  log_event("failure", {{"node", nodes[n].name}, {"why", why}});
  for (uint32_t c = 0; c < clients.size(); ++c) {
    if (clients[c].node == n) {
      client_gone(c, "node " + nodes[n].name + " lost: " + why);
    }
  }
}

caf::result<std::string> round_job::node_joined(uint32_t n, const cluster_member& m) {
  auto how = node_joins(n, m);
  if (!how) {
    return how.error();
  }
  if (*how == joined::new_node) {
    return "node " + m.name + " joined; the data is sharded over the " +
           std::to_string(clients.size()) + " clients of the start, so it stays unused";
  }
  bool has_client = false;
  for (auto& c : clients) {
    if (c.node == n) {
      c.retry_at = port_->now();
      has_client = true;
    }
  }
  if (has_client && enlisted()) {
    // at once, not at the next tick: its client can take the next round
    guarded([this] { restart_clients(); });
  }
  if (!has_client) {
    return "node " + m.name +
           " is back; it joined after the shards were drawn, so it stays unused";
  }
  return "node " + m.name + " is back; its client starts again and joins the next round";
}

void round_job::down(const caf::down_msg& dm) {
  if (mode_->on_down(dm)) {
    return;
  }
  for (uint32_t c = 0; c < clients.size(); ++c) {
    if (clients[c].handle && clients[c].handle.address() == dm.source) {
      clients[c].handle = nullptr; // gone already: nothing to stop
      auto words = known_exit_text(dm.reason);
      client_gone(c, "its actor went away: " + (words ? *words : port_->render(dm.reason)));
    }
  }
}

bool round_job::enlisted() const {
  return phase != round_phase::starting && phase != round_phase::enlisting &&
         stop_requested.empty();
}

void round_job::restart_clients() {
  for (uint32_t c = 0; c < clients.size() && !over(); ++c) {
    auto& s = clients[c];
    if (!s.handle && !s.spawning && !nodes[s.node].dead && port_->now() >= s.retry_at) {
      log()->info("starting client {} on {} again", c, nodes[s.node].name);
      spawn(c);
    }
  }
}

void round_job::tick() {
  port_->tick_after(tick_period);
  if (!enlisted()) {
    return;
  }
  guarded([this] {
    if (ended_by_budget()) {
      return;
    }
    if (hopeless()) {
      fail("no client could start (3 attempts on every node); last: " + last_error());
      return;
    }
    mode_->on_tick();
    restart_clients();
    if (!over()) {
      mode_->next_work();
    }
  });
  flush_metrics();
}

caf::result<std::string> round_job::kill(uint32_t c) {
  if (c >= clients.size() || !clients[c].handle) {
    return caf::make_error(errc::no_such_worker,
                           "there is no client " + std::to_string(c) + " running");
  }
  port_->exit(clients[c].handle, caf::exit_reason::kill);
  return "client " + std::to_string(c) + " on node " + nodes[clients[c].node].name +
         " killed; it starts again and rejoins a later round";
}

caf::error round_job::no_replan() const {
  return caf::make_error(errc::not_applicable, mode_->why_no_replan());
}

caf::error round_job::no_replicate() const {
  return caf::make_error(errc::not_applicable, mode_->why_no_replicate());
}

void round_job::leave() {
  stop_workers();
  flush_metrics();
}

} // namespace salamander::actors
