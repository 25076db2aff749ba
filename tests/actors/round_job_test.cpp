// The round job core (actors/job/round_job.hpp) on its own: a scripted mode
// and a port that records what the core asks of its actor, answered by the
// test. No message is sent and no clock is waited on: every transition of
// the federated and split jobs' lifecycle is stepped here, in order.
#include "deterministic.hpp"
#include "actors/job/round_job.hpp"
#include "actors/replication/replica_holder.hpp"
#include "actors/node/system.hpp"
#include "algorithms/job_phase.hpp"
#include "algorithms/serve_phase.hpp"

#include <caf/scheduler/test_coordinator.hpp>

#include <catch2/catch.hpp>


using namespace salamander;
using actors::round_job;
using algorithms::round_phase;

namespace {

// What the core asked for, kept for the test to answer.
struct recorded_port final : actors::job_port {
  struct spawn_call {
    caf::actor node;
    on_actor ok;
    on_error failed;
  };
  std::vector<spawn_call> spawns;
  std::vector<caf::actor> exits;
  int ticks = 0;
  std::chrono::steady_clock::time_point time{}; ///< what now() says: the test moves it
  void spawn(const caf::actor& node, caf::timespan, caf::message, on_actor ok,
             on_error failed) override {
    spawns.push_back({node, std::move(ok), std::move(failed)});
  }
  int submits = 0;
  void submit(const cluster_actor&, caf::timespan, on_members, on_error) override {
    ++submits;
  }
  void exit(const caf::actor& a, caf::exit_reason) override { exits.push_back(a); }
  void monitor(const caf::actor&) override {}
  void tick_after(caf::timespan) override { ++ticks; }
  int ended_calls = 0; ///< the actor would switch to its ended behaviour
  void ended() override { ++ended_calls; }
  std::chrono::steady_clock::time_point now() const override { return time; }
  void advance(double seconds) {
    time += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(seconds));
  }
  std::string render(const caf::error& e) const override {
    return e.context().match_elements<std::string>() ? e.context().get_as<std::string>(0)
                                                     : std::string("error");
  }
};

// A mode that readies its clients when the test says so, and counts what
// the core asks of it.
struct scripted_mode final : actors::round_mode {
  std::vector<uint32_t> spawned_clients;
  std::vector<std::pair<uint32_t, std::string>> out;
  int work = 0;
  uint64_t rounds = 0;
  const char* name() const override { return "scripted"; }
  const char* enlisting() const override { return "profiling"; }
  caf::message spawn_message(uint32_t c) override { return caf::make_message(c); }
  void spawned(uint32_t c) override { spawned_clients.push_back(c); }
  void client_out(uint32_t c, const std::string& why) override { out.push_back({c, why}); }
  void next_work() override { ++work; }
  uint64_t rounds_done() const override { return rounds; }
  std::string stop_note() const override { return "(scripted)"; }
  std::string role(uint32_t c) const override { return "client " + std::to_string(c); }
  std::string contribution(uint32_t) const override { return "-"; }
  caf::expected<std::string> checkpoint(const std::string& path) override {
    return "wrote " + path;
  }
  std::string why_no_replan() const override { return "no pipeline"; }
  std::string why_no_replicate() const override { return "nothing to replicate"; }
};

using salamander::testing::deterministic;

struct fixture {
  caf::actor_system_config sys_cfg;
  caf::actor_system sys{deterministic(sys_cfg)};
  actors::round_job_config cfg;
  scripted_mode mode;
  recorded_port* port = nullptr;
  round_job core;
  std::vector<caf::actor> workers;

  explicit fixture(size_t nodes) {
    cfg.rounds = 3;
    auto p = std::make_unique<recorded_port>();
    port = p.get();
    core.attach(cfg, mode, std::move(p));
    std::vector<cluster_member> members;
    for (uint32_t i = 0; i < nodes; ++i) {
      cluster_member m;
      m.index = i;
      m.name = "node" + std::to_string(i + 1);
      m.node = worker();
      members.push_back(m);
    }
    core.start(members, nlohmann::json::object());
  }

  // An actor to stand for a spawned client (it is never sent anything).
  caf::actor worker() {
    workers.push_back(sys.spawn([] { return caf::behavior{[](int) {}}; }));
    return workers.back();
  }

