// The job supervisors' decision flows, stepped deterministically: every
// actor (cluster supervisor, training job, nodes, stages, holders, recovery
// rounds, launchers) runs on CAF's test coordinator, one message at a time on
// this thread, and time moves only when the test triggers the next timeout.
// A failure lands exactly where the test puts it - during a re-plan, during
// a recovery, while paused - with no sleep and no wall-clock margin, and the
// result must still equal one device's training, every batch exactly once.
#include "deterministic.hpp"
#include "reference.hpp"

#include "actors/cluster/cluster_supervisor.hpp"
#include "actors/node/node.hpp"
#include "actors/node/system.hpp"
#include "actors/pipeline/stage.hpp"
#include "actors/serve/serve_job.hpp"
#include "actors/train/train_job.hpp"

#include <caf/scheduler/test_coordinator.hpp>

#include <functional>
#include <numeric>
#include <optional>
#include <regex>

using namespace salamander;

namespace {

using salamander::testing::deterministic;

using salamander::testing::coordinator_node;
using salamander::testing::deref;

actors::job_config flow_job(int64_t batches) {
  actors::job_config jc;
  jc.model = "cnn";
  jc.seed = 5;
  jc.batch_size = 16;
  jc.micro_batches = 2;
  jc.max_batches = batches;
  jc.dataset = "synthetic";
  jc.evaluate = false;
  jc.replicate_every = 2;
  jc.optimizer = "sgd";
  jc.lr = 0.05;
  return jc;
}

struct flow {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  std::shared_ptr<const models::dataset> train;
  actors::job_config jc;
  std::vector<node_actor> nodes;
  cluster_actor cluster;
  train_job_actor job;

  flow(int n, actors::job_config config)
      : sys(deterministic(cfg)),
        sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())),
        train(salamander::testing::synthetic_for("cnn", 3, 512)), jc(std::move(config)) {
    cluster = salamander::testing::coordinator_cluster(sys, n, nodes);
    job = sys.spawn(actors::train_job, jc, cluster, train, train);
  }

  ~flow() {
    caf::anon_send(cluster, leave_atom_v);
    caf::anon_send(job, leave_atom_v);
    for (auto& n : nodes) {
      caf::anon_send(n, leave_atom_v);
    }
    sched.run();
  }

  node_actor spawn_node(const std::string& name) { return coordinator_node(sys, name); }

  // A new node offers itself to the cluster (node --join), then the job
  // runs until it knows `nodes_after` nodes.
  bool join_node(const std::string& name, size_t nodes_after) {
    auto fresh = spawn_node(name);
    nodes.push_back(fresh);
    caf::anon_send(cluster, join_atom_v, caf::actor_cast<caf::actor>(fresh), name);
    return step_until([=](auto& st) { return st.nodes.size() == nodes_after; });
  }

  actors::train_job_state& state() { return deref<actors::train_job_state>(job); }

  // Runs messages (and, when none is left, the next timeout) until `done`
  // holds; false if the job ended first or nothing is left to run.
  bool step_until(const std::function<bool(const actors::train_job_state&)>& done,
                  size_t max_steps = 2'000'000) {
    for (size_t i = 0; i < max_steps; ++i) {
      auto& st = state();
      if (done(st)) {
        return true;
      }
      if (algorithms::is_over(st.phase)) {
        return false;
      }
      if (!sched.try_run_once() && !sched.trigger_timeout()) {
        return false;
      }
    }
    return false;
  }

  bool run_to_end() {
    return step_until([](auto& st) { return algorithms::is_over(st.phase); });
  }

  void kill_node(size_t i) { salamander::testing::kill_node(nodes[i]); }

  std::optional<models::weight_snapshot> weights() {
    auto out = std::make_shared<std::optional<models::weight_snapshot>>();
    auto j = job;
    sys.spawn([out, j](caf::event_based_actor* self) {
      self->request(j, std::chrono::seconds(10), snapshot_atom_v)
          .then([out](snapshot_payload& p) { *out = std::move(p.snapshot); },
                [](caf::error&) {});
    });
    sched.run(1000);
    while (!*out && (sched.try_run_once() || sched.trigger_timeout())) {
    }
    return *out;
  }

  // Finished, every batch once, the weights of one device.
  void check_exact() {
    auto& st = state();
    INFO("phase " << st.status.phase << ", error '" << st.status.error << "'");
    REQUIRE(st.phase == algorithms::job_phase::finished);
    std::vector<uint64_t> expect(static_cast<size_t>(jc.max_batches));
    std::iota(expect.begin(), expect.end(), uint64_t{0});
    CHECK(st.status.training.lineage == expect);
    auto w = weights();
    REQUIRE(w);
    CHECK(salamander::testing::max_weight_diff(
              *w, salamander::testing::single_device_weights(jc, *train)) <= 1e-5);
  }
};

