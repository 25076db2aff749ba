// The federated and split jobs' lifecycles, stepped deterministically: the
// cluster supervisor, the job, the nodes and every client run on CAF's test
// coordinator, one message at a time on this thread, and time moves only
// when the test triggers the next timeout (the job core's clock is the
// coordinator's). A client is killed, a node is lost, the console pauses,
// resumes and stops, exactly where the test puts it, with no sleep.
#include "deterministic.hpp"
#include "../support.hpp"

#include "actors/cluster/cluster_supervisor.hpp"
#include "actors/federated/fed_job.hpp"
#include "actors/node/node.hpp"
#include "actors/node/system.hpp"
#include "actors/split/split_job.hpp"

#include <caf/scheduler/test_coordinator.hpp>

#include <functional>

namespace salamander::algorithms {
// how Catch shows a phase (found by ADL)
std::ostream& operator<<(std::ostream& o, round_phase p) {
  return o << to_string(p);
}
} // namespace salamander::algorithms

using namespace salamander;
using algorithms::round_phase;

namespace {

using salamander::testing::deterministic;

using salamander::testing::deref;

template <class Config> void small(Config& cfg, int64_t rounds) {
  cfg.model = "mlp:hidden=32";
  cfg.rounds = rounds;
  cfg.dataset = "synthetic";
  cfg.alpha = 0;
  cfg.batch_size = 32;
  cfg.max_samples = 64;
  cfg.test_samples = 128;
}

actors::fed_config fed(int64_t rounds) {
  actors::fed_config cfg;
  small(cfg, rounds);
  cfg.strategy = "fedavg";
  cfg.profile_batches = 1;
  cfg.profile_keeps = {0.5, 1.0};
  cfg.settings.deadline_s = 3600; // only the test's kills end a round early
  return cfg;
}

actors::split_config split_job_config(const std::string& method, int64_t rounds) {
  actors::split_config cfg;
  small(cfg, rounds);
  cfg.method = method;
  cfg.cut = 1;
  return cfg;
}

// One job of mode `Job` (fed_job, split_job) over `n` embedded nodes.
template <class State, class Handle> struct flow {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  std::vector<node_actor> nodes;
  cluster_actor cluster;
  Handle job;
  std::vector<round_phase> phases; ///< every phase the job was seen in, in order

  template <class Spawn>
  flow(int n, Spawn spawn_job)
      : sys(deterministic(cfg)),
        sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())) {
    cluster = salamander::testing::coordinator_cluster(sys, n, nodes);
    job = spawn_job(sys, cluster);
  }

  ~flow() {
    caf::anon_send(job, leave_atom_v);
    caf::anon_send(cluster, leave_atom_v);
    for (auto& n : nodes) {
      caf::anon_send(n, leave_atom_v);
    }
    sched.run();
  }

  State& state() { return deref<State>(job); }
  actors::round_job& core() { return state().core; }

  void note_phase() {
    auto p = core().phase;
    if (phases.empty() || phases.back() != p) {
      phases.push_back(p);
    }
  }

  // Runs messages (and, when none is left, the next timeout) until `done`
  // holds; false if the job ended first or nothing is left to run.
  bool step_until(const std::function<bool(State&)>& done, size_t max_steps = 2'000'000) {
    for (size_t i = 0; i < max_steps; ++i) {
      note_phase();
      if (done(state())) {
        return true;
      }
      if (core().over()) {
        return false;
      }
      if (!sched.try_run_once() && !sched.trigger_timeout()) {
        return false;
      }
    }
    return false;
  }

  bool run_to_end() {
    return step_until([](State& st) { return st.core.over(); });
  }

  // A console command to the job, answered on the coordinator.
  template <class... Ts> std::string ask(Ts... xs) {
    return salamander::testing::ask_text(sys, job, xs...);
  }
};

using fed_flow = flow<actors::fed_job_state, fed_job_actor>;
using split_flow = flow<actors::split_job_state, split_job_actor>;

} // namespace

