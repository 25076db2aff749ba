// Recovery: a stage actor crashes or a node process is killed mid-run; the
// supervisor rolls back to a replicated version, re-plans over the
// survivors and replays. The final weights equal a fault-free run's and the
// lineage holds every batch id exactly once.
#include "reference.hpp"

#include "actors/cluster/cluster_file.hpp"
#include "actors/train/train_job.hpp"
#include "actors/node/node_process.hpp"
#include "actors/node/system.hpp"
#include "models/trainer.hpp"

#include <fstream>
#include <numeric>

using namespace salamander;

namespace {

double diff_to_fault_free(const actors::job_config& jc, const models::dataset& train,
                          const models::weight_snapshot& got) {
  return salamander::testing::max_weight_diff(
      got, salamander::testing::single_device_weights(jc, train));
}

using salamander::testing::check_exact;
using salamander::testing::job;
using salamander::testing::synthetic;
using salamander::testing::check_lineage;
using salamander::testing::watched;

// Kills stage `index` through the supervisor once `after` batches are
// committed (while training), recording the supervisor's reply (or its
// error) and the plan the stage died under.
struct stage_kill {
  bool done = false;
  std::string reply;
  std::string plan;
};

void kill_stage_after(caf::actor_system& sys, actors::job_options& opts, int64_t after,
                      uint32_t index, stage_kill& kill) {
  auto sup = std::make_shared<cluster_actor>();
  opts.on_start = [sup](cluster_actor s) { *sup = std::move(s); };
  opts.on_status = [&sys, &kill, sup, after, index](const job_status& s) {
    if (kill.done || s.training.committed < after || s.phase != status_phase::training) {
      return;
    }
    kill.plan = s.plan;
    caf::scoped_actor self{sys};
    self->request(*sup, std::chrono::seconds(5), kill_atom_v, index)
        .receive([&](std::string& what) { kill.reply = what; },
                 [&](caf::error& err) { kill.reply = sys.render(err); });
    kill.done = true;
  };
}

// `jc` on three local nodes of one core, stage `index` killed once `after`
// batches are committed (kill_stage_after).
actors::job_result run_killing_stage(const actors::job_config& jc,
                                     const std::shared_ptr<const models::dataset>& train,
                                     int64_t after, uint32_t index, stage_kill& kill) {
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto opts = watched();
  kill_stage_after(sys, opts, after, index, kill);
  return actors::run_job(sys, jc, actors::local_nodes(sys, 3, 1), train, train, opts);
}

// `jc` over the node processes `procs` (the supervisor's system configured
// with `sopts`); once `after` batches are committed (while training), `sig`
// goes to the nodes `indices`, all in the same status update.
actors::job_result
run_signalling_nodes(actors::process_cluster& procs, const actors::job_config& jc,
                     const std::shared_ptr<const models::dataset>& train, int64_t after,
                     const std::vector<size_t>& indices, int sig = SIGKILL,
                     const actors::system_options& sopts = {}) {
  caf::actor_system_config cfg;
  actors::configure(cfg, sopts);
  caf::actor_system sys{cfg};
  auto nodes = actors::connect_nodes(sys, procs.nodes());
  REQUIRE(static_cast<bool>(nodes));
  auto opts = watched();
  bool sent = false;
  opts.on_status = [&](const job_status& s) {
    if (!sent && s.training.committed >= after && s.phase == status_phase::training) {
      for (auto i : indices) {
        procs[i].signal(sig);
      }
      sent = true;
    }
  };
  return actors::run_job(sys, jc, *nodes, train, train, opts);
}

// `jc` over the node processes `procs`, node `index` killed (-9) once
// `after` batches are committed (while training).
actors::job_result run_killing_node(actors::process_cluster& procs,
                                    const actors::job_config& jc,
                                    const std::shared_ptr<const models::dataset>& train,
                                    int64_t after, size_t index) {
  return run_signalling_nodes(procs, jc, train, after, {index});
}

} // namespace