bool committed_at_least(const actors::train_job_state& st, uint64_t n) {
  return st.committed >= n && st.phase == algorithms::job_phase::training;
}

} // namespace

TEST_CASE("an ended training job refuses the console's commands and keeps its status "
          "and weights",
          "[actor][flow]") {
  flow f(2, flow_job(4));
  REQUIRE(f.run_to_end());
  REQUIRE(f.state().phase == algorithms::job_phase::finished);
  using salamander::testing::ask_text;
  CHECK_THAT(ask_text(f.sys, f.job, pause_atom_v), Catch::Contains("job_ended") &&
                                                     Catch::Contains("the job has ended"));
  CHECK_THAT(ask_text(f.sys, f.job, checkpoint_atom_v, std::string("x.ckpt")),
             Catch::Contains("the job has ended; use --save for the final weights"));
  CHECK_THAT(ask_text(f.sys, f.job, replan_atom_v, std::string("")),
             Catch::Contains("the job has ended"));
  CHECK_THAT(ask_text(f.sys, f.job, kill_atom_v, uint32_t{0}),
             Catch::Contains("the job has ended"));
  // what a stage of the ended job still sends is dropped
  batch_stats late;
  late.batch = 99;
  caf::anon_send(f.job, done_atom_v, late);
  f.sched.run();
  CHECK(f.state().committed == 4);
  // the timeline is there after the end too, numbered from the start
  using salamander::testing::ask_events;
  auto kinds = ask_events(f.sys, f.job, 0);
  REQUIRE(kinds.size() >= 3);
  CHECK(kinds.front() == "start");
  CHECK(kinds.back() == "end");
  CHECK(std::find(kinds.begin(), kinds.end(), "plan") != kinds.end());
  CHECK(ask_events(f.sys, f.job, kinds.size() - 1) == std::vector<std::string>{"end"});
  CHECK(ask_events(f.sys, f.job, kinds.size()).empty());
  // the final weights are still there for --save
  f.check_exact();
}

TEST_CASE("a node lost during a re-plan is recovered from, exactly", "[actor][flow]") {
  auto jc = flow_job(12);
  jc.replan_at[4] = "1,1,2";
  flow f(3, jc);
  REQUIRE(f.step_until(
      [](auto& st) { return st.phase == algorithms::job_phase::replanning; }));
  CHECK(f.state().committed >= 4); // at the first flush after batch 4
  f.kill_node(2);                  // holds a stage of the old plan and one of the new
  REQUIRE(f.step_until(
      [](auto& st) { return st.phase == algorithms::job_phase::recovering; }));
  REQUIRE(f.run_to_end());
  CHECK(f.state().status.pipeline.recoveries == 1);
  CHECK(f.state().status.plan.find("local2") == std::string::npos);
  f.check_exact();
}

TEST_CASE("a second failure during recovery supersedes the first round, exactly",
          "[actor][flow]") {
  flow f(3, flow_job(12));
  REQUIRE(f.step_until([](auto& st) { return committed_at_least(st, 5); }));
  f.kill_node(1);
  // the first round is out asking for inventories when the second node dies
  REQUIRE(f.step_until([](auto& st) { return static_cast<bool>(st.round); }));
  auto first_attempt = f.state().attempt;
  f.kill_node(2);
  REQUIRE(f.step_until([&](auto& st) { return st.attempt > first_attempt; }));
  REQUIRE(f.run_to_end());
  auto& st = f.state();
  CHECK(st.status.pipeline.recoveries == 1); // one recovery, from both failures
  CHECK(st.status.plan == "local0[0,4)");
  CHECK(st.status.dead_nodes == std::vector<std::string>{"local1", "local2"});
  f.check_exact();
}

TEST_CASE("while a training job recovers, its broken pipeline's reports are dropped and "
          "a replica waits for the new one",
          "[actor][flow]") {
  flow f(3, flow_job(10));
  REQUIRE(f.step_until([](auto& st) { return committed_at_least(st, 3); }));
  f.kill_node(2);
  REQUIRE(f.step_until(
      [](auto& st) { return st.phase == algorithms::job_phase::recovering; }));
  auto& st = f.state();
  REQUIRE_FALSE(st.stages.empty());
  // a stage that survived reports a batch of the pipeline that broke
  auto committed = st.committed;
  auto reports = st.reports.size();
  batch_stats late;
  late.batch = committed;
  caf::send_as(caf::actor_cast<caf::actor>(st.stages[0]), f.job, done_atom_v, late);
  // the replicate comes after the report in the job's mailbox: refused as
  // recovering, so the report came while it recovered too
  CHECK_THAT(salamander::testing::ask_text(f.sys, f.job, replicate_atom_v),
             Catch::Contains("the job is recovering; replicate once it trains again"));
  CHECK(st.committed == committed);
  CHECK(st.reports.size() == reports);
  REQUIRE(f.run_to_end());
  CHECK(f.state().status.pipeline.recoveries == 1);
  f.check_exact();
}

