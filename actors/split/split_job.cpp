// The split-learning job's behaviour: the server and the clients spawned,
// rounds (turns in vanilla), results in, client models handed on, averaged
// or kept, evaluation, checkpoints, faults and the console's commands.
#include "actors/split/split_job.hpp"
#include "actors/job/client_roster.hpp"
#include "actors/job/metrics.hpp"
#include "actors/logging.hpp"
#include "algorithms/sampling.hpp"
#include "messages/checkpoint.hpp"
#include "messages/errors.hpp"
#include "models/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace salamander::actors {

namespace {

using clock = std::chrono::steady_clock;
using self_ptr = split_job_actor::stateful_pointer<split_job_state>;

constexpr auto tick_period = std::chrono::milliseconds(500);
using roster::respawn_wait;

auto log() {
  return subsystem_log("split");
}

double since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

bool over(const split_job_state& st) {
  return st.phase == "finished" || st.phase == "failed";
}

bool ada(const split_job_state& st) {
  return st.method == split::method::adasplit;
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

// Wall time training, without the supervisor's evaluations (an
// experimenter's measurement), over this run and those it resumed.
double train_time(const split_job_state& st) {
  double now =
      st.training_started ? std::max(0.0, since(st.train_started) - st.eval_s) : 0.0;
  return st.train_s_before + now;
}

void fill_traffic(job_status& s, const split::traffic& t) {
  s.bytes_up = t.up;
  s.bytes_down = t.down;
  s.client_flops = t.client_flops;
  s.server_flops = t.server_flops;
}

void stop_workers(self_ptr self) {
  for (auto& c : self->state.clients) {
    if (c.handle) {
      self->send_exit(c.handle, caf::exit_reason::user_shutdown);
      c.handle = nullptr;
    }
  }
  if (self->state.server) {
    self->send_exit(self->state.server, caf::exit_reason::user_shutdown);
    self->state.server = nullptr;
  }
}

void end(self_ptr self, const std::string& phase, const std::string& error) {
  auto& st = self->state;
  if (over(st)) {
    return;
  }
  stop_workers(self);
  st.status.error = error;
  st.status.train_s = train_time(st);
  fill_traffic(st.status, st.total);
  set_phase(self, phase);
  if (!error.empty()) {
    log()->error("split job failed: {}", error);
  }
  log_event(self, "end",
            {{"phase", phase},
             {"error", error},
             {"stopped", st.stop_requested},
             {"rounds", st.round},
             {"accuracy", st.status.test_accuracy},
             {"bytes", st.total.bytes()},
             {"bytes_up", st.total.up},
             {"bytes_down", st.total.down},
             {"client_flops", st.total.client_flops},
             {"server_flops", st.total.server_flops},
             {"c3", c3_of(st.status, st.cfg.budget)},
             {"train_s", st.status.train_s}});
  if (st.metrics) {
    st.metrics->flush();
  }
}

void fail(self_ptr self, const std::string& what) {
  end(self, "failed", what);
}

// The client-side model of client c as the job keeps it.
const models::weight_snapshot& client_side(const split_job_state& st, uint32_t c) {
  return ada(st) ? st.clients[c].weights : st.client_model;
}

// The whole model client c ends up with: its client side and the server's
// layers as it sees them (adasplit: through its mask).
models::weight_snapshot whole_model(const split_job_state& st, uint32_t c) {
  auto snap = untagged(client_side(st, c));
  for (auto& lw : server_view(st.server_snap, c).layers) {
    if (lw.index >= static_cast<uint32_t>(st.cfg.cut)) { // a checkpoint holds all layers
      snap.layers.push_back(lw);
    }
  }
  snap.version = st.round;
  return snap;
}

// Accuracy of what the clients end up with on the test split: the one
// model of vanilla and splitfed; in adasplit each client's own (its client
// side and its mask), averaged weighted by the clients' examples.
void evaluate(self_ptr self) {
  auto& st = self->state;
  if (st.server_snap.layers.empty()) {
    return;
  }
  if (!st.eval_model) {
    st.eval_model = std::make_unique<models::layered_model>(st.desc, st.cfg.seed);
  }
  auto t0 = clock::now();
  std::vector<uint32_t> who;
  if (ada(st)) {
    for (uint32_t c = 0; c < st.clients.size(); ++c) {
      if (!st.clients[c].weights.layers.empty()) {
        who.push_back(c);
      }
    }
  } else {
    who.push_back(0);
  }
  double acc = 0, loss = 0, weight = 0;
  st.client_accuracy.assign(st.clients.size(), -1);
  for (auto c : who) {
    models::restore(*st.eval_model, nullptr, whole_model(st, c));
    auto net = st.eval_model->all();
    auto r = models::evaluate(net, *st.test, 1000);
    double w =
        ada(st) ? static_cast<double>(std::max<int64_t>(1, st.clients[c].samples)) : 1;
    acc += w * r.accuracy();
    loss += w * r.mean_loss;
    weight += w;
    if (c < st.client_accuracy.size()) {
      st.client_accuracy[c] = r.accuracy();
    }
  }
  if (weight > 0) {
    st.status.test_accuracy = acc / weight;
    st.status.loss = loss / weight;
  }
  if (st.training_started) {
    st.eval_s += since(t0);
  }
}

// The job's counters and the orchestrator, as one tagged entry.
models::weight_snapshot stats_part(const split_job_state& st) {
  models::weight_snapshot part;
  models::layer_weights lw;
  lw.name = "stats";
  std::vector<double> totals = {static_cast<double>(st.method),
                                static_cast<double>(st.cfg.cut),
                                static_cast<double>(st.clients.size()),
                                static_cast<double>(st.total.up),
                                static_cast<double>(st.total.down),
                                st.total.client_flops,
                                st.total.server_flops,
                                train_time(st),
                                static_cast<double>(st.orch.total_picks)};
  lw.params.push_back({"totals", torch::tensor(totals, torch::kFloat64)});
  std::vector<double> loss(st.orch.loss), picks;
  for (auto p : st.orch.picks) {
    picks.push_back(static_cast<double>(p));
  }
  if (!loss.empty()) {
    lw.params.push_back({"orchestrator_loss", torch::tensor(loss, torch::kFloat64)});
    lw.params.push_back({"orchestrator_picks", torch::tensor(picks, torch::kFloat64)});
  }
  part.layers.push_back(std::move(lw));
  return part;
}

std::string describe_run(split::method m, int64_t cut, size_t clients) {
  return fmt::format("{} split learning cut before layer {} over {} clients",
                     split::to_string(m), cut, clients);
}

void save(split_job_state& st, const std::string& path) {
  messages::checkpoint c;
  // the whole model first, client 0's side and the server's shared layers
  // (unmasked): `salamander eval --load` reads it
  c.snapshot = untagged(client_side(st, 0));
  c.snapshot.version = st.round;
  for (auto& lw : st.server_snap.layers) {
    // the server's layers, then its masks (a resumed job's server snapshot
    // is the whole checkpoint: its clients and counters are written anew)
    bool mask = lw.index >= tagged_base && lw.name.compare(0, 4, "mask") == 0;
    if ((lw.index < tagged_base && lw.index >= static_cast<uint32_t>(st.cfg.cut)) ||
        mask) {
      c.snapshot.layers.push_back(lw);
    }
  }
  if (ada(st)) {
    for (uint32_t i = 0; i < st.clients.size(); ++i) {
      if (!st.clients[i].weights.layers.empty()) {
        add_tagged(c.snapshot, "client" + std::to_string(i), st.clients[i].weights);
      }
    }
  }
  add_tagged(c.snapshot, "stats", stats_part(st));
  c.seed = st.cfg.seed;
  c.epoch = st.round;
  c.note = fmt::format("{}, round {}; {:.1f} s of training",
                       describe_run(st.method, st.cfg.cut, st.clients.size()), st.round,
                       train_time(st));
  messages::save_checkpoint(path, c);
}

// Takes the counters, client models and server state of a checkpoint.
void resume_from(split_job_state& st, const messages::checkpoint& ckpt) {
  auto stats = take_tagged(ckpt.snapshot, "stats");
  if (stats.layers.empty() || stats.layers[0].params.empty()) {
    throw std::invalid_argument(st.cfg.checkpoint_path +
                                " is not a split job's checkpoint (no counters in it)");
  }
  auto totals = stats.layers[0].params[0].tensor.to(torch::kFloat64).contiguous();
  auto t = [&](int64_t i) { return totals[i].item<double>(); };
  auto m = static_cast<split::method>(static_cast<int>(t(0)));
  auto cut = static_cast<int64_t>(t(1));
  auto n = static_cast<size_t>(t(2));
  st.resume_clients = n;
  if (m != st.method || cut != st.cfg.cut ||
      (n != st.clients.size() && !st.clients.empty())) {
    throw std::invalid_argument(st.cfg.checkpoint_path + " holds " +
                                describe_run(m, cut, n) + "; this job is " +
                                describe_run(st.method, st.cfg.cut, st.clients.size()) +
                                " (resume with the same --method, --cut and clients)");
  }
  st.total.up = static_cast<int64_t>(t(3));
  st.total.down = static_cast<int64_t>(t(4));
  st.total.client_flops = t(5);
  st.total.server_flops = t(6);
  st.train_s_before = t(7);
  st.orch = split::orchestrator(n);
  st.orch.total_picks = static_cast<int64_t>(t(8));
  for (auto& p : stats.layers[0].params) {
    auto v = p.tensor.to(torch::kFloat64).contiguous();
    for (int64_t i = 0; i < v.numel() && i < static_cast<int64_t>(n); ++i) {
      if (p.name == "orchestrator_loss") {
        st.orch.loss[i] = v[i].item<double>();
      } else if (p.name == "orchestrator_picks") {
        st.orch.picks[i] = static_cast<int64_t>(v[i].item<double>());
      }
    }
  }
  st.round = ckpt.epoch;
  st.resume_snap = ckpt.snapshot;
  // the client side of the whole model: vanilla's and splitfed's one model
  auto whole = untagged(ckpt.snapshot);
  st.client_model = whole;
  st.client_model.layers.clear();
  for (auto& lw : whole.layers) {
    if (lw.index < static_cast<uint32_t>(st.cfg.cut)) {
      st.client_model.layers.push_back(lw);
    }
  }
}

split_task make_task(self_ptr self, uint32_t c, uint64_t round,
                     const std::vector<uint8_t>& send) {
  auto& st = self->state;
  auto& e = st.clients[c];
  split_task t;
  t.round = round;
  t.server = caf::actor_cast<caf::actor>(st.server);
  t.local_loss = ada(st);
  t.send = send;
  if (!ada(st)) {
    t.weights.snapshot = st.client_model;
  } else if (!e.holds_weights && !e.weights.layers.empty()) {
    t.weights.snapshot = e.weights; // a client started again: its own last weights
  }
  e.weights_sent_bytes =
      t.weights.snapshot.layers.empty() ? 0 : t.weights.snapshot.bytes();
  // counted when sent: a turn that fails later still cost them
  e.traffic.down += e.weights_sent_bytes;
  st.total.down += e.weights_sent_bytes;
  e.last_heard = clock::now();
  return t;
}

std::string contributions(const split_job_state& st) {
  std::string out;
  for (size_t i = 0; i < st.clients.size(); ++i) {
    auto& c = st.clients[i];
    std::string what = !c.handle || st.nodes[i].dead                ? "down"
                       : st.pending.count(static_cast<uint32_t>(i)) ? "training"
                       : c.rounds_done > 0
                           ? fmt::format("{}/{} sent", c.last_sent, c.last_batches)
                           : "-";
    out += fmt::format("{}{}:{}", out.empty() ? "" : " ", st.nodes[i].name, what);
  }
  return out;
}

bool budget_spent(const split_job_state& st) {
  return st.cfg.time_budget_s > 0 && st.training_started &&
         train_time(st) >= st.cfg.time_budget_s;
}

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

bool available(const split_job_state& st, uint32_t c) {
  return st.clients[c].handle && st.clients[c].ready && !st.nodes[c].dead;
}

void start_round(self_ptr self);

// Runs `f`; what it throws (a diverging run's numbers, a snapshot that does
// not fit) fails the job with why, instead of killing the supervisor.
template <class F> void guarded(self_ptr self, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    fail(self, std::string("split job: ") + e.what());
  }
}

// The clients' weights, averaged weighted by their examples (FedAvg); every
// entry of the snapshots, tagged ones (adasplit's heads) included.
models::weight_snapshot average(const std::vector<split_result>& results) {
  std::vector<int64_t> samples;
  for (auto& r : results) {
    samples.push_back(r.samples);
  }
  auto w = split::sample_weights(samples);
  auto avg = results[0].weights.snapshot;
  for (size_t l = 0; l < avg.layers.size(); ++l) {
    for (size_t p = 0; p < avg.layers[l].params.size(); ++p) {
      torch::Tensor sum;
      for (size_t k = 0; k < results.size(); ++k) {
        auto& t = results[k].weights.snapshot.layers.at(l).params.at(p).tensor;
        sum = k == 0 ? t * w[k] : sum + t * w[k];
      }
      avg.layers[l].params[p].tensor = sum;
    }
    for (size_t b = 0; b < avg.layers[l].buffers.size(); ++b) {
      if (!avg.layers[l].buffers[b].tensor.is_floating_point()) {
        continue; // BatchNorm's batch counter: the first client's
      }
      torch::Tensor sum;
      for (size_t k = 0; k < results.size(); ++k) {
        auto& t = results[k].weights.snapshot.layers.at(l).buffers.at(b).tensor;
        sum = k == 0 ? t * w[k] : sum + t * w[k];
      }
      avg.layers[l].buffers[b].tensor = sum;
    }
  }
  return avg;
}

// The round's results are in and the server's state fetched: average or
// keep, evaluate, checkpoint, log, go on.
void round_complete(self_ptr self) {
  auto& st = self->state;
  auto round_s = since(st.round_started);
  if (st.arrived.empty()) {
    // every client failed or went: the round does not count
    st.in_round = false;
    st.finishing = false;
    nlohmann::json failed = st.failed;
    st.failed.clear();
    log_event(self, "round_void", {{"round", st.round + 1}, {"failed", failed}});
    if (++st.void_rounds >= 3) {
      fail(self, "3 rounds in a row in which no client finished; last: " +
                     (st.last_client_error.empty() ? std::string("every client was lost")
                                                   : st.last_client_error));
      return;
    }
    start_round(self);
    return;
  }
  st.void_rounds = 0;
  if (st.method == split::method::splitfed && !st.arrived.empty()) {
    st.client_model = untagged(average(st.arrived));
  }
  if (ada(st) && st.cfg.average_clients && st.status.split_phase == "global" &&
      !st.arrived.empty()) {
    // every client starts the next round from the average (heads included)
    auto avg = average(st.arrived);
    for (auto& c : st.clients) {
      c.weights = avg;
      c.holds_weights = false;
    }
  }
  ++st.round;
  evaluate(self);
  if (!st.cfg.checkpoint_path.empty()) {
    try {
      save(st, st.cfg.checkpoint_path);
    } catch (const std::exception& e) {
      fail(self, std::string("cannot write the checkpoint: ") + e.what());
      return;
    }
  }
  fill_traffic(st.status, st.total);
  st.status.round = static_cast<int64_t>(st.round);
  st.status.round_s = round_s;
  st.status.contributed = static_cast<int64_t>(st.arrived.size());
  nlohmann::json clients = nlohmann::json::array();
  nlohmann::json density = nlohmann::json::array();
  for (auto& r : st.arrived) {
    auto& c = st.clients[r.client];
    clients.push_back({{"client", r.client},
                       {"node", st.nodes[r.client].name},
                       {"batches", r.batches},
                       {"sent", r.sent},
                       {"loss", r.loss},
                       {"server_loss", r.server_loss},
                       {"bytes", r.bytes_up + r.bytes_down + c.weights_sent_bytes},
                       {"device_s", r.device_s}});
  }
  if (ada(st)) {
    for (uint32_t c = 0; c < st.clients.size(); ++c) {
      density.push_back(mask_density(st.server_snap, c));
    }
  }
  nlohmann::json failed = st.failed;
  log_event(self, "round",
            {{"round", st.round},
             {"accuracy", st.status.test_accuracy},
             {"loss", st.status.loss},
             {"phase", st.status.split_phase},
             {"round_s", round_s},
             {"train_s", train_time(st)},
             {"bytes", st.total.bytes()},
             {"bytes_up", st.total.up},
             {"bytes_down", st.total.down},
             {"client_flops", st.total.client_flops},
             {"server_flops", st.total.server_flops},
             {"c3", c3_of(st.status, st.cfg.budget)},
             {"clients", clients},
             {"client_accuracy", st.client_accuracy},
             {"mask_density", density},
             {"failed", failed}});
  log()->info("round {}/{}: accuracy {:.2f}%, {} across the cut so far", st.round,
              st.cfg.rounds, 100 * st.status.test_accuracy,
              models::format_bytes(static_cast<double>(st.total.bytes())));
  st.arrived.clear();
  st.failed.clear();
  st.in_round = false;
  st.finishing = false;
  if (static_cast<int64_t>(st.round) >= st.cfg.rounds) {
    end(self, "finished", "");
    return;
  }
  if (!ended_by_budget(self)) {
    start_round(self);
  }
}

// Every result of the round is in: fetch the server's state, then go on.
void finish_round(self_ptr self) {
  auto& st = self->state;
  if (!st.in_round || st.finishing) {
    return;
  }
  st.finishing = true;
  self->request(st.server, st.cfg.node_timeout, snapshot_atom_v)
      .then(
          [=](snapshot_payload& p) {
            if (over(self->state)) {
              return;
            }
            self->state.server_snap = std::move(p.snapshot);
            guarded(self, [&] { round_complete(self); });
          },
          [=](caf::error& err) {
            fail(self, "the split server did not answer: " + self->system().render(err));
          });
}

// vanilla: the next client's turn, or the round's end.
void next_turn(self_ptr self) {
  auto& st = self->state;
  while (st.turn < st.turns.size()) {
    auto c = st.turns[st.turn++];
    if (!available(st, c)) {
      continue;
    }
    st.pending.insert(c);
    self->send(st.clients[c].handle, round_atom_v, make_task(self, c, st.round + 1, {}));
    return;
  }
  finish_round(self);
}

void check_round(self_ptr self) {
  auto& st = self->state;
  if (!st.in_round || st.finishing || !st.pending.empty()) {
    return;
  }
  if (st.method == split::method::vanilla) {
    next_turn(self);
  } else {
    finish_round(self);
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
  if (static_cast<int64_t>(st.round) >= st.cfg.rounds) {
    end(self, "finished", ""); // resumed with every round done already
    return;
  }
  std::vector<uint32_t> ready;
  for (uint32_t c = 0; c < st.clients.size(); ++c) {
    if (available(st, c)) {
      ready.push_back(c);
    }
  }
  if (ready.empty()) {
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
  auto round = st.round + 1;
  st.in_round = true;
  st.round_started = clock::now();
  st.arrived.clear();
  st.failed.clear();
  bool local = ada(st) && split::in_local_phase(static_cast<int64_t>(round),
                                                st.cfg.rounds, st.cfg.local_fraction);
  st.status.split_phase = !ada(st) ? "" : local ? "local" : "global";
  nlohmann::json sends = nlohmann::json::object();
  if (st.method == split::method::vanilla) {
    st.turns = ready;
    st.turn = 0;
    log_event(self, "round_start", {{"round", round}, {"turns", ready}});
    next_turn(self);
    return;
  }
  std::vector<std::vector<uint8_t>> plan(st.clients.size());
  if (ada(st) && !local) {
    std::vector<int64_t> batches(st.clients.size(), 0);
    for (auto c : ready) {
      batches[c] =
          algorithms::batches_per_epoch(st.clients[c].samples, st.cfg.batch_size, false);
    }
    plan = split::plan_sends(batches, st.cfg.client_fraction, st.cfg.explore, st.orch);
    for (auto c : ready) {
      sends[std::to_string(c)] = std::count(plan[c].begin(), plan[c].end(), uint8_t{1});
    }
  }
  for (auto c : ready) {
    st.pending.insert(c);
    self->send(st.clients[c].handle, round_atom_v, make_task(self, c, round, plan[c]));
    st.clients[c].holds_weights = true;
  }
  log_event(self, "round_start",
            {{"round", round},
             {"clients", ready},
             {"phase", st.status.split_phase},
             {"sends", sends}});
}

void on_result(self_ptr self, split_result& r) {
  auto& st = self->state;
  if (over(st) || r.client >= st.clients.size()) {
    return;
  }
  auto& c = st.clients[r.client];
  if (!c.handle ||
      caf::actor_cast<caf::strong_actor_ptr>(c.handle) != self->current_sender()) {
    return; // a client of before (killed, replaced): its work is void
  }
  if (!st.in_round || st.finishing || r.round != st.round + 1 ||
      !st.pending.count(r.client)) {
    log()->debug("dropped a late result of client {} (round {})", r.client, r.round);
    return;
  }
  st.pending.erase(r.client);
  if (!r.error.empty()) {
    log()->warn("{}", r.error);
    st.last_client_error = r.error;
    st.failed.push_back(r.client);
    c.failures++;
    c.last_error = r.error;
    c.holds_weights = false;
    check_round(self);
    return;
  }
  split::traffic t;
  t.up = r.bytes_up + r.weights.snapshot.bytes();
  t.down = r.bytes_down; // (the weights sent down were counted when sent)
  t.client_flops = r.client_flops;
  t.server_flops =
      3 * st.costs.server_forward_flops * static_cast<double>(r.sent_samples);
  c.traffic += t;
  st.total += t;
  fill_traffic(st.status, st.total);
  c.samples = r.samples;
  c.rounds_done++;
  c.failures = 0;
  c.last_loss = r.loss;
  c.last_server_loss = r.server_loss;
  c.last_sent = r.sent;
  c.last_batches = r.batches;
  if (ada(st)) {
    c.weights = r.weights.snapshot;
    if (r.sent > 0 && std::isfinite(r.server_loss)) {
      split::observe_loss(st.orch, r.client, r.server_loss, st.cfg.loss_decay);
    }
  } else if (st.method == split::method::vanilla) {
    st.client_model = untagged(r.weights.snapshot); // handed on to the next turn
  }
  st.status.loss = r.loss;
  st.arrived.push_back(std::move(r));
  check_round(self);
}

void settle_first(self_ptr self, uint32_t client);

// A client is gone (its node, itself, or hung): out of the round in hand.
void client_gone(self_ptr self, uint32_t client, const std::string& why) {
  auto& st = self->state;
  auto& c = st.clients[client];
  if (c.handle) {
    self->send_exit(c.handle, caf::exit_reason::kill);
  }
  c.handle = nullptr;
  c.ready = false;
  c.spawning = false;
  c.holds_weights = false;
  c.attempt++;
  c.retry_at = std::max(c.retry_at, clock::now() + respawn_wait);
  if (st.pending.erase(client) > 0) {
    st.failed.push_back(client);
    log()->warn("client {} ({}) is out of round {}: {}", client, st.nodes[client].name,
                st.round + 1, why);
    log_event(self, "client_out",
              {{"client", client}, {"node", st.nodes[client].name}, {"why", why}});
    check_round(self);
  }
  settle_first(self, client);
}

split_client_spec client_spec(const split_job_state& st, uint32_t client) {
  split_client_spec s;
  s.client = client;
  s.clients = static_cast<uint32_t>(st.clients.size());
  s.model = st.desc.spec.canonical();
  s.fingerprint = st.desc.fingerprint;
  s.cut = static_cast<uint32_t>(st.cfg.cut);
  s.method = split::to_string(st.method);
  s.dataset = st.cfg.dataset;
  s.data_dir = st.cfg.data_dir;
  s.alpha = st.cfg.alpha;
  s.seed = st.cfg.seed;
  s.batch_size = st.cfg.batch_size;
  s.optimizer = st.cfg.optimizer;
  s.lr = st.cfg.lr;
  s.momentum = st.cfg.momentum;
  s.threads = st.cfg.threads;
  s.max_samples = st.cfg.max_samples;
  return s;
}

split_client_entry* answered(self_ptr self, uint32_t client, uint64_t attempt) {
  auto& st = self->state;
  auto& c = st.clients[client];
  return over(st) || c.attempt != attempt ? nullptr : &c;
}

// The first spawns: training starts once every client of the start is
// ready, failed or gone; later ones join the round after theirs.
void settle_first(self_ptr self, uint32_t client) {
  auto& st = self->state;
  auto& c = st.clients[client];
  if (!c.first_pending) {
    return;
  }
  c.first_pending = false;
  if (st.phase == "spawning" && st.first_pending > 0 && --st.first_pending == 0) {
    start_round(self);
  }
}

void client_failed(self_ptr self, uint32_t client, const std::string& why) {
  roster::spawn_failed(self->state.clients[client], why);
}

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
            cp->spawning = false;
            cp->handle = caf::actor_cast<split_client_actor>(a);
            self->monitor(a);
            self->request(cp->handle, self->state.cfg.profile_timeout, caf::get_atom_v)
                .then(
                    [=](int64_t samples) {
                      auto* cp = answered(self, client, attempt);
                      if (!cp) {
                        return;
                      }
                      cp->samples = samples;
                      cp->ready = true;
                      cp->failures = 0;
                      log()->info("client {} on {}: {} examples", client,
                                  self->state.nodes[client].name, samples);
                      settle_first(self, client);
                    },
                    [=](caf::error& err) {
                      if (!answered(self, client, attempt)) {
                        return;
                      }
                      auto why = self->system().render(err);
                      log()->warn("client {} cannot start: {}", client, why);
                      client_gone(self, client, why);
                      client_failed(self, client, why);
                    });
          },
          [=](caf::error& err) {
            auto* cp = answered(self, client, attempt);
            if (!cp) {
              return;
            }
            cp->spawning = false;
            auto why = self->system().render(err);
            log()->warn("cannot start client {} on {}: {}", client,
                        self->state.nodes[client].name, why);
            client_failed(self, client, why);
            settle_first(self, client);
          });
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  if (over(st)) {
    return;
  }
  self->delayed_send(self, tick_period, tick_atom_v);
  if (st.phase == "starting" || st.phase == "spawning" || !st.stop_requested.empty()) {
    return;
  }
  if (ended_by_budget(self)) {
    return;
  }
  if (roster::hopeless(st, [](auto& c) { return c.ready; })) {
    std::string why;
    for (size_t i = 0; i < st.clients.size(); ++i) {
      if (!st.clients[i].last_error.empty()) {
        why = st.nodes[i].name + ": " + st.clients[i].last_error;
      }
    }
    fail(self, "no client could start (3 attempts on every node); last: " + why);
    return;
  }
  // hung clients: silent for too long in the round in hand
  std::vector<uint32_t> hung;
  for (auto c : st.pending) {
    if (since(st.clients[c].last_heard) > st.cfg.stall_s) {
      hung.push_back(c);
    }
  }
  for (auto c : hung) {
    client_gone(self, c,
                fmt::format("no progress for {:.0f} s (hung?); it is started again",
                            st.cfg.stall_s));
  }
  for (uint32_t i = 0; i < st.clients.size(); ++i) {
    auto& c = st.clients[i];
    if (!c.handle && !c.spawning && !st.nodes[i].dead && clock::now() >= c.retry_at) {
      log()->info("starting client {} on {} again", i, st.nodes[i].name);
      spawn_client(self, i);
    }
  }
  start_round(self);
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
  s.round = static_cast<int64_t>(st.round);
  s.plan = contributions(st);
  fill_traffic(s, st.total);
  s.clients = 0;
  s.nodes.clear();
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    auto row = basic_row(st.nodes[i], i, {}, 0);
    if (i < st.clients.size()) {
      auto& c = st.clients[i];
      bool up = c.handle && !st.nodes[i].dead;
      s.clients += up ? 1 : 0;
      row.role =
          !up ? fmt::format("client {}: down", i)
          : !c.ready
              ? fmt::format("client {}: starting", i)
              : fmt::format("client {}: {} rounds, {} across the cut", i, c.rounds_done,
                            models::format_bytes(static_cast<double>(c.traffic.bytes())));
    } else {
      row.role = "unused (joined after the shards were drawn)";
    }
    s.nodes.push_back(row);
  }
}