TEST_CASE("a crashed stage actor is recovered from replicas, exactly",
          "[actor][recovery]") {
  torch::set_num_threads(1);
  auto train = synthetic(1, 2048);
  for (uint32_t k : {2u, 0u}) { // replicas every 2 batches; none (restart from the seed)
    INFO("replicate every " << k);
    auto jc = job(40, k);
    stage_kill kill;
    auto r = run_killing_stage(jc, train, 5, 1, kill);
    INFO("phase " << r.status.phase << ", error '" << r.status.error << "', recoveries "
                  << r.status.pipeline.recoveries << ", killed " << kill.done << ": "
                  << kill.reply);
    CHECK_THAT(kill.reply, Catch::Contains("stage 1") && Catch::Contains("killed"));
    REQUIRE(r.status.error.find("went down") != std::string::npos); // the last failure
    REQUIRE(r.status.phase == status_phase::finished);
    CHECK(r.status.pipeline.recoveries == 1);
    CHECK(r.status.training.committed == 40);
    if (k == 2) {
      CHECK(r.status.pipeline.rollback_version >= 4);
      CHECK(r.status.pipeline.rollback_version % 2 == 0);
    } else {
      CHECK(r.status.pipeline.rollback_version == 0);
    }
    check_exact(r, jc, *train, 40);
  }
}

TEST_CASE("a stage's lost layers are pulled from its chain holder and the central one "
          "at once, exactly",
          "[actor][recovery]") {
  // the MLP's six layers, two a stage; stage 1's replicas are on node 2's
  // holder (the chain) and the central holder (every replication): with
  // links alike, each serves one of its two layers
  torch::set_num_threads(1);
  auto train = synthetic(1, 2048);
  auto jc = job(20, 2);
  jc.model = "mlp:depth=5";
  jc.global_every = 1;
  salamander::testing::temp_dir dir;
  jc.metrics_path = dir.file("m.jsonl");
  stage_kill kill;
  auto r = run_killing_stage(jc, train, 5, 1, kill);
  INFO("phase " << r.status.phase << ", error '" << r.status.error << "', killed "
                << kill.done << ": " << kill.reply);
  REQUIRE(r.status.phase == status_phase::finished);
  CHECK(r.status.pipeline.recoveries == 1);
  CHECK(kill.plan == "local0[0,2) local1[2,4) local2[4,6)");
  CHECK(r.status.plan == kill.plan);
  auto pulls = salamander::testing::events(jc.metrics_path, "pulls");
  REQUIRE(pulls.size() == 3);
  for (auto& p : pulls) {
    INFO(p.dump());
    auto& from = p["from"];
    if (p["stage"] == 1) {
      // the lost layers: one from each holder, neither from a stage
      REQUIRE(from.size() == 2);
      std::set<std::string> holders{from[0]["source"].get<std::string>(),
                                    from[1]["source"].get<std::string>()};
      CHECK(holders == std::set<std::string>{"local2", "central"});
      CHECK(from[0]["end"] == from[1]["begin"]);
      CHECK_FALSE(from[0]["stage"].get<bool>());
      CHECK_FALSE(from[1]["stage"].get<bool>());
    } else {
      // a survivor's layers: from itself, on its own node
      REQUIRE(from.size() == 1);
      CHECK(from[0]["source"] == (p["stage"] == 0 ? "local0" : "local2"));
      CHECK(from[0]["stage"].get<bool>());
    }
  }
  check_exact(r, jc, *train, 20);
}

TEST_CASE("under the async schedule a crashed stage is recovered from, exactly",
          "[actor][recovery][async]") {
  // replicas every 4 batches in the middle of the stages' rows: each
  // carries the older version that the batch after it trains on (the
  // job's delay, 1), and the survivors replay from it exactly what the
  // fault-free async run computes (and again with weight aggregation every
  // 3 updates, which falls on replicas too: 12)
  torch::set_num_threads(1);
  auto train = synthetic(1, 2048);
  for (uint32_t aggregate : {0u, 3u}) {
    INFO("weight aggregation every " << aggregate);
    auto jc = job(20, 4);
    jc.schedule = "async";
    jc.weight_aggregation = aggregate;
    stage_kill kill;
    auto r = run_killing_stage(jc, train, 7, 1, kill);
    INFO("phase " << r.status.phase << ", error '" << r.status.error << "', killed "
                  << kill.done << ": " << kill.reply);
    REQUIRE(r.status.phase == status_phase::finished);
    CHECK(r.status.pipeline.recoveries == 1);
    CHECK(r.status.pipeline.rollback_version >= 4);
    CHECK(r.status.pipeline.rollback_version % 4 == 0);
    check_lineage(r.status, 20);
    REQUIRE(r.weights);
    CHECK(salamander::testing::max_weight_diff(
              *r.weights,
              salamander::testing::single_device_async_weights(jc, *train, 1, 0, aggregate)) <=
          1e-5);
  }
}

