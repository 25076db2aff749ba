// Chaos: random kills of stage actors, and of node processes (kill -9, or
// SIGSTOP: a hang), during runs of a few hundred batches, over several
// seeds, bounded in time. Pass: the run completes, the final weights equal
// the fault-free run's, the lineage lists every batch once, and no process
// is left behind.
#include "../actors/reference.hpp"

#include "actors/cluster/cluster_file.hpp"
#include "actors/train/train_job.hpp"
#include "actors/node/node_process.hpp"
#include "actors/node/system.hpp"
#include "algorithms/sampling.hpp"

#include <caf/io/middleman.hpp>

#include <array>
#include <csignal>
#include <map>
#include <numeric>

using namespace salamander;

TEST_CASE("random stage crashes over several seeds never change the result",
          "[chaos]") {
  torch::set_num_threads(1);
  auto train = salamander::testing::synthetic_for("mlp:depth=4", 1, 64 * 200);
  for (uint64_t seed : {1, 2, 3, 4, 5, 6}) {
    INFO("chaos seed " << seed);
    actors::job_config jc;
    jc.model = "mlp:depth=4";
    jc.seed = seed;
    jc.batch_size = 64;
    jc.micro_batches = 4;
    jc.max_batches = 200;
    jc.dataset = "synthetic";
    jc.evaluate = false;
    jc.replicate_every = 1 + static_cast<uint32_t>(seed % 4) * 3;
    // every schedule: the async one (delay 1 at M = 4 for up to 5 stages)
    // replays, like the flushed ones, to what one device computes with it
    jc.schedule = seed > 4 ? "async" : seed % 2 ? "1f1b" : "gpipe";
    jc.progress_timeout = std::chrono::seconds(30);
    algorithms::splitmix64 rng(seed * 7919);
    // 3 to 5 kills at random batches, of random stages
    std::vector<int64_t> kill_at;
    int kills = 3 + static_cast<int>(rng.below(3));
    for (int i = 0; i < kills; ++i) {
      kill_at.push_back(10 + static_cast<int64_t>(rng.below(170)));
    }
    std::sort(kill_at.begin(), kill_at.end());
    caf::actor_system_config cfg;
    actors::configure(cfg);
    caf::actor_system sys{cfg};
    actors::job_options opts;
    opts.fetch_weights = true;
    opts.poll = std::chrono::milliseconds(3);
    cluster_actor sup;
    opts.on_start = [&](cluster_actor s) { sup = s; };
    size_t next = 0;
    int done_kills = 0;
    opts.on_status = [&](const job_status& s) {
      if (next < kill_at.size() && s.training.committed >= kill_at[next] &&
          s.phase == status_phase::training) {
        auto stages = static_cast<uint32_t>(std::count(s.plan.begin(), s.plan.end(), '['));
        caf::anon_send(sup, kill_atom_v, static_cast<uint32_t>(rng.below(stages)));
        ++next;
        ++done_kills;
      }
    };
    auto start = std::chrono::steady_clock::now();
    auto r = actors::run_job(sys, jc, actors::local_nodes(sys, 4, 1), train, train, opts);
    auto took = std::chrono::steady_clock::now() - start;
    REQUIRE(r.status.phase == status_phase::finished);
    CHECK_THAT(r.status.pipeline.schedule, Catch::StartsWith(jc.schedule));
    CHECK(done_kills == kills);
    CHECK(r.status.pipeline.recoveries >= 1);
    std::vector<uint64_t> expect(200);
    std::iota(expect.begin(), expect.end(), uint64_t{0});
    CHECK(r.status.training.lineage == expect);
    REQUIRE(r.weights);
    CHECK(salamander::testing::max_weight_diff(
              *r.weights, salamander::testing::single_device_weights_as_scheduled(
                              jc, *train)) <= 1e-5);
    CHECK(took < std::chrono::seconds(60)); // bounded: a hang would show here, not in CI's limit
  }
}