void on_down(self_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  if (st.server && st.server.address() == dm.source) {
    st.server = nullptr;
    fail(self, "the split server went down: " + self->system().render(dm.reason));
    return;
  }
  for (uint32_t i = 0; i < st.clients.size(); ++i) {
    if (st.clients[i].handle && st.clients[i].handle.address() == dm.source) {
      st.clients[i].handle = nullptr; // gone already: nothing to kill
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
    return caf::make_error(errc::bad_config, "the split job has ended");
  }
  st.stop_requested = why.empty() ? std::string("stop") : why;
  st.status.stopped = st.stop_requested;
  log_event(self, "stop", {{"why", st.stop_requested}});
  end(self, "finished", "");
  return "stopped after round " + std::to_string(st.round) +
         " (the round in hand is dropped; the checkpoint holds the last whole round)";
}

// The clients' entries, with what a resumed job starts them from.
void prepare_clients(self_ptr self) {
  auto& st = self->state;
  st.clients.resize(st.nodes.size()); // resumed: as many as the checkpoint's (checked)
  if (st.orch.loss.size() != st.clients.size()) {
    st.orch = split::orchestrator(st.clients.size());
  }
  for (uint32_t i = 0; i < st.clients.size(); ++i) {
    if (ada(st)) {
      auto saved = take_tagged(st.resume_snap, "client" + std::to_string(i));
      st.clients[i].weights = saved.layers.empty() ? st.client_model : saved;
    }
  }
  evaluate(self); // resumed: what the checkpoint holds (else nothing yet)
}

void first_clients(self_ptr self) {
  auto& st = self->state;
  set_phase(self, "spawning");
  st.first_pending = 0;
  for (uint32_t i = 0; i < st.nodes.size(); ++i) {
    if (!st.nodes[i].dead) {
      ++st.first_pending;
      st.clients[i].first_pending = true;
      spawn_client(self, i);
    }
  }
  if (st.first_pending == 0) {
    fail(self, "no node can run a client");
  }
}

// The seed's client-side weights (adasplit: with a zero auxiliary head, as
// every client starts).
models::weight_snapshot initial_client_side(const split_job_state& st) {
  models::layered_model init(st.desc, st.cfg.seed, 0, static_cast<size_t>(st.cfg.cut));
  auto snap = models::capture(init, nullptr, "", 0);
  if (ada(st)) {
    models::weight_snapshot head;
    models::layer_weights lw;
    lw.name = "aux";
    auto in = st.costs.activation_bytes / 4;
    lw.params.push_back({"weight", torch::zeros({st.desc.classes, in})});
    lw.params.push_back({"bias", torch::zeros({st.desc.classes})});
    head.layers.push_back(std::move(lw));
    add_tagged(snap, "aux", head);
  }
  return snap;
}

void check_config(const split_config& c) {
  if (c.rounds < 1) {
    throw std::invalid_argument("--rounds must be at least 1, got " +
                                std::to_string(c.rounds));
  }
  if (c.batch_size < 1) {
    throw std::invalid_argument("--batch-size must be at least 1");
  }
  if (c.local_fraction < 0 || c.local_fraction > 1) {
    throw std::invalid_argument("--local-fraction must be in [0, 1], got " +
                                fmt::format("{}", c.local_fraction));
  }
  if (!(c.client_fraction > 0 && c.client_fraction <= 1)) {
    throw std::invalid_argument("--client-fraction must be in (0, 1], got " +
                                fmt::format("{}", c.client_fraction));
  }
  if (c.stall_s <= 0) {
    throw std::invalid_argument("--stall must be positive");
  }
  if (c.mask_lr < 0 || c.mask_l1 < 0) {
    throw std::invalid_argument("--mask-lr and --mask-l1 must not be negative");
  }
  if (c.budget.bytes <= 0 || c.budget.client_flops <= 0) {
    throw std::invalid_argument("the C3 budgets must be positive");
  }
  if (c.resume && c.checkpoint_path.empty()) {
    throw std::invalid_argument("--resume needs --checkpoint PATH");
  }
}

} // namespace