TEST_CASE("kill -9 of a node process: the survivors carry on, exactly",
          "[actor][recovery][process]") {
  torch::set_num_threads(1);
  auto train = synthetic(1, 1024);
  actors::process_cluster procs(3, "n");
  auto jc = job(16, 3);
  auto r = run_killing_node(procs, jc, train, 7, 1);
  INFO(r.status.error);
  REQUIRE(r.status.phase == status_phase::finished);
  CHECK(r.status.pipeline.recoveries >= 1);
  CHECK(r.status.dead_nodes == std::vector<std::string>{"n2"});
  CHECK(r.status.plan.find("n2") == std::string::npos);
  CHECK(r.status.pipeline.rollback_version >= 6);
  check_exact(r, jc, *train, 16);
  CHECK(procs[0].stop() == 0);
  CHECK(procs[2].stop() == 0);
}

TEST_CASE(
    "kill -9 over EMULATED slow links: the lost layers move no faster than the links "
    "allow, exactly",
    "[actor][recovery][process]") {
  // a 16 MB MLP (48 MB with Adam's state) on three nodes whose links, and
  // the supervisor's, are emulated at 80 Mbit/s: node 2's layers come back
  // from node 3's holder, the central one or a survivor, each part held
  // back by its sender's link; so the pulls take at least the bytes each
  // sender sends over its rate (the job's `link_limit_s`)
  torch::set_num_threads(1);
  auto train = synthetic(1, 1024);
  std::vector<std::string> link = {"--link-mbps", "80"};
  actors::process_cluster procs(3, "n", {link, link, link});
  auto jc = job(12, 3);
  jc.model = "mlp:hidden=1024,depth=4";
  jc.central_link_mbps = 80;
  salamander::testing::temp_dir dir;
  jc.metrics_path = dir.file("m.jsonl");
  auto r = run_killing_node(procs, jc, train, 5, 1);
  INFO(r.status.error);
  REQUIRE(r.status.phase == status_phase::finished);
  REQUIRE(r.status.pipeline.recoveries == 1);
  auto recovered = salamander::testing::events(jc.metrics_path, "recovered");
  REQUIRE(recovered.size() == 1);
  auto& e = recovered[0];
  INFO(e.dump());
  // node 2 held two of the 4 MB layers: one at least crossed a link (the
  // other may be on the holder of the node that takes it)
  auto moved = e["moved_bytes"].get<double>();
  CHECK(moved >= 4e6);
  CHECK(e["sent_bytes"].count("n2") == 0);
  auto limit = e["link_limit_s"].get<double>();
  CHECK(limit * 1e7 * static_cast<double>(e["sent_bytes"].size()) >= moved * 0.999);
  CHECK(e["transfer_s"].get<double>() >= limit);
  check_exact(r, jc, *train, 12);
  CHECK(procs[0].stop() == 0);
  CHECK(procs[2].stop() == 0);
}

TEST_CASE(
    "a job planned by measure probes the survivors' links again before it plans their "
    "recovery, exactly",
    "[actor][recovery][process]") {
  torch::set_num_threads(1);
  auto train = synthetic(1, 1024);
  actors::process_cluster procs(3, "n");
  auto jc = job(16, 3);
  jc.auto_plan = true;
  jc.stages = 3;      // a stage on each node, as `--stages 3`
  jc.replan_gain = 0; // no live re-plans
  salamander::testing::temp_dir dir;
  jc.metrics_path = dir.file("m.jsonl");
  auto r = run_killing_node(procs, jc, train, 7, 1);
  INFO(r.status.error);
  REQUIRE(r.status.phase == status_phase::finished);
  REQUIRE(r.status.pipeline.recoveries == 1);
  // the log in order: the failure, the probes of the two survivors' links
  // (both ways; none to the dead node), then the recovery's plan
  std::vector<std::string> order;
  nlohmann::json probed;
  std::ifstream in(jc.metrics_path);
  for (std::string line; std::getline(in, line);) {
    auto e = nlohmann::json::parse(line);
    auto kind = e["event"].get<std::string>();
    if (kind == "failure" || kind == "links_probed" || kind == "recovery_plan") {
      if (order.empty() || order.back() != kind) {
        order.push_back(kind);
      }
      if (kind == "links_probed") {
        probed = e;
      }
    }
  }
  CHECK(order == std::vector<std::string>{"failure", "links_probed", "recovery_plan"});
  INFO(probed.dump());
  CHECK(probed["of"] == 2);
  CHECK(probed["pairs"].get<int>() >= 1);
  for (auto& l : probed["links"]) {
    CHECK(l["from"] != "n2");
    CHECK(l["to"] != "n2");
    CHECK(l["bytes_per_s"].get<double>() > 0);
  }
  check_exact(r, jc, *train, 16);
  CHECK(procs[0].stop() == 0);
  CHECK(procs[2].stop() == 0);
}