TEST_CASE("a federated job moves starting, profiling, training, finished, each round "
          "once",
          "[actor][flow][federated]") {
  fed_flow f(3, [](caf::actor_system& sys, cluster_actor c) {
    return sys.spawn(actors::fed_job, fed(3), c);
  });
  REQUIRE(f.run_to_end());
  auto& st = f.state();
  INFO("error: " << st.core.status.error);
  CHECK(st.core.phase == round_phase::finished);
  CHECK(f.phases == std::vector<round_phase>{round_phase::starting, round_phase::enlisting,
                                             round_phase::training,
                                             round_phase::finished});
  CHECK(st.version == 3);
  CHECK(st.core.status.phase == status_phase::finished);
  CHECK(st.core.status.rounds.round == 3);
  for (auto& info : st.info) {
    CHECK(info.updates == 3); // every client in every round
  }
}

TEST_CASE("a federated client killed mid-round is out of that round and trains again in "
          "a later one",
          "[actor][flow][federated]") {
  fed_flow f(3, [](caf::actor_system& sys, cluster_actor c) {
    return sys.spawn(actors::fed_job, fed(6), c);
  });
  // round 1 is out (its tasks are in the clients' mailboxes, their
  // training waits for the clock): client 1 dies before it trains
  REQUIRE(f.step_until([](auto& st) { return st.in_round && st.version == 0; }));
  caf::anon_send_exit(f.core().clients[1].handle, caf::exit_reason::kill);
  REQUIRE(f.step_until([](auto& st) { return st.version == 1; }));
  auto& st = f.state();
  CHECK(st.core.status.rounds.contributed == 2);
  CHECK(st.core.status.rounds.dropped_updates == 1);
  CHECK_FALSE(st.core.clients[1].handle);
  // the core spawns it again once its wait is over (on the coordinator's
  // clock), and it takes part from the round after it is profiled
  f.sched.advance_time(std::chrono::seconds(3));
  REQUIRE(f.step_until([](auto& st) { return st.core.clients[1].ready; }));
  auto back_in = st.version + (st.in_round ? 1 : 0);
  REQUIRE(back_in < 6);
  REQUIRE(f.run_to_end());
  CHECK(st.core.phase == round_phase::finished);
  CHECK(st.version == 6);
  CHECK(st.info[1].updates == static_cast<int64_t>(6 - back_in));
  CHECK(st.info[0].updates == 6);
}

TEST_CASE("a federated job paused by the console starts no round until resumed, and a "
          "stop ends it after the round in hand",
          "[actor][flow][federated]") {
  fed_flow f(2, [](caf::actor_system& sys, cluster_actor c) {
    return sys.spawn(actors::fed_job, fed(10), c);
  });
  REQUIRE(f.step_until([](auto& st) { return st.version == 1; }));
  CHECK(f.ask(pause_atom_v) == "paused: the round in hand finishes, no new one starts");
  REQUIRE(f.step_until([](auto& st) { return !st.in_round; }));
  auto paused_at = f.state().version;
  // time passes: ticks come and go, no round starts
  for (int i = 0; i < 20; ++i) {
    f.sched.run();
    f.sched.trigger_timeout();
  }
  CHECK(f.state().version == paused_at);
  CHECK_FALSE(f.state().in_round);
  CHECK(f.ask(resume_atom_v) == "resumed: the next round starts");
  REQUIRE(f.step_until([&](auto& st) { return st.version == paused_at + 1; }));
  CHECK_THAT(f.ask(stop_atom_v, std::string("console")),
             Catch::StartsWith("stopped after round"));
  auto& st = f.state();
  CHECK(st.core.phase == round_phase::finished);
  CHECK(st.core.status.stopped == "console");
  CHECK_THAT(f.ask(pause_atom_v), Catch::Contains("the federated job has ended"));
  CHECK_THAT(f.ask(kill_atom_v, uint32_t{0}), Catch::Contains("the federated job has ended"));
  CHECK_THAT(f.ask(checkpoint_atom_v, std::string("x.ckpt")),
             Catch::Contains("the federated job has ended"));
  CHECK_THAT(f.ask(stop_atom_v, std::string("again")), Catch::Contains("job_ended"));
}