TEST_CASE("a node lost while the console paused the job recovers and stays paused",
          "[actor][flow]") {
  flow f(3, flow_job(10));
  REQUIRE(f.step_until([](auto& st) { return committed_at_least(st, 3); }));
  caf::anon_send(f.job, pause_atom_v);
  REQUIRE(f.step_until([](auto& st) {
    return st.phase == algorithms::job_phase::paused && st.fed == st.committed;
  }));
  f.kill_node(0);
  REQUIRE(f.step_until([](auto& st) { return st.status.pipeline.recoveries == 1; }));
  // recovered, but still paused: nothing is fed until the console resumes
  REQUIRE(
      f.step_until([](auto& st) { return st.phase == algorithms::job_phase::paused; }));
  auto at = f.state().committed;
  for (int i = 0; i < 200 && (f.sched.try_run_once() || f.sched.trigger_timeout()); ++i) {
  }
  CHECK(f.state().committed == at);
  CHECK(f.state().fed == at);
  CHECK(f.state().phase == algorithms::job_phase::paused);
  caf::anon_send(f.job, resume_atom_v);
  REQUIRE(f.run_to_end());
  f.check_exact();
}

TEST_CASE("a node that joins during a recovery is planned with the survivors, exactly",
          "[actor][flow]") {
  flow f(3, flow_job(14));
  REQUIRE(f.step_until([](auto& st) { return committed_at_least(st, 5); }));
  f.kill_node(1);
  REQUIRE(f.step_until(
      [](auto& st) { return st.phase == algorithms::job_phase::recovering; }));
  // admitted by the cluster and known to the job before the recovery plans
  REQUIRE(f.join_node("fresh", 4));
  CHECK(f.state().phase == algorithms::job_phase::recovering);
  CHECK(f.state().status.pipeline.recoveries == 0);
  REQUIRE(f.run_to_end());
  auto& st = f.state();
  CHECK(st.status.pipeline.recoveries == 1);
  CHECK(st.status.dead_nodes == std::vector<std::string>{"local1"});
  CHECK_FALSE(st.nodes[3].dead);
  CHECK(st.nodes[3].name == "fresh");
  CHECK(st.status.plan.find("local1") == std::string::npos);
  f.check_exact();
}

TEST_CASE(
    "a stage of the old plan that dies while the new stages pull from it is recovered "
    "from, exactly",
    "[actor][flow]") {
  // The old supervisor could stall here: the old stage's death was ignored
  // (it was no longer in the plan) and the new stages, unable to pull,
  // either failed the job or never reported ready, with no timeout in the
  // re-planning phase.
  auto jc = flow_job(12);
  jc.replan_at[4] = "1,1,2";
  flow f(3, jc);
  // the launcher has just asked for the new stages; they will pull from the old
  REQUIRE(f.step_until(
      [](auto& st) { return st.phase == algorithms::job_phase::replanning; }));
  REQUIRE(f.state().old_stages.size() == 3);
  caf::anon_send_exit(f.state().old_stages[0], caf::exit_reason::kill);
  REQUIRE(f.step_until(
      [](auto& st) { return st.phase == algorithms::job_phase::recovering; }));
  REQUIRE(f.run_to_end());
  CHECK(f.state().status.pipeline.recoveries == 1);
  INFO("last failure: " << f.state().status.error);
  CHECK_THAT(f.state().status.error, Catch::Contains("old plan") ||
                                         Catch::Contains("pull") ||
                                         Catch::Contains("went down"));
  f.check_exact();
}

TEST_CASE("32 nodes: the job plans over them, loses a node of its plan, takes a new one "
          "in, and ends exactly",
          "[actor][flow][scale]") {
  auto jc = flow_job(8); // the whole epoch: 512 examples in batches of 64
  jc.batch_size = 64;
  jc.micro_batches = 16; // room for many data-parallel members
  jc.auto_plan = true;   // profiles and the planner (an even split needs a layer a node)
  flow f(32, jc);
  bool trained = f.step_until([](auto& st) { return committed_at_least(st, 3); });
  INFO("phase " << f.state().status.phase << ", error '" << f.state().status.error << "'");
  REQUIRE(trained);
  REQUIRE(f.state().nodes.size() == 32);
  // the last node the plan names ("local7[0,3)", "dp(local3:2 local9:1)")
  auto plan = f.state().status.plan;
  std::regex named("local([0-9]+)");
  std::optional<size_t> last; // local0 may be the last one named
  for (auto it = std::sregex_iterator(plan.begin(), plan.end(), named);
       it != std::sregex_iterator(); ++it) {
    last = std::stoul((*it)[1].str());
  }
  INFO("plan " << plan);
  REQUIRE(last.has_value());
  auto victim = *last;
  INFO("killing local" << victim);
  f.kill_node(victim);
  REQUIRE(f.step_until(
      [](auto& st) { return st.phase == algorithms::job_phase::recovering; }));
  REQUIRE(f.join_node("fresh", 33));
  REQUIRE(f.run_to_end());
  auto& st = f.state();
  CHECK(st.status.pipeline.recoveries == 1);
  CHECK(st.status.dead_nodes == std::vector<std::string>{"local" + std::to_string(victim)});
  CHECK(std::regex_search(st.status.plan, std::regex("local" + std::to_string(victim) +
                                                     "[^0-9]")) == false);
  f.check_exact();
}