  // The node answers spawn `i` with a client; the mode then readies it.
  void spawn_ok(size_t i, uint32_t client, bool ready = true) {
    auto a = worker();
    port->spawns.at(i).ok(a);
    if (ready) {
      core.ready(client);
    }
  }

  void spawn_fails(size_t i, const std::string& why) {
    auto err = caf::make_error(errc::unreachable, why);
    port->spawns.at(i).failed(err);
  }

  ~fixture() {
    for (auto& w : workers) {
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    }
    // the coordinator runs only when told: let the workers go before the
    // system waits for them
    dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler()).run();
  }
};

std::string text_of(caf::result<std::string> r) {
  REQUIRE(r.flag == caf::rt_value);
  REQUIRE(r.value.match_elements<std::string>());
  return r.value.get_as<std::string>(0);
}

caf::error error_of(caf::result<std::string> r) {
  REQUIRE(r.flag == caf::rt_error);
  return r.err;
}

} // namespace

TEST_CASE("a round job enlists a client per node and trains once all settled",
          "[actor][round_job]") {
  fixture f(3);
  CHECK(f.core.phase == round_phase::enlisting);
  CHECK(f.core.status.phase == status_phase::profiling);
  REQUIRE(f.port->spawns.size() == 3);
  f.spawn_ok(0, 0);
  f.spawn_ok(1, 1);
  CHECK(f.core.phase == round_phase::enlisting);
  CHECK(f.mode.work == 0);
  // the third fails: the first two are enough to start
  f.spawn_fails(2, "no such model");
  CHECK(f.core.phase == round_phase::training);
  CHECK(f.mode.work == 1);
  CHECK(f.core.clients[2].failures == 1);
  CHECK(f.core.clients[2].last_error == "no such model");
  CHECK(f.core.available(0));
  CHECK_FALSE(f.core.available(2));
}

TEST_CASE("a round job waits when no client is available and goes on when one is",
          "[actor][round_job]") {
  fixture f(2);
  f.spawn_ok(0, 0);
  f.spawn_ok(1, 1);
  REQUIRE(f.core.may_start_round(true));
  CHECK(f.core.training_started);
  f.core.node_lost(0, "connection lost");
  f.core.node_lost(1, "no heartbeat");
  CHECK(f.mode.out.size() == 2);
  CHECK(f.mode.out[0].second == "node node1 lost: connection lost");
  CHECK(f.core.status.dead_nodes == std::vector<std::string>{"node1", "node2"});
  CHECK_FALSE(f.core.may_start_round(false));
  CHECK(f.core.phase == round_phase::waiting);
  CHECK(f.core.status.phase == status_phase::waiting);
  // node2 is back: its client is due to spawn again at once
  cluster_member back;
  back.index = 1;
  back.name = "node2";
  back.node = f.worker();
  auto said = text_of(f.core.node_joined(1, back));
  CHECK(said == "node node2 is back; its client starts again and joins the next round");
  f.core.tick();
  REQUIRE(f.port->spawns.size() == 3);
  f.spawn_ok(2, 1);
  CHECK(f.core.may_start_round(true));
  CHECK(f.core.phase == round_phase::training);
  // a new node beyond the start stays unused
  cluster_member extra;
  extra.index = 2;
  extra.name = "node3";
  extra.node = f.worker();
  CHECK_THAT(text_of(f.core.node_joined(2, extra)), Catch::Contains("stays unused"));
  f.core.refresh_status();
  REQUIRE(f.core.status.nodes.size() == 3);
  CHECK(f.core.status.nodes[0].role == "client 0: down");
  CHECK(f.core.status.nodes[1].role == "client 1");
  CHECK(f.core.status.nodes[2].role == "unused (joined after the shards were drawn)");
  CHECK(f.core.status.rounds.clients == 1);
}

TEST_CASE("a round job whose clients all fail to start three times says why",
          "[actor][round_job]") {
  fixture f(1);
  f.spawn_fails(0, "out of memory");
  CHECK(f.core.phase == round_phase::training); // settled: no client yet
  for (int attempt = 1; attempt < 3; ++attempt) {
    f.core.tick(); // not due yet: spaced out
    REQUIRE(f.port->spawns.size() == static_cast<size_t>(attempt));
    f.port->advance(2.0 * attempt); // due now
    f.core.tick();
    REQUIRE(f.port->spawns.size() == static_cast<size_t>(attempt + 1));
    f.spawn_fails(static_cast<size_t>(attempt), "out of memory");
  }
  CHECK(f.core.clients[0].failures == 3);
  f.core.tick();
  CHECK(f.core.phase == round_phase::failed);
  CHECK(f.core.status.error ==
        "no client could start (3 attempts on every node); last: node1: out of memory");
}