TEST_CASE("a federated job whose node is lost goes on with the others",
          "[actor][flow][federated]") {
  fed_flow f(3, [](caf::actor_system& sys, cluster_actor c) {
    return sys.spawn(actors::fed_job, fed(3), c);
  });
  REQUIRE(f.step_until([](auto& st) { return st.in_round && st.version == 0; }));
  // the cluster tells the job its node is gone
  caf::anon_send(f.job, lost_atom_v, uint32_t{2}, std::string("no heartbeat"));
  REQUIRE(f.run_to_end());
  auto& st = f.state();
  CHECK(st.core.phase == round_phase::finished);
  CHECK(st.version == 3);
  CHECK(st.core.status.dead_nodes == std::vector<std::string>{"local2"});
  CHECK(st.info[2].updates == 0);
  CHECK(st.info[0].updates == 3);
  st.core.refresh_status();
  CHECK(st.core.status.nodes[2].role == "client 2: down");
}

TEST_CASE("a split job moves starting, spawning, training, finished, and a killed client "
          "rejoins a later round",
          "[actor][flow][split]") {
  for (auto method : {"vanilla", "splitfed", "adasplit"}) {
    DYNAMIC_SECTION(method) {
      auto cfg = split_job_config(method, 3);
      cfg.local_fraction = 0.34; // adasplit: round 1 local, then global
      split_flow f(2, [cfg](caf::actor_system& sys, cluster_actor c) {
        return sys.spawn(actors::split_job, cfg, c);
      });
      REQUIRE(f.step_until([](auto& st) { return st.in_round && st.round == 0; }));
      CHECK_THAT(f.ask(kill_atom_v, uint32_t{1}), Catch::Contains("client 1 on node local1"));
      CHECK_THAT(f.ask(replan_atom_v, std::string()), Catch::Contains("no pipeline"));
      REQUIRE(f.step_until([](auto& st) { return st.round == 1; }));
      CHECK_FALSE(f.core().clients[1].handle);
      f.sched.advance_time(std::chrono::seconds(3)); // its respawn wait is over
      REQUIRE(f.run_to_end());
      auto& st = f.state();
      INFO("error: " << st.core.status.error);
      CHECK(st.core.phase == round_phase::finished);
      CHECK(f.phases == std::vector<round_phase>{round_phase::starting,
                                                 round_phase::enlisting,
                                                 round_phase::training,
                                                 round_phase::finished});
      CHECK(st.round == 3);
      CHECK(st.info[0].rounds_done == 3);
      CHECK(st.info[1].rounds_done >= 1); // back for a later round
      CHECK(st.info[1].rounds_done < 3);
      CHECK(st.core.status.rounds.bytes_up > 0);
      // ended: every command says so, whatever it is
      CHECK_THAT(f.ask(replan_atom_v, std::string()),
                 Catch::Contains("the split job has ended"));
    }
  }
}