TEST_CASE("a hung node (SIGSTOP) is detected by its silence and recovered from, exactly",
          "[actor][recovery][process]") {
  torch::set_num_threads(1);
  auto train = synthetic(1, 2048);
  actors::process_cluster procs(3, "n");
  auto jc = job(30, 3);
  actors::system_options sopts;
  sopts.connection_timeout = std::chrono::milliseconds(2500); // nodes beat every second
  auto r = run_signalling_nodes(procs, jc, train, 6, {1}, SIGSTOP, sopts);
  procs[1].signal(SIGCONT);
  REQUIRE(r.status.phase == status_phase::finished);
  CHECK(r.status.pipeline.recoveries >= 1);
  CHECK(r.status.dead_nodes == std::vector<std::string>{"n2"});
  CHECK(r.status.plan.find("n2") == std::string::npos);
  check_exact(r, jc, *train, 30);
}

TEST_CASE("two adjacent nodes killed together: the global replica serves, exactly",
          "[actor][recovery][process]") {
  torch::set_num_threads(1);
  auto train = synthetic(1, 2048);
  actors::process_cluster procs(4, "n");
  auto jc = job(24, 4);
  // stage 1's chain replica lives on n3, stage 2's on n4: with n2 and n3
  // gone, stage 1's layers exist only in the central holder
  auto r = run_signalling_nodes(procs, jc, train, 9, {1, 2});
  REQUIRE(r.status.phase == status_phase::finished);
  CHECK(r.status.pipeline.recoveries >= 1);
  auto dead = r.status.dead_nodes;
  std::sort(dead.begin(), dead.end());
  CHECK(dead == std::vector<std::string>{"n2", "n3"});
  CHECK(r.status.pipeline.rollback_version >= 8);
  check_exact(r, jc, *train, 24);
}

namespace {

caf::actor spare_node(caf::actor_system& sys, const std::string& name,
                      actors::emulation_config emu = {}) {
  actors::node_config cfg;
  cfg.name = name;
  cfg.host = "embedded";
  emu.force_dilation = true;
  cfg.emulation.config = emu;
  cfg.emulation.limiter = std::make_shared<actors::cpu_limiter>(emu);
  return caf::actor_cast<caf::actor>(sys.spawn(actors::node, cfg));
}

} // namespace

TEST_CASE("a failed node rejoins at the next flush, exactly", "[actor][recovery][join]") {
  torch::set_num_threads(1);
  auto train = synthetic(1, 2048);
  auto jc = job(40, 4);
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto nodes = actors::local_nodes(sys, 2, 1);
  auto opts = watched();
  cluster_actor sup;
  opts.on_start = [&](cluster_actor s) { sup = s; };
  bool killed = false, joined = false;
  std::string join_reply, again_reply, other_reply;
  opts.on_status = [&](const job_status& s) {
    if (!killed && s.training.committed >= 6 && s.phase == status_phase::training) {
      caf::anon_send_exit(nodes[1].handle, caf::exit_reason::kill);
      killed = true;
    }
    if (killed && !joined && s.pipeline.recoveries >= 1 && s.training.committed >= 14) {
      caf::scoped_actor self{sys};
      auto ask = [&](const caf::actor& node, std::string& reply) {
        self->request(sup, std::chrono::seconds(5), join_atom_v, node,
                      std::string("local1"))
            .receive([&](std::string& r) { reply = r; },
                     [&](caf::error& err) { reply = sys.render(err); });
      };
      auto spare = spare_node(sys, "local1");
      ask(spare, join_reply);
      // the same node offering itself again is in; another of its name is not
      ask(spare, again_reply);
      auto impostor = spare_node(sys, "local1");
      ask(impostor, other_reply);
      caf::anon_send_exit(impostor, caf::exit_reason::user_shutdown);
      joined = true;
    }
  };
  auto r = actors::run_job(sys, jc, nodes, train, train, opts);
  REQUIRE(r.status.phase == status_phase::finished);
  CHECK_THAT(join_reply, Catch::Contains("next flush"));
  CHECK_THAT(again_reply, Catch::Contains("already in the cluster"));
  CHECK_THAT(other_reply, Catch::Contains("already running"));
  CHECK(r.status.dead_nodes.empty());
  CHECK(r.status.plan.find("local1") != std::string::npos);
  CHECK(r.status.pipeline.replans >= 1);
  check_exact(r, jc, *train, 40);
}