TEST_CASE("a stale spawn answer is dropped and its actor stopped", "[actor][round_job]") {
  fixture f(1);
  f.core.node_lost(0, "gone");
  auto a = f.worker();
  f.port->spawns.at(0).ok(a); // answers the spawn of before the loss
  CHECK_FALSE(f.core.clients[0].handle);
  REQUIRE_FALSE(f.port->exits.empty());
  CHECK(f.port->exits.back() == a);
  CHECK(f.mode.spawned_clients.empty());
}

TEST_CASE("pause, resume, stop and the commands of an ended round job",
          "[actor][round_job]") {
  fixture f(1);
  f.spawn_ok(0, 0);
  // the console's words as the running behaviour takes them
  // (actors/job/running.hpp): the lifecycle's part, then the core's hook
  namespace lifecycle = actors::lifecycle;
  auto hooks = f.core.hooks();
  CHECK(text_of(lifecycle::pause(f.core, hooks)) ==
        "paused: the round in hand finishes, no new one starts");
  CHECK(text_of(lifecycle::pause(f.core, hooks)) == "already paused; resume carries on");
  CHECK_FALSE(f.core.may_start_round(true));
  auto work = f.mode.work;
  CHECK(text_of(lifecycle::resume(f.core, hooks)) == "resumed: the next round starts");
  CHECK(f.mode.work == work + 1);
  CHECK(text_of(lifecycle::resume(f.core, hooks)) == "not paused");
  CHECK(text_of(lifecycle::checkpoint(hooks, "x.ckpt")) == "wrote x.ckpt");
  CHECK(error_of(lifecycle::checkpoint(hooks, "")).code() ==
        static_cast<uint8_t>(errc::bad_config));
  CHECK(f.core.no_replan().code() == static_cast<uint8_t>(errc::not_applicable));
  CHECK(error_of(f.core.kill(7)).code() == static_cast<uint8_t>(errc::no_such_worker));
  CHECK_THAT(text_of(f.core.kill(0)), Catch::Contains("client 0 on node node1 killed"));
  f.mode.rounds = 2;
  CHECK(f.port->ended_calls == 0);
  CHECK(text_of(lifecycle::stop(f.core, hooks, "console")) ==
        "stopped after round 2 (scripted)");
  CHECK(f.core.phase == round_phase::finished);
  CHECK(f.core.status.stopped == "console");
  CHECK_FALSE(f.core.clients[0].handle);
  // the actor switches to the ended behaviour once (round_flow_test asks it)
  CHECK(f.port->ended_calls == 1);
  f.core.fail("after the end");
  CHECK(f.port->ended_calls == 1);
  CHECK(f.core.phase == round_phase::finished);
}

TEST_CASE("a round job ends when its rounds are done and when its time budget is spent",
          "[actor][round_job]") {
  SECTION("rounds") {
    fixture f(1);
    f.spawn_ok(0, 0);
    f.mode.rounds = 3;
    CHECK_FALSE(f.core.may_start_round(true));
    CHECK(f.core.phase == round_phase::finished);
    CHECK(f.core.status.stopped.empty());
  }
  SECTION("a resumed run's budget goes on from where it stopped") {
    fixture f(1);
    f.spawn_ok(0, 0);
    f.cfg.time_budget_s = 100;
    f.core.train_s_before = 99.5;
    REQUIRE(f.core.may_start_round(true));
    CHECK(f.core.train_time() == Approx(99.5));
    f.port->advance(0.4);
    CHECK_FALSE(f.core.ended_by_budget());
    CHECK(f.core.train_time() == Approx(99.9));
    f.port->advance(0.2);
    f.core.tick();
    CHECK(f.core.phase == round_phase::finished);
    CHECK(f.core.status.stopped == "the time budget");
    CHECK(f.core.status.train_s == Approx(100.1));
  }
}