double c3_of(const job_status& s, const split::c3_budget& budget) {
  if (s.test_accuracy < 0) {
    return 0;
  }
  return split::c3_score(s.test_accuracy, static_cast<double>(s.bytes_up + s.bytes_down),
                         s.client_flops, budget);
}

split_job_actor::behavior_type
split_job(split_job_actor::stateful_pointer<split_job_state> self, split_config cfg,
          cluster_actor cluster) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.cluster = std::move(cluster);
  st.started = clock::now();
  st.status.mode = "split";
  st.status.strategy = st.cfg.method;
  st.status.rounds = st.cfg.rounds;
  set_phase(self, "starting");
  self->set_down_handler([=](caf::down_msg& dm) { on_down(self, dm); });
  bool ok = true;
  try {
    check_config(st.cfg);
    st.method = split::parse_method(st.cfg.method);
    st.desc = models::describe(models::model_spec::parse(st.cfg.model));
    check_cut(st.desc, st.cfg.cut);
    st.costs = costs_of(st.desc, static_cast<size_t>(st.cfg.cut));
    models::check_fits(st.cfg.dataset, st.desc);
    auto test = models::load_dataset(st.cfg.dataset, false, st.desc, st.cfg.data_dir);
    if (st.cfg.test_samples > 0 && st.cfg.test_samples < test.size()) {
      test.images = test.images.narrow(0, 0, st.cfg.test_samples);
      test.labels = test.labels.narrow(0, 0, st.cfg.test_samples);
    }
    st.test = std::make_shared<const models::dataset>(std::move(test));
    st.client_model = initial_client_side(st);
    models::weight_snapshot server_start;
    if (st.cfg.resume) {
      auto ckpt = messages::load_checkpoint(st.cfg.checkpoint_path, st.desc.fingerprint);
      resume_from(st, ckpt); // checks method, cut; clients once the nodes are known
      server_start = ckpt.snapshot;
      if (ada(st)) {
        // keep the seed's head in the shared model (clients bring their own)
        auto head = take_tagged(initial_client_side(st), "aux");
        add_tagged(st.client_model, "aux", head);
      }
      log()->info("resuming from {}: round {} ({})", st.cfg.checkpoint_path, st.round,
                  ckpt.note);
    }
    if (!st.cfg.metrics_path.empty()) {
      st.metrics = std::make_shared<metrics_log>(st.cfg.metrics_path);
      st.status.metrics_path = st.cfg.metrics_path;
    }
    st.server_snap = std::move(server_start);
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
              split_server_config sc;
              sc.model = st.desc.spec.canonical();
              sc.cut = static_cast<uint32_t>(st.cfg.cut);
              sc.method = split::to_string(st.method);
              sc.clients = static_cast<uint32_t>(members.size());
              sc.seed = st.cfg.seed;
              sc.optimizer = st.cfg.optimizer;
              sc.lr = st.cfg.lr;
              sc.momentum = st.cfg.momentum;
              sc.mask_lr = st.cfg.mask_lr;
              sc.mask_l1 = st.cfg.mask_l1;
              sc.threads = st.cfg.threads;
              try {
                if (st.cfg.resume && !st.resume_snap.layers.empty()) {
                  auto n = st.resume_clients;
                  if (n != members.size()) {
                    throw std::invalid_argument(
                        st.cfg.checkpoint_path + " holds a split job over " +
                        std::to_string(n) + " clients; this cluster has " +
                        std::to_string(members.size()) + " nodes");
                  }
                }
                st.server = self->spawn(split_server, sc, st.server_snap);
                self->monitor(st.server);
              } catch (const std::exception& e) {
                fail(self, std::string("cannot start the split server: ") + e.what());
                return;
              }
              try {
                prepare_clients(self);
              } catch (const std::exception& e) {
                fail(self, std::string("cannot resume: ") + e.what());
                return;
              }
              log_event(
                  self, "start",
                  {{"mode", "split"},
                   {"method", st.cfg.method},
                   {"model", st.desc.spec.canonical()},
                   {"cut", st.cfg.cut},
                   {"activation_bytes", st.costs.activation_bytes},
                   {"nodes", names},
                   {"rounds", st.cfg.rounds},
                   {"alpha", st.cfg.alpha},
                   {"seed", st.cfg.seed},
                   {"local_fraction", st.cfg.local_fraction},
                   {"client_fraction", st.cfg.client_fraction},
                   {"average_clients", st.cfg.average_clients},
                   {"budget_bytes", st.cfg.budget.bytes},
                   {"budget_flops", st.cfg.budget.client_flops},
                   {"resumed_at", st.round},
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
        if (resumed) {
          start_round(self);
        }
        return answer;
      },
      [=](checkpoint_atom, std::string& path) -> caf::result<std::string> {
        auto& st = self->state;
        if (path.empty()) {
          return caf::make_error(errc::bad_config, "checkpoint save needs a PATH");
        }
        if (st.server_snap.layers.empty()) {
          return caf::make_error(errc::bad_config,
                                 "no round has finished yet: nothing to checkpoint");
        }
        try {
          save(st, path);
        } catch (const std::exception& e) {
          return caf::make_error(errc::bad_config, e.what());
        }
        return "wrote the split job's state after round " + std::to_string(st.round) +
               " to " + path;
      },
      [=](stop_atom, const std::string& why) { return on_stop(self, why); },
      [=](lost_atom, uint32_t node, std::string& why) { on_node_lost(self, node, why); },
      [=](join_atom, uint32_t node, cluster_member& m) {
        auto& st = self->state;
        return roster::node_joined(st, over(st), "split", node, m);
      },
      [=](capacity_atom, const std::string&, double) {},
      [=](event_atom, const std::string& kind, const std::string& fields) {
        log_event(self, kind, nlohmann::json::parse(fields, nullptr, false));
      },
      [=](leave_atom) {
        stop_workers(self);
        if (self->state.metrics) {
          self->state.metrics->flush();
        }
        self->quit();
      },
      [=](update_atom, split_result& r) { guarded(self, [&] { on_result(self, r); }); },
      [=](progress_atom, uint32_t client, uint64_t round, int64_t) {
        auto& st = self->state;
        if (client < st.clients.size() && round == st.round + 1) {
          st.clients[client].last_heard = clock::now();
        }
      },
      [=](tick_atom) { guarded(self, [&] { on_tick(self); }); },
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
                               "a split job has no pipeline to re-plan: the cut (--cut) "
                               "is fixed for the job");
      },
      [=](replicate_atom) -> caf::result<std::string> {
        return caf::make_error(errc::bad_config,
                               "a split job checkpoints the server and every client-side "
                               "model after each round (--checkpoint)");
      },
      [=](snapshot_atom) -> caf::result<snapshot_payload> {
        auto& st = self->state;
        if (st.server_snap.layers.empty()) {
          return caf::make_error(errc::bad_config, "no round has finished yet");
        }
        return snapshot_payload{whole_model(st, 0)};
      },
  };
}

job_result run_split_job(caf::actor_system& sys, const split_config& cfg,
                         std::vector<remote_node> nodes, const job_options& opts) {
  auto cluster = sys.spawn(cluster_supervisor, cluster_config_for(cfg), std::move(nodes));
  auto job = sys.spawn(split_job, cfg, cluster);
  return run_to_end(sys, caf::actor_cast<caf::actor>(job), cluster, cfg.node_timeout,
                    opts);
}

} // namespace salamander::actors
