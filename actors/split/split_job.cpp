// The split-learning job's behaviour: the server and the clients spawned,
// rounds (turns in vanilla), results in, client models handed on, averaged
// or kept, evaluation, checkpoints, faults and the console's commands.
#include "actors/split/split_job.hpp"
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
using self_ptr = split_job_actor::stateful_pointer<split_job_state>;

auto log() {
  return subsystem_log("split");
}

split_client_actor client(const split_job_state& st, uint32_t c) {
  return caf::actor_cast<split_client_actor>(st.core.clients[c].handle);
}

const std::string& node_name(const split_job_state& st, uint32_t c) {
  return st.core.nodes[st.core.clients[c].node].name;
}

bool ada(const split_job_state& st) {
  return st.method == split::method::adasplit;
}

void fill_traffic(job_status& s, const split::traffic& t) {
  s.rounds.bytes_up = t.up;
  s.rounds.bytes_down = t.down;
  s.rounds.client_flops = t.client_flops;
  s.rounds.server_flops = t.server_flops;
}

// The client-side model of client c as the job keeps it.
const models::weight_snapshot& client_side(const split_job_state& st, uint32_t c) {
  return ada(st) ? st.info[c].weights : st.client_model;
}

// The whole model client c ends up with: its client side and the server's
// layers as it sees them (adasplit: through its mask).
models::weight_snapshot whole_model(const split_job_state& st, uint32_t c) {
  auto snap = untagged(client_side(st, c));
  for (auto& lw : server_view(st.server_snap, c, st.cfg.mask_keep).layers) {
    if (lw.index >= static_cast<uint32_t>(st.cfg.cut)) { // a checkpoint holds all layers
      snap.layers.push_back(lw);
    }
  }
  snap.version = st.round;
  return snap;
}

// Snapshots of one shape averaged weighted by examples (FedAvg); every
// entry, tagged ones (adasplit's heads) included.
models::weight_snapshot average(const std::vector<const models::weight_snapshot*>& snaps,
                                const std::vector<int64_t>& samples) {
  auto w = split::sample_weights(samples);
  auto avg = *snaps[0];
  for (size_t l = 0; l < avg.layers.size(); ++l) {
    for (size_t p = 0; p < avg.layers[l].params.size(); ++p) {
      torch::Tensor sum;
      for (size_t k = 0; k < snaps.size(); ++k) {
        auto& t = snaps[k]->layers.at(l).params.at(p).tensor;
        sum = k == 0 ? t * w[k] : sum + t * w[k];
      }
      avg.layers[l].params[p].tensor = sum;
    }
    for (size_t b = 0; b < avg.layers[l].buffers.size(); ++b) {
      if (!avg.layers[l].buffers[b].tensor.is_floating_point()) {
        continue; // BatchNorm's batch counter: the first client's
      }
      torch::Tensor sum;
      for (size_t k = 0; k < snaps.size(); ++k) {
        auto& t = snaps[k]->layers.at(l).buffers.at(b).tensor;
        sum = k == 0 ? t * w[k] : sum + t * w[k];
      }
      avg.layers[l].buffers[b].tensor = sum;
    }
  }
  return avg;
}

// The shared model of adasplit: the clients' sides averaged by examples
// and the server's layers unmasked; what compares like for like with the
// one model of vanilla and splitfed.
models::weight_snapshot shared_model(const split_job_state& st,
                                     const std::vector<uint32_t>& who) {
  std::vector<models::weight_snapshot> sides;
  std::vector<int64_t> samples;
  for (auto c : who) {
    sides.push_back(untagged(client_side(st, c)));
    samples.push_back(std::max<int64_t>(1, st.info[c].samples));
  }
  std::vector<const models::weight_snapshot*> snaps;
  for (auto& s : sides) {
    snaps.push_back(&s);
  }
  auto snap = average(snaps, samples);
  for (auto& lw : untagged(st.server_snap).layers) {
    if (lw.index >= static_cast<uint32_t>(st.cfg.cut)) {
      snap.layers.push_back(lw);
    }
  }
  snap.version = st.round;
  return snap;
}