TEST_CASE("a repartition that cannot be planned is refused and the job goes on",
          "[actor][flow]") {
  flow f(3, flow_job(8));
  REQUIRE(f.step_until([](auto& st) { return committed_at_least(st, 2); }));
  for (std::string balance : {"1,1", "0,2,2", "1,1,1,1"}) {
    INFO("repartition " << balance);
    auto reply = std::make_shared<std::string>();
    auto job = f.job;
    f.sys.spawn([=](caf::event_based_actor* self) {
      self->request(job, std::chrono::seconds(10), replan_atom_v, balance)
          .then([=](std::string& ok) { *reply = "accepted: " + ok; },
                [=](caf::error& err) {
                  *reply = "refused: " + self->system().render(err);
                });
    });
    REQUIRE(f.step_until([&](auto&) { return !reply->empty(); }));
    CHECK_THAT(*reply, Catch::StartsWith("refused: ") && Catch::Contains("refused"));
    CHECK_FALSE(f.state().replan_requested);
  }
  REQUIRE(f.run_to_end());
  CHECK(f.state().status.pipeline.replans == 0);
  f.check_exact();
}

TEST_CASE("a node that holds no stage is dropped without a rollback", "[actor][flow]") {
  auto jc = flow_job(10);
  jc.replan_at[2] = "2,2"; // two stages on local0 and local1; local2 is spare
  flow f(3, jc);
  REQUIRE(f.step_until([](auto& st) {
    return st.status.pipeline.replans == 1 && committed_at_least(st, 4);
  }));
  REQUIRE(f.state().status.plan == "local0[0,2) local1[2,4)");
  auto before = f.state().committed;
  f.kill_node(2);
  REQUIRE(f.step_until([](auto& st) { return st.nodes[2].dead; }));
  CHECK(f.state().phase == algorithms::job_phase::training);
  REQUIRE(f.run_to_end());
  auto& st = f.state();
  CHECK(st.committed > before);
  CHECK(st.status.pipeline.recoveries == 0);
  CHECK(st.status.training.redone_batches == 0);
  CHECK(st.status.pipeline.rollback_version == -1);
  CHECK(st.status.dead_nodes == std::vector<std::string>{"local2"});
  f.check_exact();
}

TEST_CASE("the test set streams through the stages a few chunks at a time",
          "[actor][flow]") {
  // sent at once, an evaluation's chunks queue in the supervisor's network
  // layer, which then reads no heartbeats: live nodes timed out together
  auto jc = flow_job(32); // one epoch of 512 examples, then an evaluation
  jc.evaluate = true;
  jc.eval_chunk = 40; // 13 chunks
  flow f(2, jc);
  REQUIRE(f.step_until(
      [](auto& st) { return st.phase == algorithms::job_phase::evaluating; }));
  auto stages = f.state().stages.size();
  REQUIRE(stages == 2);
  int64_t most = 0;
  REQUIRE(f.step_until([&](auto& st) {
    most = std::max(most, st.eval_pending);
    return st.phase != algorithms::job_phase::evaluating;
  }));
  CHECK(most == static_cast<int64_t>(stages) + 1); // one per stage, and one more
  REQUIRE(f.run_to_end());
  CHECK(f.state().status.test_accuracy >= 0.0);
  CHECK(f.state().eval_next >= f.train->size()); // every chunk went
  f.check_exact();
}

namespace salamander::algorithms {
// how Catch shows a serving phase (found by ADL)
std::ostream& operator<<(std::ostream& o, serve_phase p) {
  return o << to_string(p);
}
} // namespace salamander::algorithms

namespace {

// A serving job over `n` nodes on the test coordinator (an even split).
struct serve_flow {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  std::vector<node_actor> nodes;
  cluster_actor cluster;
  serve_job_actor job;
  std::vector<algorithms::serve_phase> phases; ///< every phase seen, in order