TEST_CASE("a round job whose preparation throws fails with why and submits nothing",
          "[actor][round_job]") {
  caf::actor_system_config sys_cfg;
  caf::actor_system sys{deterministic(sys_cfg)};
  actors::round_job_config cfg;
  scripted_mode mode;
  auto p = std::make_unique<recorded_port>();
  auto* port = p.get();
  round_job core;
  core.attach(cfg, mode, std::move(p));
  bool admitted = false;
  core.begin(
      [] { throw std::invalid_argument("--rounds must be at least 1"); },
      [&](std::vector<cluster_member>&) { admitted = true; });
  CHECK(core.phase == round_phase::failed);
  CHECK(core.status.error == "--rounds must be at least 1");
  CHECK(port->submits == 0);
  CHECK_FALSE(admitted);
  CHECK_THROWS_WITH(
      [] {
        actors::round_job_config bad;
        bad.rounds = 0;
        actors::check_round_config(bad);
      }(),
      "--rounds must be at least 1, got 0");
}

namespace {

models::weight_snapshot weights_of(int64_t rows, float fill) {
  models::weight_snapshot s;
  s.model = "test";
  s.layers.resize(1);
  s.layers[0].params.push_back({"weight", torch::full({rows, 1000}, fill)});
  return s;
}

// Sends `snap` into `in` as `from`'s transfer `transfer`, in parts of 64 KiB;
// `skip`: the part left out (none when past the end).
void send_parts(actors::weights_inbox& in, const std::string& from, uint64_t transfer,
                const models::weight_snapshot& snap, size_t skip = SIZE_MAX) {
  auto parts = actors::snapshot_parts(snap, 64 * 1024);
  uint64_t total = 0;
  for (auto& p : parts) {
    total += static_cast<uint64_t>(p.numel());
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i != skip) {
      in.add("federated", from, transfer, offset, total, parts[i]);
    }
    offset += static_cast<uint64_t>(parts[i].numel());
  }
}

} // namespace

TEST_CASE("weights in parts are taken by the message that names their sender and "
          "transfer, and a transfer missing a part gives none",
          "[actor][round_job][parts]") {
  actors::weights_inbox in;
  auto a = weights_of(100, 1.5f); // 400 KB: 7 parts
  auto b = weights_of(50, -2.f);
  send_parts(in, "client-a", 1, a);
  send_parts(in, "client-b", 1, b);
  CHECK(in.waiting() == 2);
  snapshot_payload got;
  REQUIRE(in.take("client-b", 1, got));
  CHECK(torch::equal(got.snapshot.layers.at(0).params.at(0).tensor,
                     b.layers[0].params[0].tensor));
  REQUIRE(in.take("client-a", 1, got));
  CHECK(torch::equal(got.snapshot.layers.at(0).params.at(0).tensor,
                     a.layers[0].params[0].tensor));
  CHECK_FALSE(in.take("client-a", 1, got)); // taken once
  CHECK(in.waiting() == 0);

  send_parts(in, "client-a", 2, a, 3); // part 3 lost: the rest does not continue
  CHECK_FALSE(in.take("client-a", 2, got));
  CHECK(in.pending() == 0);

  // a message that claims parts no one sent
  fed_update u;
  u.parts = 9;
  CHECK_FALSE(actors::take_weights(in, caf::strong_actor_ptr{}, u, &fed_update::delta));
  u.parts = 0; // weights in the message itself
  CHECK(actors::take_weights(in, caf::strong_actor_ptr{}, u, &fed_update::delta));
}