models::eval_stats evaluate_snapshot(split_job_state& st,
                                     const models::weight_snapshot& snap) {
  models::restore(*st.eval_model, nullptr, snap);
  auto net = st.eval_model->all();
  return models::evaluate(net, *st.test, 1000);
}

// Accuracy of what the clients end up with on the test split, three ways
// (issue 29):
//   test_accuracy  the one model of vanilla and splitfed; in adasplit each
//                  client's own (its client side and its mask), averaged
//                  weighted by the clients' examples
//   shared         the one model; in adasplit shared_model()
//   personal[c]    client c's model (the one model, or its own) on the test
//                  split weighed to c's labels: the accuracy on its own
//                  distribution
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
    for (uint32_t c = 0; c < st.info.size(); ++c) {
      if (!st.info[c].weights.layers.empty()) {
        who.push_back(c);
      }
    }
  } else {
    who.push_back(0);
  }
  double acc = 0, loss = 0, weight = 0;
  st.client_accuracy.assign(st.info.size(), -1);
  st.personal_accuracy.assign(st.info.size(), -1);
  for (auto c : who) {
    auto r = evaluate_snapshot(st, whole_model(st, c));
    double w =
        ada(st) ? static_cast<double>(std::max<int64_t>(1, st.info[c].samples)) : 1;
    acc += w * r.accuracy();
    loss += w * r.mean_loss;
    weight += w;
    if (ada(st)) {
      st.client_accuracy[c] = r.accuracy();
      st.personal_accuracy[c] = r.weighted_accuracy(st.info[c].labels);
    } else {
      // the one model, on each client's distribution
      for (uint32_t k = 0; k < st.info.size(); ++k) {
        st.personal_accuracy[k] = r.weighted_accuracy(st.info[k].labels);
      }
      st.shared_accuracy = r.accuracy();
    }
  }
  if (ada(st) && !who.empty()) {
    st.shared_accuracy = evaluate_snapshot(st, shared_model(st, who)).accuracy();
  }
  if (weight > 0) {
    st.core.status.test_accuracy = acc / weight;
    st.core.status.loss = loss / weight;
  }
  if (st.core.training_started) {
    st.core.eval_s += since(t0);
  }
}

// The job's counters and the orchestrator, as one tagged entry.
models::weight_snapshot stats_part(const split_job_state& st) {
  models::weight_snapshot part;
  models::layer_weights lw;
  lw.name = "stats";
  std::vector<double> totals = {static_cast<double>(st.method),
                                static_cast<double>(st.cfg.cut),
                                static_cast<double>(st.info.size()),
                                static_cast<double>(st.total.up),
                                static_cast<double>(st.total.down),
                                st.total.client_flops,
                                st.total.server_flops,
                                st.core.train_time(),
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
    for (uint32_t i = 0; i < st.info.size(); ++i) {
      if (!st.info[i].weights.layers.empty()) {
        add_tagged(c.snapshot, "client" + std::to_string(i), st.info[i].weights);
      }
    }
  }
  add_tagged(c.snapshot, "stats", stats_part(st));
  c.seed = st.cfg.seed;
  c.epoch = st.round;
  c.note = fmt::format("{}, round {}; {:.1f} s of training",
                       describe_run(st.method, st.cfg.cut, st.info.size()), st.round,
                       st.core.train_time());
  c.train_s = st.core.train_time();
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
      (n != st.info.size() && !st.info.empty())) {
    throw std::invalid_argument(st.cfg.checkpoint_path + " holds " +
                                describe_run(m, cut, n) + "; this job is " +
                                describe_run(st.method, st.cfg.cut, st.info.size()) +
                                " (resume with the same --method, --cut and clients)");
  }
  st.total.up = static_cast<int64_t>(t(3));
  st.total.down = static_cast<int64_t>(t(4));
  st.total.client_flops = t(5);
  st.total.server_flops = t(6);
  st.core.train_s_before = t(7);
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
  auto& e = st.info[c];
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
  e.last_heard = self->clock().now();
  return t;
}

void start_round(self_ptr self);