TEST_CASE("too little capacity pauses the job, a new node resumes it, exactly",
          "[actor][recovery][join]") {
  torch::set_num_threads(1);
  auto train = synthetic(1, 2048);
  auto jc = job(30, 3);
  jc.model = "mlp:hidden=512"; // fc1 6.4 MB with Adam state, fc2 + head 4.3 MB
  jc.balance = {1, 2};
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  actors::emulation_config small;
  small.mem_mb = 8; // holds fc1, not the whole model
  auto nodes = actors::local_nodes(sys, 2, 1, {small, actors::emulation_config{}});
  auto opts = watched();
  cluster_actor sup;
  opts.on_start = [&](cluster_actor s) { sup = s; };
  bool killed = false, joined = false;
  std::string paused_message;
  opts.on_status = [&](const job_status& s) {
    if (!killed && s.training.committed >= 6 && s.phase == status_phase::training) {
      caf::anon_send_exit(nodes[1].handle, caf::exit_reason::kill);
      killed = true;
    }
    if (killed && !joined && s.phase == status_phase::paused) {
      paused_message = s.error;
      caf::anon_send(sup, join_atom_v, spare_node(sys, "spare"), std::string("spare"));
      joined = true;
    }
  };
  auto r = actors::run_job(sys, jc, nodes, train, train, opts);
  INFO(r.status.error);
  REQUIRE(r.status.phase == status_phase::finished);
  CHECK_THAT(paused_message, Catch::Contains("paused") &&
                                 Catch::Contains("cannot hold the model") &&
                                 Catch::Contains("waiting for a node to join"));
  CHECK(r.status.plan.find("spare") != std::string::npos);
  check_exact(r, jc, *train, 30);
}

TEST_CASE("a second failure during recovery is folded into it, exactly",
          "[actor][recovery]") {
  torch::set_num_threads(1);
  auto train = synthetic(1, 2048);
  auto jc = job(30, 3);
  jc.failure_window = std::chrono::milliseconds(300);
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto nodes = actors::local_nodes(sys, 4, 1);
  auto opts = watched();
  int kills = 0;
  opts.on_status = [&](const job_status& s) {
    if (kills == 0 && s.training.committed >= 7 && s.phase == status_phase::training) {
      caf::anon_send_exit(nodes[1].handle, caf::exit_reason::kill);
      kills = 1;
    } else if (kills == 1 && s.phase == status_phase::recovering) {
      caf::anon_send_exit(nodes[3].handle, caf::exit_reason::kill); // while recovering
      kills = 2;
    }
  };
  auto r = actors::run_job(sys, jc, nodes, train, train, opts);
  REQUIRE(r.status.phase == status_phase::finished);
  CHECK(kills == 2);
  auto dead = r.status.dead_nodes;
  std::sort(dead.begin(), dead.end());
  CHECK(dead == std::vector<std::string>{"local1", "local3"});
  CHECK(r.status.plan.find("local1") == std::string::npos);
  CHECK(r.status.plan.find("local3") == std::string::npos);
  check_exact(r, jc, *train, 30);
}

TEST_CASE(
    "the node holding the only fresh chain replica dies: the stage's own copy serves, "
    "exactly",
    "[actor][recovery]") {
  torch::set_num_threads(1);
  auto train = synthetic(1, 2048);
  auto jc = job(40, 2);
  jc.global_every = 1000; // no global replica in this run: chains only
  jc.balance = {1, 1, 2}; // stage i on node i
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto nodes = actors::local_nodes(sys, 3, 1);
  auto opts = watched();
  bool killed = false;
  opts.on_status = [&](const job_status& s) {
    // stage 0's chain replicas live on local1; with it gone, the only copy
    // of stage 0's layers at a replicated version is the one stage 0 kept
    if (!killed && s.training.committed >= 12 && s.phase == status_phase::training) {
      caf::anon_send_exit(nodes[1].handle, caf::exit_reason::kill);
      killed = true;
    }
  };
  auto r = actors::run_job(sys, jc, nodes, train, train, opts);
  REQUIRE(r.status.phase == status_phase::finished);
  CHECK(r.status.pipeline.recoveries == 1);
  CHECK(r.status.dead_nodes == std::vector<std::string>{"local1"});
  // without the stage's own copy nothing complete would be left but the seed
  CHECK(r.status.pipeline.rollback_version >= 12);
  check_exact(r, jc, *train, 40);
}