  explicit serve_flow(int n)
      : sys(deterministic(cfg)),
        sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())) {
    cluster = salamander::testing::coordinator_cluster(sys, n, nodes);
    actors::serve_config sc;
    sc.model = models::describe(models::model_spec::parse("cnn")).spec.canonical();
    sc.auto_plan = false; // an even split over the nodes
    sc.max_batch = 4;
    job = sys.spawn(actors::serve_job, sc, cluster);
  }

  ~serve_flow() {
    caf::anon_send(job, leave_atom_v);
    caf::anon_send(cluster, leave_atom_v);
    for (auto& n : nodes) {
      caf::anon_send(n, leave_atom_v);
    }
    sched.run();
  }

  actors::serve_job_state& state() { return deref<actors::serve_job_state>(job); }

  bool step_until(const std::function<bool()>& done, size_t max_steps = 2'000'000) {
    for (size_t i = 0; i < max_steps; ++i) {
      if (phases.empty() || phases.back() != state().phase) {
        phases.push_back(state().phase);
      }
      if (done()) {
        return true;
      }
      if (!sched.try_run_once() && !sched.trigger_timeout()) {
        return false;
      }
    }
    return false;
  }

  // A request of `rows` rows from outside: the rows of its answer once it
  // comes (-1 before; 0 and the error in `refused` when it was refused).
  struct request {
    std::shared_ptr<int64_t> rows = std::make_shared<int64_t>(-1);
    std::shared_ptr<caf::error> refused = std::make_shared<caf::error>();
  };
  request send(int64_t rows) {
    request r;
    auto& desc = state().desc;
    auto x = models::make_synthetic(3, rows, desc.input, desc.classes).images;
    auto j = job;
    sys.spawn([r, x, j](caf::event_based_actor* self) {
      self->request(j, std::chrono::seconds(30), infer_atom_v, tensor_payload{x})
          .then([r](tensor_payload& y) { *r.rows = y.tensor.size(0); },
                [r](caf::error& e) {
                  *r.rows = 0;
                  *r.refused = e;
                });
    });
    return r;
  }
  // Sends a request and steps until it is answered.
  request ask(int64_t rows) {
    auto r = send(rows);
    REQUIRE(step_until([&] { return *r.rows >= 0; }));
    return r;
  }
};

} // namespace

TEST_CASE("a serving job moves starting, serving, recovering, serving, finished, and "
          "answers every request",
          "[actor][flow][serve]") {
  using algorithms::serve_phase;
  serve_flow f(3);
  auto& st = f.state();
  REQUIRE(f.step_until([&] { return st.phase == serve_phase::serving; }));
  REQUIRE(st.current);
  CHECK(st.current->stages.size() == 3);
  CHECK(*f.ask(5).rows == 5);
  // a stage crashes: the service re-plans over the nodes and serves again
  caf::anon_send_exit(st.current->stages[1], caf::exit_reason::kill);
  REQUIRE(f.step_until([&] { return st.phase == serve_phase::recovering; }));
  REQUIRE(f.step_until([&] { return st.phase == serve_phase::serving; }));
  CHECK(*f.ask(3).rows == 3);
  CHECK(st.status.pipeline.recoveries == 1);
  CHECK(st.status.serving.failed_requests == 0);
  CHECK_THAT(salamander::testing::ask_text(f.sys, f.job, stop_atom_v, std::string("the test")),
             Catch::StartsWith("stopped"));
  REQUIRE(f.step_until([&] { return algorithms::is_over(st.phase); }));
  CHECK(st.phase == serve_phase::finished);
  CHECK(f.phases == std::vector<serve_phase>{serve_phase::starting, serve_phase::serving,
                                             serve_phase::recovering, serve_phase::serving,
                                             serve_phase::finished});
  CHECK(st.status.serving.requests == 2);
  // ended: a request is refused as busy (HTTP 503), a command as job_ended
  auto late = f.ask(2);
  CHECK(*late.rows == 0);
  CHECK(late.refused->code() == static_cast<uint8_t>(errc::busy));
  CHECK(st.status.serving.requests == 2);
  CHECK_THAT(salamander::testing::ask_text(f.sys, f.job, pause_atom_v),
             Catch::Contains("the serving job has ended"));
}