TEST_CASE("a federated job stopped by the console resumes from its checkpoint where it "
          "stopped, its time budget going on",
          "[actor][flow][federated]") {
  salamander::testing::temp_dir dir;
  auto cfg = fed(4);
  cfg.checkpoint_path = dir.file("fed.ckpt");
  double trained_s = 0;
  {
    fed_flow f(2, [cfg](caf::actor_system& sys, cluster_actor c) {
      return sys.spawn(actors::fed_job, cfg, c);
    });
    REQUIRE(f.step_until([](auto& st) { return st.version == 2; }));
    CHECK_THAT(f.ask(stop_atom_v, std::string("the test")),
               Catch::StartsWith("stopped after round 2"));
    CHECK(f.state().core.phase == round_phase::finished);
    trained_s = f.state().core.train_time();
  }
  // a new supervisor, the same command with --resume
  cfg.resume = true;
  fed_flow g(2, [cfg](caf::actor_system& sys, cluster_actor c) {
    return sys.spawn(actors::fed_job, cfg, c);
  });
  REQUIRE(g.step_until([](auto& st) { return st.core.phase == round_phase::training; }));
  CHECK(g.state().version == 2);
  CHECK(g.state().core.train_s_before == Approx(trained_s).margin(1e-6));
  REQUIRE(g.run_to_end());
  auto& st = g.state();
  CHECK(st.core.phase == round_phase::finished);
  CHECK(st.version == 4);
  CHECK(st.info[0].updates == 2); // rounds 3 and 4 only
  CHECK(st.core.train_time() >= trained_s);
}

TEST_CASE("a split job paused by the console starts no round until resumed, and goes on "
          "without a lost node",
          "[actor][flow][split]") {
  auto cfg = split_job_config("vanilla", 4);
  split_flow f(3, [cfg](caf::actor_system& sys, cluster_actor c) {
    return sys.spawn(actors::split_job, cfg, c);
  });
  REQUIRE(f.step_until([](auto& st) { return st.round == 1; }));
  CHECK(f.ask(pause_atom_v) == "paused: the round in hand finishes, no new one starts");
  CHECK(f.ask(pause_atom_v) == "already paused; resume carries on");
  REQUIRE(f.step_until([](auto& st) { return !st.in_round; }));
  auto paused_at = f.state().round;
  for (int i = 0; i < 20; ++i) {
    f.sched.run();
    f.sched.trigger_timeout();
  }
  CHECK(f.state().round == paused_at);
  CHECK(f.state().core.status.paused_by_user);
  caf::anon_send(f.job, lost_atom_v, uint32_t{2}, std::string("no heartbeat"));
  f.sched.run();
  CHECK(f.ask(resume_atom_v) == "resumed: the next round starts");
  REQUIRE(f.run_to_end());
  auto& st = f.state();
  CHECK(st.core.phase == round_phase::finished);
  CHECK(st.round == 4);
  CHECK(st.core.status.dead_nodes == std::vector<std::string>{"local2"});
  CHECK(st.info[2].rounds_done <= static_cast<int64_t>(paused_at));
  CHECK(st.info[0].rounds_done == 4);
}

TEST_CASE("a federated node lost and offered again through the cluster's join is back in "
          "a later round, exactly",
          "[actor][flow][federated]") {
  fed_flow f(3, [](caf::actor_system& sys, cluster_actor c) {
    return sys.spawn(actors::fed_job, fed(8), c);
  });
  REQUIRE(f.step_until([](auto& st) { return st.in_round && st.version == 0; }));
  salamander::testing::kill_node(f.nodes[2]); // the device dies mid-round
  REQUIRE(f.step_until([](auto& st) { return st.version == 1; }));
  CHECK(f.state().core.status.dead_nodes == std::vector<std::string>{"local2"});
  // the device restarts (a new node actor of the same name) and offers
  // itself to the cluster supervisor, which admits it (hello, proof) and
  // tells the job
  f.nodes[2] = salamander::testing::coordinator_node(f.sys, "local2");
  auto said = salamander::testing::ask_text(
      f.sys, f.cluster, join_atom_v, caf::actor_cast<caf::actor>(f.nodes[2]),
      std::string("local2"));
  CHECK_THAT(said, Catch::Matchers::Contains("is back"));
  CHECK(f.state().core.status.dead_nodes.empty());
  REQUIRE(f.run_to_end());
  auto& st = f.state();
  CHECK(st.core.phase == round_phase::finished);
  CHECK(st.version == 8);
  INFO(said);
  st.core.refresh_status();
  INFO(st.core.status.nodes[2].role);
  CHECK(st.info[2].updates >= 1); // it trained again after it came back
  CHECK(st.info[2].updates < st.info[0].updates);
}