TEST_CASE("random process kills, hangs and stage crashes over several seeds never change "
          "the result",
          "[chaos][process]") {
  torch::set_num_threads(1);
  const int64_t batches = 240;
  auto train = salamander::testing::synthetic_for("mlp:depth=4", 1, 64 * batches);
  std::vector<pid_t> all_pids;
  for (uint64_t seed : {11, 12, 13}) {
    INFO("process chaos seed " << seed);
    actors::job_config jc;
    jc.model = "mlp:depth=4";
    jc.seed = seed;
    jc.batch_size = 64;
    jc.micro_batches = 4;
    jc.max_batches = batches;
    jc.dataset = "synthetic";
    jc.evaluate = false;
    jc.replicate_every = 3 + static_cast<uint32_t>(seed % 3) * 2;
    jc.schedule = seed == 13 ? "async" : "1f1b";
    jc.progress_timeout = std::chrono::seconds(30);
    // SGD: across processes a tensor may land at another alignment and
    // LibTorch's kernels round differently in the last bit; Adam's
    // normalisation blows such bits up over hundreds of near-zero gradients,
    // SGD keeps them at that size, so 1e-5 still tells a lost or doubled
    // batch from rounding.
    jc.optimizer = "sgd";
    jc.lr = 0.05;
    algorithms::splitmix64 rng(seed * 104729);
    // to see what happened when a seed fails: the metrics log of each run
    if (const char* dir = std::getenv("SALAMANDER_CHAOS_METRICS")) {
      jc.metrics_path = std::string(dir) + "/seed" + std::to_string(seed) + ".jsonl";
    }
    std::vector<std::unique_ptr<actors::node_process>> procs;
    std::vector<actors::cluster_node> listed;
    for (int i = 0; i < 3; ++i) {
      auto name = "p" + std::to_string(seed) + "n" + std::to_string(i + 1);
      procs.push_back(std::make_unique<actors::node_process>(name));
      listed.push_back({name, "127.0.0.1", procs.back()->port()});
      all_pids.push_back(procs.back()->pid());
    }
    caf::actor_system_config cfg;
    actors::system_options sopts;
    sopts.connection_timeout = std::chrono::milliseconds(1500); // finds the hung node
    actors::configure(cfg, sopts);
    caf::actor_system sys{cfg};
    auto nodes = actors::connect_nodes(sys, listed);
    REQUIRE(static_cast<bool>(nodes));
    actors::job_options opts;
    opts.fetch_weights = true;
    opts.poll = std::chrono::milliseconds(5);
    cluster_actor sup;
    opts.on_start = [&](cluster_actor s) { sup = s; };
    // three events at random batches: crash a stage, kill -9 a node process,
    // stop one (SIGSTOP: found by its silence); a lost node is replaced by a new process that
    // joins the running job
    std::vector<int64_t> at;
    for (int i = 0; i < 3; ++i) {
      at.push_back(20 + static_cast<int64_t>(rng.below(170)));
    }
    std::sort(at.begin(), at.end());
    std::vector<std::string> kinds;
    size_t next = 0;
    int64_t recoveries_expected = 0;
    std::map<std::string, size_t> proc_of; // live node name -> index in procs
    for (size_t i = 0; i < listed.size(); ++i) {
      proc_of[listed[i].name] = i;
    }
    int joins = 0;
    std::string join_error;
    opts.on_status = [&](const job_status& s) {
      if (next >= at.size() || s.training.committed < at[next] ||
          s.phase != status_phase::training ||
          s.pipeline.recoveries < recoveries_expected) {
        return; // one failure at a time: the next after the last is recovered
      }
      // every seed sees each kind once, in a seed-dependent order
      auto kind = std::array<const char*, 3>{"crash", "kill9", "hang"}[(seed + next) % 3];
      kinds.emplace_back(kind);
      ++next;
      ++recoveries_expected;
      if (std::string(kind) == "crash") {
        auto stages = static_cast<uint32_t>(std::count(s.plan.begin(), s.plan.end(), '['));
        caf::anon_send(sup, kill_atom_v, static_cast<uint32_t>(rng.below(stages)));
        return;
      }
      // a node that runs a stage (the plan may leave one spare)
      std::vector<std::string> busy;
      for (auto& [name, idx] : proc_of) {
        if (s.plan.find(name + "[") != std::string::npos) {
          busy.push_back(name);
        }
      }
      auto victim = busy[rng.below(busy.size())];
      auto& p = *procs[proc_of[victim]];
      p.signal(std::string(kind) == "kill9" ? SIGKILL : SIGSTOP);
      proc_of.erase(victim);
      // its replacement: a new device joins
      auto name = "p" + std::to_string(seed) + "j" + std::to_string(++joins);
      procs.push_back(std::make_unique<actors::node_process>(name));
      all_pids.push_back(procs.back()->pid());
      proc_of[name] = procs.size() - 1;
      // dialled as the supervisor dials a node that does not answer yet:
      // again (a node process just started on a loaded host once refused
      // the first handshake: "system_error", 2026-12-06 under ctest -j2)
      auto h = sys.middleman().remote_actor<node_actor>("127.0.0.1", procs.back()->port());
      for (int tries = 1; !h && tries < 3; ++tries) {
        h = sys.middleman().remote_actor<node_actor>("127.0.0.1", procs.back()->port());
      }
      if (!h) {
        join_error = sys.render(h.error()) + " (" + caf::to_string(h.error()) + ")";
        return;
      }
      caf::anon_send(sup, join_atom_v, caf::actor_cast<caf::actor>(*h), name);
    };
    auto start = std::chrono::steady_clock::now();
    auto r = actors::run_job(sys, jc, *nodes, train, train, opts);
    auto took = std::chrono::steady_clock::now() - start;
    INFO("events: " << kinds.size() << ", error: " << r.status.error << join_error);
    REQUIRE(r.status.phase == status_phase::finished);
    CHECK_THAT(r.status.pipeline.schedule, Catch::StartsWith(jc.schedule));
    CHECK(join_error.empty());
    CHECK(kinds.size() == at.size());
    CHECK(r.status.pipeline.recoveries >= static_cast<int64_t>(kinds.size()));
    std::vector<uint64_t> expect(static_cast<size_t>(batches));
    std::iota(expect.begin(), expect.end(), uint64_t{0});
    CHECK(r.status.training.lineage == expect);
    REQUIRE(r.weights);
    CHECK(salamander::testing::max_weight_diff(
              *r.weights, salamander::testing::single_device_weights_as_scheduled(
                              jc, *train)) <= 1e-5);
    CHECK(took < std::chrono::seconds(90));
    procs.clear(); // stops every node process, stopped ones included
  }
  for (auto pid : all_pids) {
    CHECK(::kill(pid, 0) != 0); // none left behind, not even as a zombie
  }
}