TEST_CASE("a paused serving job queues requests until resumed, a node lost while "
          "serving is re-planned around, and a node that joins is planned in, exactly",
          "[actor][flow][serve]") {
  using algorithms::serve_phase;
  serve_flow f(3);
  auto& st = f.state();
  REQUIRE(f.step_until([&] { return st.phase == serve_phase::serving; }));
  CHECK_THAT(salamander::testing::ask_text(f.sys, f.job, pause_atom_v),
             Catch::StartsWith("paused"));
  CHECK(st.status.paused_by_user);
  CHECK_THAT(salamander::testing::ask_text(f.sys, f.job, pause_atom_v),
             Catch::Contains("already paused"));
  // the pause is on the job's timeline (no metrics log is written here)
  auto kinds = salamander::testing::ask_events(f.sys, f.job, 0);
  CHECK(std::count(kinds.begin(), kinds.end(), "pause") == 1);
  // a request while paused waits in the queue: every message runs, and it
  // is still unanswered (no timeout is triggered: time stands still)
  auto queued = f.send(4);
  f.sched.run();
  CHECK(*queued.rows == -1);
  CHECK(st.requests.size() == 1);
  CHECK_THAT(salamander::testing::ask_text(f.sys, f.job, resume_atom_v),
             Catch::StartsWith("resumed with 1 request"));
  REQUIRE(f.step_until([&] { return *queued.rows >= 0; }));
  CHECK(*queued.rows == 4);
  CHECK_FALSE(st.status.paused_by_user);
  CHECK(salamander::testing::ask_text(f.sys, f.job, resume_atom_v) == "not paused");
  // a device dies while serving: the cluster tells the job, which re-plans
  // over the two that are left and serves again
  salamander::testing::kill_node(f.nodes[1]);
  REQUIRE(f.step_until([&] { return st.phase == serve_phase::recovering; }));
  REQUIRE(f.step_until([&] { return st.phase == serve_phase::serving; }));
  CHECK(st.status.dead_nodes == std::vector<std::string>{"local1"});
  REQUIRE(st.current);
  CHECK(st.current->stages.size() == 2);
  CHECK(*f.ask(3).rows == 3);
  // a new device joins through the cluster supervisor: the service plans it
  // in while the two-stage pipeline goes on answering
  auto fresh = salamander::testing::coordinator_node(f.sys, "fresh");
  f.nodes.push_back(fresh);
  CHECK_THAT(salamander::testing::ask_text(f.sys, f.cluster, join_atom_v,
                                           caf::actor_cast<caf::actor>(fresh),
                                           std::string("fresh")),
             Catch::Contains("planned in while the service goes on"));
  REQUIRE(f.step_until([&] {
    return st.current && st.current->stages.size() == 3 && !st.next;
  }));
  auto& planned = st.current->plan.nodes;
  CHECK(std::find(planned.begin(), planned.end(), 3u) != planned.end()); // fresh
  CHECK(*f.ask(2).rows == 2);
  CHECK(st.status.serving.failed_requests == 0);
  CHECK(st.status.serving.requests == 3);
}