TEST_CASE("a split job stopped by the console resumes from its checkpoint where it "
          "stopped, its time budget going on",
          "[actor][flow][split]") {
  salamander::testing::temp_dir dir;
  auto cfg = split_job_config("vanilla", 4);
  cfg.checkpoint_path = dir.file("split.ckpt");
  double trained_s = 0;
  {
    split_flow f(2, [cfg](caf::actor_system& sys, cluster_actor c) {
      return sys.spawn(actors::split_job, cfg, c);
    });
    // two rounds done, the third in hand: the stop drops it, the checkpoint
    // holds round 2
    REQUIRE(f.step_until([](auto& st) { return st.round == 2; }));
    CHECK_THAT(f.ask(stop_atom_v, std::string("the test")),
               Catch::StartsWith("stopped after round 2"));
    CHECK(f.state().core.phase == round_phase::finished);
    trained_s = f.state().core.train_time();
  }
  // a new supervisor, the same command with --resume
  cfg.resume = true;
  split_flow g(2, [cfg](caf::actor_system& sys, cluster_actor c) {
    return sys.spawn(actors::split_job, cfg, c);
  });
  REQUIRE(g.step_until([](auto& st) { return st.core.phase == round_phase::training; }));
  CHECK(g.state().round == 2);
  CHECK(g.state().core.train_s_before == Approx(trained_s).margin(1e-6));
  REQUIRE(g.run_to_end());
  auto& st = g.state();
  CHECK(st.core.phase == round_phase::finished);
  CHECK(st.round == 4);
  CHECK(st.info[0].rounds_done == 2); // rounds 3 and 4 only
  CHECK(st.core.train_time() >= trained_s);
}

TEST_CASE("a split node lost and offered again through the cluster's join is back in a "
          "later round, exactly",
          "[actor][flow][split]") {
  split_flow f(3, [](caf::actor_system& sys, cluster_actor c) {
    return sys.spawn(actors::split_job, split_job_config("vanilla", 8), c);
  });
  REQUIRE(f.step_until([](auto& st) { return st.in_round && st.round == 0; }));
  salamander::testing::kill_node(f.nodes[2]); // the device dies mid-round
  REQUIRE(f.step_until([](auto& st) { return st.round == 1; }));
  CHECK(f.state().core.status.dead_nodes == std::vector<std::string>{"local2"});
  CHECK_FALSE(f.core().clients[2].handle);
  // the device restarts (a new node actor of the same name) and offers
  // itself to the cluster supervisor, which admits it and tells the job
  f.nodes[2] = salamander::testing::coordinator_node(f.sys, "local2");
  auto said = salamander::testing::ask_text(f.sys, f.cluster, join_atom_v,
                                            caf::actor_cast<caf::actor>(f.nodes[2]),
                                            std::string("local2"));
  INFO(said);
  CHECK_THAT(said, Catch::Matchers::Contains("its client starts again"));
  CHECK(f.state().core.status.dead_nodes.empty());
  // its client is spawned again and takes every round from the next one on
  REQUIRE(f.step_until([](auto& st) { return st.core.clients[2].ready; }));
  auto back_in = f.state().round + (f.state().in_round ? 1 : 0);
  REQUIRE(back_in < 8);
  REQUIRE(f.run_to_end());
  auto& st = f.state();
  INFO("error: " << st.core.status.error);
  CHECK(st.core.phase == round_phase::finished);
  CHECK(st.round == 8);
  CHECK(st.info[0].rounds_done == 8);
  CHECK(st.info[2].rounds_done == static_cast<int64_t>(8 - back_in));
  st.core.refresh_status();
  CHECK_THAT(st.core.status.nodes[2].role,
             Catch::StartsWith("client 2: " + std::to_string(8 - back_in) + " rounds"));
}