namespace {

// What a holder that keeps its answers for the test got: each part's
// transfer and bytes, and the answer it owes.
struct held_parts {
  std::vector<uint64_t> transfers;
  std::vector<uint64_t> offsets;
  std::vector<torch::Tensor> parts;
  std::vector<caf::response_promise> answers;
  size_t answered = 0;
};

replica_holder_actor answer_holder(caf::actor_system& sys, std::shared_ptr<held_parts> h) {
  auto a = sys.spawn([h](caf::event_based_actor* self) -> caf::behavior {
    return {[=](replicate_atom, uint64_t transfer, uint64_t offset, uint64_t,
                tensor_payload& part) {
      h->transfers.push_back(transfer);
      h->offsets.push_back(offset);
      h->parts.push_back(part.tensor);
      auto rp = self->make_response_promise();
      h->answers.push_back(rp);
      return rp;
    },
            // the test's word: answer the oldest part not answered yet
            [=](done_atom) { h->answers.at(h->answered++).deliver(caf::unit); }};
  });
  return caf::actor_cast<replica_holder_actor>(a);
}

// Has `holder` (an answer_holder) answer one more part.
void answer_one(caf::actor_system& sys, const replica_holder_actor& holder) {
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  caf::anon_send(caf::actor_cast<caf::actor>(holder), done_atom_v);
  sched.run();
}

// Asks `courier` for the end of its transfer: the parts taken, or the error
// in words, once the test coordinator has run out of work.
std::shared_ptr<std::string> ask_done(caf::actor_system& sys, const caf::actor& courier) {
  auto out = std::make_shared<std::string>();
  sys.spawn([=](caf::event_based_actor* self) {
    self->request(courier, caf::infinite, done_atom_v)
        .then([out](uint64_t taken) { *out = std::to_string(taken); },
              [out, self](caf::error& e) { *out = "error: " + self->system().render(e); });
  });
  return out;
}

} // namespace

TEST_CASE("a courier keeps at most a window of parts unanswered, starts after the "
          "transfer before it, and ends when its holder goes away",
          "[actor][parts][courier]") {
  caf::actor_system_config sys_cfg;
  caf::actor_system sys{deterministic(sys_cfg)};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  auto h = std::make_shared<held_parts>();
  auto holder = answer_holder(sys, h);
  auto a = weights_of(600, 1.5f); // 2.4 MB: 37 parts of 64 KiB
  auto b = weights_of(30, -2.f);  // 2 parts
  // what the holder must get; the couriers encode their own (when they start)
  auto parts_a = std::make_shared<const std::vector<torch::Tensor>>(
      actors::snapshot_parts(a, 64 * 1024));
  auto parts_b = std::make_shared<const std::vector<torch::Tensor>>(
      actors::snapshot_parts(b, 64 * 1024));
  auto encoded = [](const models::weight_snapshot& s) {
    return std::make_shared<const actors::snapshot_encoding>(s, 64 * 1024);
  };
  constexpr auto window = actors::tuning::snapshot_window_parts;
  REQUIRE(parts_a->size() > 2 * window);

  auto first =
      sys.spawn(actors::replica_courier, holder, uint64_t{1}, encoded(a), caf::actor{});
  auto second =
      sys.spawn(actors::replica_courier, holder, uint64_t{2}, encoded(b), first);
  auto second_done = ask_done(sys, second);
  sched.run();
  // a window's worth of the first transfer, nothing of the second
  CHECK(h->parts.size() == window);
  CHECK(std::count(h->transfers.begin(), h->transfers.end(), 1) == long(window));
  // each answer lets exactly one more part go
  for (int i = 0; i < 3; ++i) {
    answer_one(sys, holder);
    CHECK(h->parts.size() == window + h->answered);
  }
  // answered as they come, every part of both transfers arrives, the first
  // transfer's whole before the second's
  while (h->answered < h->answers.size()) {
    answer_one(sys, holder);
    CHECK(h->parts.size() - h->answered <= window);
  }
  REQUIRE(h->parts.size() == parts_a->size() + parts_b->size());
  CHECK(std::is_sorted(h->transfers.begin(), h->transfers.end()));
  actors::snapshot_assembler whole{4};
  std::optional<models::weight_snapshot> got_a;
  std::optional<models::weight_snapshot> got_b;
  uint64_t total_a = 0;
  uint64_t total_b = 0;
  for (auto& p : *parts_a) {
    total_a += static_cast<uint64_t>(p.numel());
  }
  for (auto& p : *parts_b) {
    total_b += static_cast<uint64_t>(p.numel());
  }
  for (size_t i = 0; i < h->parts.size(); ++i) {
    auto& got = h->transfers[i] == 1 ? got_a : got_b;
    got = whole.add("courier", h->transfers[i], h->offsets[i],
                    h->transfers[i] == 1 ? total_a : total_b, h->parts[i]);
  }
  REQUIRE(got_a);
  REQUIRE(got_b);
  CHECK(torch::equal(got_a->layers.at(0).params.at(0).tensor, a.layers[0].params[0].tensor));
  CHECK(torch::equal(got_b->layers.at(0).params.at(0).tensor, b.layers[0].params[0].tensor));
  CHECK(*second_done == std::to_string(parts_b->size()));

  // a holder that goes away ends its courier, with the reason
  auto third = sys.spawn(actors::replica_courier, holder, uint64_t{3},
                         std::make_shared<const actors::snapshot_encoding>(*parts_a),
                         caf::actor{});
  auto third_done = ask_done(sys, third);
  sched.run();
  CHECK(h->parts.size() == parts_a->size() + parts_b->size() + window);
  caf::anon_send_exit(holder, caf::exit_reason::kill);
  sched.run();
  CHECK(third_done->rfind("error: ", 0) == 0);
  CHECK(third_done->find("holder went away") != std::string::npos);
}