TEST_CASE("after a recovery, serving makes its chain copies once what it sent again is "
          "answered, not before",
          "[actor][flow][serve]") {
  using algorithms::serve_phase;
  serve_flow f(3);
  auto& st = f.state();
  // the job's timeline, read in place (asking the job would step it)
  auto events_of = [&st](const std::string& kind) {
    std::vector<nlohmann::json> out;
    for (auto& line : st.events->since(0)) {
      auto e = nlohmann::json::parse(line);
      if (e.at("event") == kind) {
        out.push_back(e);
      }
    }
    return out;
  };
  REQUIRE(f.step_until([&] { return st.phase == serve_phase::serving; }));
  // a first pipeline copies its layers at once: nothing was sent again
  auto copies = events_of("chain_copies");
  REQUIRE(copies.size() == 1);
  CHECK(copies[0].at("after_resent") == 0);
  // three micro-batches (4 rows each, the most a micro-batch takes here);
  // the second stage dies while they are in the pipeline
  std::vector<serve_flow::request> asked{f.send(4), f.send(4), f.send(4)};
  REQUIRE(f.step_until([&] { return st.sent_unanswered == 3; }, 100'000));
  caf::anon_send_exit(st.current->stages[1], caf::exit_reason::kill);
  REQUIRE(f.step_until([&] { return st.phase == serve_phase::recovering; }));
  REQUIRE(f.step_until([&] { return st.phase == serve_phase::serving; }));
  // the new pipeline serves: it owes the micro-batches it sent again, and
  // has made no copy yet
  REQUIRE(st.replicate_waited == 3);
  CHECK(st.replicate_after.size() == st.replicate_waited);
  CHECK(events_of("chain_copies").size() == 1);
  REQUIRE(f.step_until(
      [&] {
        return std::all_of(asked.begin(), asked.end(),
                           [](auto& r) { return *r.rows >= 0; });
      },
      100'000));
  // once they are answered it copies, once (a serving job's tick never
  // lets the coordinator run dry: the bound makes a missing copy fail)
  REQUIRE(f.step_until([&] { return st.replicate_after.empty(); }, 100'000));
  copies = events_of("chain_copies");
  REQUIRE(copies.size() == 2);
  CHECK(copies[1].at("after_resent") == st.replicate_waited);
  CHECK(copies[1].at("answered_since_ready").get<size_t>() >= st.replicate_waited);
  CHECK(st.replicate_after.empty());
  for (auto& r : asked) {
    CHECK(*r.rows == 4);
  }
  CHECK(st.status.serving.failed_requests == 0);
}

namespace {

// One async stage on the test coordinator: stage 0 of 2 over the mlp, two
// micro-batches a batch, SGD, rows of 10 batches, and in place of the next
// stage and the job an actor that records what the stage sends to them.
struct async_stage_flow {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
  models::model_desc desc = models::describe(models::model_spec::parse("mlp"));
  stage_spec spec;
  std::shared_ptr<std::vector<std::string>> seen =
      std::make_shared<std::vector<std::string>>();
  using outputs_map = std::map<std::pair<uint64_t, uint32_t>, torch::Tensor>;
  std::shared_ptr<outputs_map> outputs = std::make_shared<outputs_map>();
  outputs_map inputs;
  caf::actor next;
  stage_actor stage;

  async_stage_flow(uint32_t delay, uint32_t slack, bool predict = false)
      : sys(deterministic(cfg)),
        sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())) {
    spec.model = "mlp";
    spec.fingerprint = desc.fingerprint;
    spec.seed = 3;
    spec.stages = 2;
    spec.end = 1;
    spec.micro_batches = 2;
    spec.micro_batch_size = 4;
    spec.schedule = "async";
    spec.optimizer = "sgd";
    spec.async_delay = delay;
    spec.async_slack = slack;
    spec.predict_weights = predict;
    spec.row_batches = 10;
    spec.total_batches = 10;
    auto seen_by = seen;
    auto out = outputs;
    next = sys.spawn([seen_by, out](caf::event_based_actor* self) -> caf::behavior {
      self->set_default_handler(caf::drop);
      return {
          [=](forward_atom, uint64_t b, uint32_t m, tensor_payload& x) {
            seen_by->push_back("F" + std::to_string(b) + "." + std::to_string(m));
            (*out)[{b, m}] = x.tensor;
          },
          [=](done_atom, const batch_stats& s) {
            seen_by->push_back("done" + std::to_string(s.batch));
          },
      };
    });
    stage = sys.spawn(actors::stage, spec, actors::node_emulation{});
    caf::anon_send(stage, wire_atom_v, caf::actor{}, next, next);
    sched.run();
  }

  ~async_stage_flow() {
    caf::anon_send_exit(stage, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(next, caf::exit_reason::user_shutdown);
    sched.run();
  }

  // The job's input of micro-batch (b, m), random.
  void input(uint64_t b, uint32_t m) {
    std::vector<int64_t> shape{4};
    shape.insert(shape.end(), desc.input.begin(), desc.input.end());
    inputs[{b, m}] = torch::randn(shape);
    caf::anon_send(stage, forward_atom_v, b, m, tensor_payload{inputs[{b, m}]});
  }

  // The next stage's gradient for the stage's output of (b, m): ones.
  void gradient(uint64_t b, uint32_t m) {
    REQUIRE(outputs->count({b, m}) == 1);
    caf::anon_send(stage, backward_atom_v, b, m,
                   tensor_payload{torch::ones_like(outputs->at({b, m}))});
  }

  actors::stage_state& state() {
    return salamander::testing::deref<actors::stage_state>(stage);
  }
};

std::vector<std::string> first_ops(const std::vector<algorithms::async_op>& row,
                                   size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n && i < row.size(); ++i) {
    out.push_back((row[i].op == algorithms::op_kind::forward ? "F" : "B") +
                  std::to_string(row[i].batch) + "." + std::to_string(row[i].micro));
  }
  return out;
}

} // namespace

TEST_CASE(
    "an async stage steps a finished batch in a gap of its row or when an operation "
    "needs the step, not before a forward it can run",
    "[actor][pipeline][async]") {
  // stage 0 of 2, two micro-batches a batch, delay 2 (batches 0-2 use
  // version 0, batch 3 version 1), slack 2
  async_stage_flow f(2, 2);
  // the premise: after batch 0's last backward the row runs the forward of
  // (2, 0), then the backward of (1, 0) on the copy batch 0's gradients are
  // in; after batch 1's last backward it runs the forward of (3, 0)
  REQUIRE(first_ops(algorithms::async_order(2, 0, 2, 0, 10, 2, 2), 10) ==
          std::vector<std::string>{"F0.0", "F0.1", "F1.0", "B0.0", "F1.1", "B0.1", "F2.0",
                                   "B1.0", "F2.1", "B1.1"});
  auto& st = f.state();
  for (uint64_t b : {0, 1}) {
    for (uint32_t m : {0, 1}) {
      f.input(b, m);
    }
  }
  f.input(2, 0);
  f.sched.run();
  CHECK(*f.seen == std::vector<std::string>{"F0.0", "F0.1", "F1.0"});
  f.seen->clear();

  // batch 0's gradients: its step waits past the forward of (2, 0) and is
  // taken before the backward of (1, 0), which would add to its gradients
  f.gradient(0, 0);
  f.gradient(0, 1);
  f.sched.run();
  CHECK(*f.seen == std::vector<std::string>{"F1.1", "F2.0", "done0"});
  CHECK(st.version == 1);
  f.seen->clear();

  // batch 1's: with the input of (3, 0) not here, the stage steps while it
  // waits for it
  f.input(2, 1);
  f.gradient(1, 0);
  f.gradient(1, 1);
  f.sched.run();
  CHECK(*f.seen == std::vector<std::string>{"F2.1", "done1"});
  CHECK(st.version == 2);
  CHECK_FALSE(st.unstepped);
}

TEST_CASE("an async stage drains where the job stops feeding, stashes the version the "
          "next batch trains on, and goes on with it after the drain",
          "[actor][pipeline][async]") {
  // delay 1 (batch b trains on version b - 1), slack 1; the version as it
  // was, or (weight prediction) moved one step on by SGD's momentum
  auto predict = GENERATE(false, true);
  INFO("weight prediction " << predict);
  async_stage_flow f(1, 1, predict);
  // the premise: batch 1's last backward comes after batch 2's first
  // forward in the row, so without a drain batch 1 waits for batch 2
  auto row = algorithms::async_order(2, 0, 2, 0, 10, 1, 1);
  auto at = [&](algorithms::op_kind op, uint64_t b, int m) {
    return std::find(row.begin(), row.end(), algorithms::async_op{op, b, m}) - row.begin();
  };
  REQUIRE(at(algorithms::op_kind::forward, 2, 0) < at(algorithms::op_kind::backward, 1, 1));
  auto& st = f.state();
  for (uint64_t b : {0, 1}) {
    for (uint32_t m : {0, 1}) {
      f.input(b, m);
    }
  }
  f.sched.run();
  f.gradient(0, 0);
  f.gradient(0, 1);
  f.sched.run();
  REQUIRE(st.version == 1);
  std::vector<torch::Tensor> version1; // what batch 2 is to train on
  for (auto& p : st.model->all()->parameters()) {
    version1.push_back(torch::empty_like(p));
    models::predict_weights(*st.opt, f.spec.optimizer, p, predict ? 1 : 0,
                            version1.back());
  }
  if (predict) {
    CHECK_FALSE(torch::equal(version1[0], st.model->all()->parameters()[0]));
  }
  f.gradient(1, 0);
  f.gradient(1, 1);
  f.sched.run();
  CHECK(st.version == 1); // batch 1 waits behind the forward of batch 2
  CHECK(std::count(f.seen->begin(), f.seen->end(), "done1") == 0);

  // the job feeds nothing from batch 2 on and asks for a drain there
  caf::anon_send(f.stage, drain_atom_v, uint64_t{2});
  f.sched.run();
  CHECK(std::count(f.seen->begin(), f.seen->end(), "done1") == 1);
  CHECK(st.version == 2);

  // a snapshot now carries version 1, which batch 2 trains on
  auto got = std::make_shared<std::optional<models::weight_snapshot>>();
  auto stage = f.stage;
  f.sys.spawn([got, stage](caf::event_based_actor* self) {
    self->request(stage, std::chrono::seconds(10), snapshot_atom_v, uint64_t{0}, uint64_t{1},
                  current_version)
        .then([got](snapshot_payload& p) { *got = std::move(p.snapshot); },
              [](caf::error&) {});
  });
  f.sched.run();
  REQUIRE(*got);
  CHECK((*got)->version == 2);
  REQUIRE((*got)->layers.size() == 1);
  auto& stashed = (*got)->layers[0].stashed;
  REQUIRE(stashed.size() == version1.size());
  for (size_t i = 0; i < stashed.size(); ++i) {
    CHECK(stashed[i].name.size() > 3);
    CHECK(stashed[i].name.substr(stashed[i].name.size() - 3) == "@-1");
    CHECK(torch::equal(stashed[i].tensor, version1[i]));
  }

  // after the drain batch 2 trains on version 1, not on the newest (2):
  // the drain changed no version
  f.input(2, 0);
  f.input(2, 1);
  f.sched.run();
  REQUIRE(f.outputs->count({2, 0}) == 1);
  models::layered_model at1(f.desc, f.spec.seed, 0, 1);
  {
    torch::NoGradGuard no_grad;
    auto params = at1.all()->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].copy_(version1[i]);
    }
  }
  models::range_executor exec1(at1.all(), true, false);
  torch::NoGradGuard no_grad;
  auto& out = f.outputs->at({2, 0});
  CHECK(torch::allclose(exec1.infer(f.inputs[{2, 0}]), out));
  CHECK_FALSE(torch::allclose(st.exec->infer(f.inputs[{2, 0}]), out));
}