TEST_CASE("the fast policy keeps survivors' weights: nothing replays, not exact",
          "[actor][recovery][policy]") {
  torch::set_num_threads(1);
  auto train = synthetic(1, 2048);
  auto run = [&](const std::string& policy) {
    auto jc = job(40, 10);
    jc.recovery_policy = policy;
    jc.balance = {1, 1, 2};
    caf::actor_system_config cfg;
    actors::configure(cfg);
    caf::actor_system sys{cfg};
    auto nodes = actors::local_nodes(sys, 3, 1);
    auto opts = watched();
    bool killed = false;
    opts.on_status = [&](const job_status& s) {
      if (!killed && s.training.committed >= 12 && s.phase == status_phase::training) {
        caf::anon_send_exit(nodes[1].handle, caf::exit_reason::kill);
        killed = true;
      }
    };
    auto r = actors::run_job(sys, jc, nodes, train, train, opts);
    REQUIRE(r.status.phase == status_phase::finished);
    REQUIRE(r.status.pipeline.recoveries == 1);
    REQUIRE(r.weights);
    return std::make_pair(r.status, diff_to_fault_free(jc, *train, *r.weights));
  };
  auto [exact, exact_diff] = run("exact");
  auto [fast, fast_diff] = run("fast");
  CHECK(exact.training.exact);
  CHECK(exact.training.redone_batches >=
        2); // rolled back to version 10, failure at 12 or later
  CHECK(exact_diff <= 1e-5);
  CHECK_FALSE(fast.training.exact);
  CHECK(fast.training.redone_batches == 0);
  // local1's layer (1) came back at version 10: it missed the updates since
  CHECK(fast.training.missed_layer_updates >= 2);
  std::vector<uint64_t> all(40);
  std::iota(all.begin(), all.end(), uint64_t{0});
  CHECK(fast.training.lineage == all); // every batch fed once, though a layer missed some
  CHECK(fast_diff > 1e-4);    // and that shows in the weights
  CHECK(std::isfinite(fast.loss));
}

TEST_CASE("a data-parallel member that crashes is recovered from, under both policies",
          "[actor][recovery][dp]") {
  torch::set_num_threads(1);
  auto train = synthetic(1, 2048);
  for (std::string policy : {"exact", "fast"}) {
    for (uint32_t victim : {0u, 2u}) { // the leader (it replicates), and a member
      INFO(policy << " policy, member " << victim << " crashes");
      auto jc = job(30, 3);
      jc.data_parallel = true;
      jc.recovery_policy = policy;
      stage_kill kill;
      auto r = run_killing_stage(jc, train, 7, victim, kill);
      INFO("phase " << r.status.phase << ", error '" << r.status.error
                    << "', kill: " << kill.reply);
      REQUIRE(r.status.phase == status_phase::finished);
      CHECK(kill.plan == "dp(local0:2 local1:1 local2:1)[0,4)");
      CHECK(r.status.pipeline.recoveries == 1);
      CHECK(r.status.training.committed == 30);
      // the stage crashed, not its node: data parallelism over the three
      // nodes again, with fresh members pulling the weights
      CHECK(r.status.plan == "dp(local0:2 local1:1 local2:1)[0,4)");
      CHECK(r.status.pipeline.plan_version == 2);
      check_lineage(r.status, 30);
      REQUIRE(r.weights);
      // the members hold the same weights: under the fast policy a survivor
      // has every layer, so no layer comes back stale (the policy stays
      // inexact: a survivor may already have stepped the batch the dead
      // member never reported)
      CHECK(r.status.training.missed_layer_updates == 0);
      if (policy == "exact") {
        CHECK(r.status.training.exact);
        CHECK(diff_to_fault_free(jc, *train, *r.weights) <= 1e-5);
      }
    }
  }
}