TEST_CASE("a real replica holder answers a courier's parts, serves the snapshot, and "
          "refuses bytes that are no snapshot",
          "[actor][parts][courier]") {
  caf::actor_system_config sys_cfg;
  caf::actor_system sys{deterministic(sys_cfg)};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  auto holder = sys.spawn(actors::replica_holder, std::string("n1"),
                          std::shared_ptr<actors::link_shaper>{});
  auto snap = weights_of(600, 0.25f);
  snap.version = 7;
  auto parts = std::make_shared<const std::vector<torch::Tensor>>(
      actors::snapshot_parts(snap, 64 * 1024));
  auto courier =
      sys.spawn(actors::replica_courier, holder, uint64_t{1},
                std::make_shared<const actors::snapshot_encoding>(*parts), caf::actor{});
  auto done = ask_done(sys, courier);
  sched.run();
  CHECK(*done == std::to_string(parts->size()));
  auto served = std::make_shared<std::optional<snapshot_payload>>();
  sys.spawn([=](caf::event_based_actor* self) {
    self->request(holder, caf::infinite, snapshot_atom_v, uint64_t{0}, uint64_t{1},
                  uint64_t{7})
        .then([served](snapshot_payload& p) { *served = std::move(p); });
  });
  sched.run();
  REQUIRE(*served);
  CHECK(torch::equal((*served)->snapshot.layers.at(0).params.at(0).tensor,
                     snap.layers[0].params[0].tensor));
  // bytes that are no snapshot frame (12 bytes: not whole 8-byte words): the
  // holder says so, and the courier stops with its words
  auto junk = std::make_shared<const actors::snapshot_encoding>(
      std::vector<torch::Tensor>{torch::zeros({12}, torch::kUInt8)});
  auto bad = sys.spawn(actors::replica_courier, holder, uint64_t{2}, junk, caf::actor{});
  auto refused = ask_done(sys, bad);
  sched.run();
  CHECK(refused->rfind("error: ", 0) == 0);
  CHECK(refused->find("dropped the snapshot") != std::string::npos);
  CHECK(refused->find("no snapshot frame") != std::string::npos);
  caf::anon_send_exit(holder, caf::exit_reason::user_shutdown);
  sched.run();
}

TEST_CASE("every mode's phase has a status phase that reads as the same words",
          "[actor][round_job][phase]") {
  using namespace algorithms;
  std::vector<std::string> texts;
  for (auto p : {job_phase::starting, job_phase::profiling, job_phase::training,
                 job_phase::paused, job_phase::evaluating, job_phase::replanning,
                 job_phase::checkpointing, job_phase::recovering, job_phase::waiting,
                 job_phase::finished, job_phase::failed}) {
    texts.push_back(to_string(p));
  }
  for (auto p : {serve_phase::starting, serve_phase::profiling, serve_phase::serving,
                 serve_phase::recovering, serve_phase::waiting, serve_phase::finished,
                 serve_phase::failed}) {
    texts.push_back(to_string(p));
  }
  for (auto enlisting : {"profiling", "spawning"}) { // federated, split
    for (auto p : {round_phase::starting, round_phase::enlisting, round_phase::training,
                   round_phase::waiting, round_phase::finished, round_phase::failed}) {
      texts.push_back(to_string(p, enlisting));
    }
  }
  for (auto& t : texts) {
    INFO(t);
    auto p = status_phase_from_text(t);
    CHECK(p != status_phase::unknown);
    CHECK(to_string(p) == t);
  }
  CHECK(status_phase_from_text("connecting") == status_phase::unknown);
  CHECK(to_string(job_mode::federate) == "federate");
}