// The clients' weights, averaged weighted by their examples (FedAvg).
models::weight_snapshot average(const std::vector<split_result>& results) {
  std::vector<const models::weight_snapshot*> snaps;
  std::vector<int64_t> samples;
  for (auto& r : results) {
    snaps.push_back(&r.weights.snapshot);
    samples.push_back(r.samples);
  }
  return average(snaps, samples);
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
    st.core.log_event("round_void", {{"round", st.round + 1}, {"failed", failed}});
    if (++st.void_rounds >= 3) {
      st.core.fail("3 rounds in a row in which no client finished; last: " +
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
  if (ada(st) && st.cfg.average_clients &&
      st.core.status.rounds.split_phase == adasplit_phase::global && !st.arrived.empty()) {
    // every client starts the next round from the average (heads included)
    auto avg = average(st.arrived);
    for (auto& c : st.info) {
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
      st.core.fail(std::string("cannot write the checkpoint: ") + e.what());
      return;
    }
  }
  fill_traffic(st.core.status, st.total);
  st.core.status.rounds.round = static_cast<int64_t>(st.round);
  st.core.status.rounds.round_s = round_s;
  st.core.status.rounds.contributed = static_cast<int64_t>(st.arrived.size());
  nlohmann::json clients = nlohmann::json::array();
  nlohmann::json density = nlohmann::json::array();
  for (auto& r : st.arrived) {
    auto& c = st.info[r.client];
    clients.push_back({{"client", r.client},
                       {"node", node_name(st, r.client)},
                       {"batches", r.batches},
                       {"sent", r.sent},
                       {"loss", r.loss},
                       {"server_loss", r.server_loss},
                       {"bytes", r.bytes_up + r.bytes_down + c.weights_sent_bytes},
                       {"device_s", r.device_s}});
  }
  if (ada(st)) {
    for (uint32_t c = 0; c < st.info.size(); ++c) {
      density.push_back(mask_density(st.server_snap, c, st.cfg.mask_keep));
    }
  }
  nlohmann::json failed = st.failed;
  st.core.log_event("round", {{"round", st.round},
                              {"accuracy", st.core.status.test_accuracy},
                              {"loss", st.core.status.loss},
                              {"phase", to_string(st.core.status.rounds.split_phase)},
                              {"round_s", round_s},
                              {"train_s", st.core.train_time()},
                              {"bytes", st.total.bytes()},
                              {"bytes_up", st.total.up},
                              {"bytes_down", st.total.down},
                              {"client_flops", st.total.client_flops},
                              {"server_flops", st.total.server_flops},
                              {"c3", c3_of(st.core.status, st.cfg.budget)},
                              {"clients", clients},
                              {"client_accuracy", st.client_accuracy},
                              {"shared_accuracy", st.shared_accuracy},
                              {"personal_accuracy", st.personal_accuracy},
                              {"mask_density", density},
                              {"failed", failed}});
  log()->info("round {}/{}: accuracy {:.2f}%, {} across the cut so far", st.round,
              st.cfg.rounds, 100 * st.core.status.test_accuracy,
              models::format_bytes(static_cast<double>(st.total.bytes())));
  st.arrived.clear();
  st.failed.clear();
  st.in_round = false;
  st.finishing = false;
  if (static_cast<int64_t>(st.round) >= st.cfg.rounds) {
    st.core.end(round_event::finish, "");
    return;
  }
  if (!st.core.ended_by_budget()) {
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
            if (self->state.core.over()) {
              return;
            }
            self->state.server_snap = std::move(p.snapshot);
            self->state.core.guarded([&] { round_complete(self); });
          },
          [=](caf::error& err) {
            self->state.core.fail("the split server did not answer: " +
                                  self->system().render(err));
          });
}

// vanilla: the next client's turn, or the round's end.
void next_turn(self_ptr self) {
  auto& st = self->state;
  while (st.turn < st.turns.size()) {
    auto c = st.turns[st.turn++];
    if (!st.core.available(c)) {
      continue;
    }
    st.pending.insert(c);
    send_with_weights(self, client(st, c), round_atom_v, make_task(self, c, st.round + 1, {}),
                      &split_task::weights, st.core.transfers);
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
  if (st.in_round) {
    return;
  }
  auto round = st.round + 1;
  auto ready = st.core.round_sample(round);
  if (!st.core.may_start_round(!ready.empty())) {
    return;
  }
  st.in_round = true;
  st.round_started = clock::now();
  st.arrived.clear();
  st.failed.clear();
  bool local = ada(st) && split::in_local_phase(static_cast<int64_t>(round),
                                                st.cfg.rounds, st.cfg.local_fraction);
  st.core.status.rounds.split_phase = !ada(st) ? adasplit_phase::none
                                      : local   ? adasplit_phase::local
                                                : adasplit_phase::global;
  nlohmann::json sends = nlohmann::json::object();
  if (st.method == split::method::vanilla) {
    st.turns =
        st.cfg.shuffle_turns ? algorithms::turn_order(st.cfg.seed, round, ready) : ready;
    st.turn = 0;
    st.core.log_event("round_start", {{"round", round}, {"turns", st.turns}});
    next_turn(self);
    return;
  }
  std::vector<std::vector<uint8_t>> plan(st.info.size());
  if (ada(st) && !local) {
    std::vector<int64_t> batches(st.info.size(), 0);
    for (auto c : ready) {
      batches[c] =
          algorithms::batches_per_epoch(st.info[c].samples, st.cfg.batch_size, false);
    }
    plan = split::plan_sends(batches, st.cfg.client_fraction, st.cfg.explore, st.orch,
                             st.cfg.send_floor);
    for (auto c : ready) {
      sends[std::to_string(c)] = std::count(plan[c].begin(), plan[c].end(), uint8_t{1});
    }
  }
  for (auto c : ready) {
    st.pending.insert(c);
    send_with_weights(self, client(st, c), round_atom_v, make_task(self, c, round, plan[c]),
                      &split_task::weights, st.core.transfers);
    st.info[c].holds_weights = true;
  }
  st.core.log_event("round_start", {{"round", round},
                                    {"clients", ready},
                                    {"phase", to_string(st.core.status.rounds.split_phase)},
                                    {"sends", sends}});
}

void on_result(self_ptr self, split_result& r) {
  auto& st = self->state;
  if (r.client >= st.info.size()) {
    return;
  }
  auto& c = st.info[r.client];
  auto& slot = st.core.clients[r.client];
  if (!slot.handle ||
      caf::actor_cast<caf::strong_actor_ptr>(slot.handle) != self->current_sender()) {
    return; // a client of before (killed, replaced): its work is void
  }
  if (!take_weights(st.core.inbox, self->current_sender(), r, &split_result::weights) &&
      r.error.empty()) {
    r.error = "client " + std::to_string(r.client) + ": its weights did not arrive whole";
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
    slot.failures++;
    slot.last_error = r.error;
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
  fill_traffic(st.core.status, st.total);
  c.samples = r.samples;
  c.rounds_done++;
  slot.failures = 0;
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
  st.core.status.loss = r.loss;
  st.arrived.push_back(std::move(r));
  check_round(self);
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
  check_round_config(c);
  if (c.local_fraction < 0 || c.local_fraction > 1) {
    throw std::invalid_argument("--local-fraction must be in [0, 1], got " +
                                fmt::format("{}", c.local_fraction));
  }
  if (!(c.client_fraction > 0 && c.client_fraction <= 1)) {
    throw std::invalid_argument("--client-fraction must be in (0, 1], got " +
                                fmt::format("{}", c.client_fraction));
  }
  if (!(c.send_floor >= 0 && c.send_floor <= 1)) {
    throw std::invalid_argument("--send-floor must be in [0, 1], got " +
                                fmt::format("{}", c.send_floor));
  }
  if (c.stall_s <= 0) {
    throw std::invalid_argument("--stall must be positive");
  }
  if (c.mask_lr < 0 || c.mask_l1 < 0) {
    throw std::invalid_argument("--mask-lr and --mask-l1 must not be negative");
  }
  if (!(c.mask_keep > 0 && c.mask_keep <= 1)) {
    throw std::invalid_argument("--mask-keep must be in (0, 1], got " +
                                fmt::format("{}", c.mask_keep));
  }
  if (c.budget.bytes <= 0 || c.budget.client_flops <= 0) {
    throw std::invalid_argument("the C3 budgets must be positive");
  }
}

// The clients' entries, with what a resumed job starts them from.
void prepare_clients(split_job_state& st, size_t clients) {
  st.info.resize(clients); // resumed: as many as the checkpoint's (checked)
  if (st.orch.loss.size() != clients) {
    st.orch = split::orchestrator(clients);
  }
  for (uint32_t i = 0; i < clients; ++i) {
    if (ada(st)) {
      auto saved = take_tagged(st.resume_snap, "client" + std::to_string(i));
      st.info[i].weights = saved.layers.empty() ? st.client_model : saved;
    }
  }
}

// The server beside the job, from the checkpoint's state when resumed.
void spawn_server(self_ptr self, size_t clients) {
  auto& st = self->state;
  if (st.cfg.resume && !st.resume_snap.layers.empty() && st.resume_clients != clients) {
    throw std::invalid_argument(st.cfg.checkpoint_path + " holds a split job over " +
                                std::to_string(st.resume_clients) +
                                " clients; this cluster runs " + std::to_string(clients) +
                                " (its nodes x --clients-per-node)");
  }
  split_server_config sc;
  sc.model = st.desc.spec.canonical();
  sc.cut = static_cast<uint32_t>(st.cfg.cut);
  sc.method = split::to_string(st.method);
  sc.clients = static_cast<uint32_t>(clients);
  sc.seed = st.cfg.seed;
  sc.optimizer = st.cfg.optimizer;
  sc.lr = st.cfg.lr;
  sc.momentum = st.cfg.momentum;
  sc.mask_lr = st.cfg.mask_lr;
  sc.mask_l1 = st.cfg.mask_l1;
  sc.mask_keep = st.cfg.mask_keep;
  sc.threads = st.cfg.threads;
  st.server = self->spawn(split_server, sc, st.server_snap);
  self->monitor(st.server);
}

// The configuration, the test split, the client side and (resumed) the
// checkpoint's state; throws what is wrong.
void prepare(split_job_state& st) {
  check_config(st.cfg);
  st.method = split::parse_method(st.cfg.method);
  st.desc = models::describe(models::model_spec::parse(st.cfg.model));
  check_cut(st.desc, st.cfg.cut);
  st.costs = costs_of(st.desc, static_cast<size_t>(st.cfg.cut));
  st.test = load_test_split(st.cfg, st.desc);
  st.client_model = initial_client_side(st);
  if (st.cfg.resume) {
    auto ckpt = messages::load_checkpoint(st.cfg.checkpoint_path, st.desc.fingerprint);
    resume_from(st, ckpt); // checks method, cut; clients once the nodes are known
    st.server_snap = ckpt.snapshot;
    if (ada(st)) {
      // keep the seed's head in the shared model (clients bring their own)
      auto head = take_tagged(initial_client_side(st), "aux");
      add_tagged(st.client_model, "aux", head);
    }
    log()->info("resuming from {}: round {} ({})", st.cfg.checkpoint_path, st.round,
                ckpt.note);
  }
  st.core.open_metrics();
}

// What the split mode decides and does for the round job core.
class split_mode final : public round_mode {
public:
  explicit split_mode(self_ptr self) : self_(self) {}
  const char* name() const override { return "split"; }
  const char* enlisting() const override { return "spawning"; }
  caf::message spawn_message(uint32_t c) override {
    auto& st = self_->state;
    split_client_spec s;
    fill_client_spec(s, st.cfg, c, static_cast<uint32_t>(st.core.clients.size()),
                     st.desc.spec.canonical(), st.desc.fingerprint);
    s.cut = static_cast<uint32_t>(st.cfg.cut);
    s.method = split::to_string(st.method);
    return caf::make_message(spawn_atom_v, std::move(s));
  }
  void spawned(uint32_t c) override {
    auto self = self_;
    auto attempt = self->state.core.clients[c].attempt;
    self->request(client(self->state, c), self->state.cfg.profile_timeout,
                  caf::get_atom_v)
        .then(
            [=](int64_t samples, std::vector<int64_t>& labels) {
              auto& st = self->state;
              if (!st.core.answered(c, attempt)) {
                return;
              }
              st.info[c].samples = samples;
              st.info[c].labels = std::move(labels);
              log()->info("client {} on {}: {} examples", c, node_name(st, c), samples);
              st.core.ready(c);
            },
            [=](caf::error& err) {
              auto& st = self->state;
              if (st.core.answered(c, attempt)) {
                st.core.start_failed(c, self->system().render(err));
              }
            });
  }
  void client_out(uint32_t c, const std::string& why) override {
    auto& st = self_->state;
    st.info[c].holds_weights = false;
    if (st.pending.erase(c) > 0) {
      st.failed.push_back(c);
      log()->warn("client {} ({}) is out of round {}: {}", c, node_name(st, c),
                  st.round + 1, why);
      st.core.log_event("client_out",
                        {{"client", c}, {"node", node_name(st, c)}, {"why", why}});
      check_round(self_);
    }
  }
  void next_work() override { start_round(self_); }
  void on_tick() override {
    // hung clients: silent for too long in the round in hand
    auto& st = self_->state;
    std::vector<uint32_t> hung;
    for (auto c : st.pending) {
      auto silent = self_->clock().now() - st.info[c].last_heard;
      if (std::chrono::duration<double>(silent).count() > st.cfg.stall_s) {
        hung.push_back(c);
      }
    }
    for (auto c : hung) {
      st.core.client_gone(
          c, fmt::format("no progress for {:.0f} s (hung?); it is started again",
                         st.cfg.stall_s));
    }
  }
  bool on_down(const caf::down_msg& dm) override {
    auto& st = self_->state;
    if (!st.server || st.server.address() != dm.source) {
      return false;
    }
    st.server = nullptr;
    st.core.fail("the split server went down: " + self_->system().render(dm.reason));
    return true;
  }
  void stop_workers() override {
    auto& st = self_->state;
    if (st.server) {
      self_->send_exit(st.server, caf::exit_reason::user_shutdown);
      st.server = nullptr;
    }
  }
  uint64_t rounds_done() const override { return self_->state.round; }
  void fill_status(job_status& s) const override {
    fill_traffic(s, self_->state.total);
  }
  nlohmann::json end_fields() const override {
    auto& st = self_->state;
    return {{"bytes", st.total.bytes()},
            {"bytes_up", st.total.up},
            {"bytes_down", st.total.down},
            {"client_flops", st.total.client_flops},
            {"server_flops", st.total.server_flops},
            {"c3", c3_of(st.core.status, st.cfg.budget)}};
  }
  std::string stop_note() const override {
    return "(the round in hand is dropped; the checkpoint holds the last whole round)";
  }
  std::string role(uint32_t c) const override {
    auto& st = self_->state;
    auto& info = st.info[c];
    return !st.core.clients[c].ready
               ? fmt::format("client {}: starting", c)
               : fmt::format("client {}: {} rounds, {} across the cut", c, info.rounds_done,
                             models::format_bytes(static_cast<double>(info.traffic.bytes())));
  }
  std::string contribution(uint32_t c) const override {
    auto& st = self_->state;
    auto& info = st.info[c];
    return st.pending.count(c)  ? std::string("training")
           : info.rounds_done > 0 ? fmt::format("{}/{} sent", info.last_sent, info.last_batches)
                                  : std::string("-");
  }
  caf::expected<std::string> checkpoint(const std::string& path) override {
    auto& st = self_->state;
    if (st.server_snap.layers.empty()) {
      return caf::make_error(errc::not_ready,
                             "no round has finished yet: nothing to checkpoint");
    }
    try {
      save(st, path);
    } catch (const std::exception& e) {
      return caf::make_error(errc::io_failed, e.what());
    }
    return "wrote the split job's state after round " + std::to_string(st.round) + " to " +
           path;
  }
  std::string why_no_replan() const override {
    return "a split job has no pipeline to re-plan: the cut (--cut) is fixed for the job";
  }
  std::string why_no_replicate() const override {
    return "a split job checkpoints the server and every client-side model after each "
           "round (--checkpoint)";
  }

private:
  self_ptr self_;
};

// The nodes are known: the server, the clients' entries, then the clients.
void on_members(self_ptr self, const std::vector<cluster_member>& members) {
  auto& st = self->state;
  try {
    spawn_server(self, st.core.clients_for(members.size()));
  } catch (const std::exception& e) {
    st.core.fail(std::string("cannot start the split server: ") + e.what());
    return;
  }
  try {
    prepare_clients(st, st.core.clients_for(members.size()));
    evaluate(self); // resumed: what the checkpoint holds (else nothing yet)
  } catch (const std::exception& e) {
    st.core.fail(std::string("cannot resume: ") + e.what());
    return;
  }
  st.core.start(members, {{"mode", "split"},
                          {"method", st.cfg.method},
                          {"model", st.desc.spec.canonical()},
                          {"cut", st.cfg.cut},
                          {"activation_bytes", st.costs.activation_bytes},
                          {"local_fraction", st.cfg.local_fraction},
                          {"client_fraction", st.cfg.client_fraction},
                          {"send_floor", st.cfg.send_floor},
                          {"average_clients", st.cfg.average_clients},
                          {"budget_bytes", st.cfg.budget.bytes},
                          {"budget_flops", st.cfg.budget.client_flops}});
}

} // namespace

double c3_of(const job_status& s, const split::c3_budget& budget) {
  if (s.test_accuracy < 0) {
    return 0;
  }
  return split::c3_score(s.test_accuracy,
                         static_cast<double>(s.rounds.bytes_up + s.rounds.bytes_down),
                         s.rounds.client_flops, budget);
}

split_job_actor::behavior_type
split_job(split_job_actor::stateful_pointer<split_job_state> self, split_config cfg,
          cluster_actor cluster) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.core.cluster = std::move(cluster);
  st.mode = std::make_unique<split_mode>(self);
  auto snapshot = [self]() -> caf::result<snapshot_payload> {
    auto& st = self->state;
    if (st.server_snap.layers.empty()) {
      return caf::make_error(errc::not_ready, "no round has finished yet");
    }
    return snapshot_payload{whole_model(st, 0)};
  };
  auto ended = [self, snapshot] {
    return round_job_ended(self, self->state.core, snapshot,
                           drop<update_atom, split_result>(),
                           drop<progress_atom, uint32_t, uint64_t, int64_t>());
  };
  st.core.attach(st.cfg, *st.mode,
                 std::make_unique<port_of<std::remove_pointer_t<decltype(self)>>>(self, ended));
  st.core.status.mode = job_mode::split;
  st.core.status.rounds.strategy = st.cfg.method;
  self->set_down_handler([=](caf::down_msg& dm) { self->state.core.down(dm); });
  st.core.begin(
      [self] { prepare(self->state); },
      [self](std::vector<cluster_member>& members) { on_members(self, members); });
  if (st.core.over()) {
    return ended(); // it failed here (its model, its data, its metrics log)
  }
  return round_job_handlers(
      self, st.core,
      [=](update_atom, split_result& r) {
        self->state.core.guarded([&] { on_result(self, r); });
      },
      [=](progress_atom, uint32_t client, uint64_t round, int64_t) {
        auto& st = self->state;
        if (client < st.info.size() && round == st.round + 1) {
          st.info[client].last_heard = self->clock().now();
        }
      },
      [snapshot](snapshot_atom) { return snapshot(); });
}

job_result run_split_job(caf::actor_system& sys, const split_config& cfg,
                         std::vector<remote_node> nodes, const job_options& opts) {
  auto cluster = sys.spawn(cluster_supervisor, cluster_config_for(cfg), std::move(nodes));
  auto job = sys.spawn(split_job, cfg, cluster);
  return run_to_end(sys, caf::actor_cast<caf::actor>(job), cluster, cfg.node_timeout,
                    opts);
}

} // namespace salamander::actors
