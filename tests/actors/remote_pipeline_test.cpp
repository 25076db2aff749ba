// Pipelines across `salamander node` processes on loopback, and the faults
// a supervisor meets at start-up.
#include "reference.hpp"

#include "actors/cluster/auth.hpp"
#include "actors/cluster/cluster_file.hpp"
#include "actors/federated/fed_job.hpp"
#include "actors/split/split_job.hpp"
#include "actors/train/train_job.hpp"
#include "actors/node/node_process.hpp"
#include "actors/node/system.hpp"
#include "messages/errors.hpp"
#include "models/trainer.hpp"

#include <caf/io/middleman.hpp>

using namespace salamander;
using salamander::actors::node_process;

namespace {

using salamander::testing::synthetic;

actors::job_config job(int64_t steps) {
  actors::job_config jc;
  jc.model = "cnn";
  jc.seed = 5;
  jc.batch_size = 32;
  jc.micro_batches = 4;
  jc.max_batches = steps;
  jc.dataset = "synthetic";
  jc.evaluate = false;
  jc.request_timeout = std::chrono::seconds(10);
  jc.progress_timeout = std::chrono::seconds(30);
  return jc;
}

actors::job_options polling() {
  actors::job_options opts;
  opts.poll = std::chrono::milliseconds(20);
  return opts;
}

} // namespace

TEST_CASE("three node processes hold the single-device weights after K steps",
          "[actor][pipeline][process]") {
  torch::set_num_threads(1);
  auto train = synthetic(1, 512);
  auto test = synthetic(2, 64);
  actors::process_cluster procs(3, "n");
  for (auto schedule : {"gpipe", "1f1b"}) {
    INFO(schedule);
    auto jc = job(4);
    jc.schedule = schedule;
    caf::actor_system_config cfg;
    actors::configure(cfg);
    caf::actor_system sys{cfg};
    auto nodes = actors::connect_nodes(sys, procs.nodes());
    REQUIRE(static_cast<bool>(nodes));
    auto opts = polling();
    opts.fetch_weights = true;
    auto result = actors::run_job(sys, jc, *nodes, train, test, opts);
    REQUIRE(result.status.error == "");
    REQUIRE(result.weights);

    CHECK(salamander::testing::max_weight_diff(
              *result.weights, salamander::testing::single_device_weights(jc, *train)) <=
          1e-5);
  }
  for (size_t i = 0; i < 3; ++i) {
    CHECK(procs[i].stop() == 0); // SIGTERM: a clean leave
  }
}

// With --dp-reduce chain, data-parallel members sum their gradients along
// their chain, node to node (models::dp_chunks), dialled directly like
// pipeline neighbours; the
// MLP's 0.67M gradients go as three chunks each way. Across processes the
// sum is the same to the last bit as in one process.
TEST_CASE("data-parallel members in node processes sum along their chain, each pair "
          "connected directly, to the weights of one process",
          "[actor][dp][process]") {
  torch::set_num_threads(1);
  auto jc = job(4);
  jc.model = "mlp:hidden=512";
  jc.data_parallel = true;
  jc.dp_reduce = "chain";
  jc.optimizer = "sgd"; // (a data-parallel sum is exact up to rounding, which SGD keeps
  jc.lr = 0.05;         // small; see the data-parallel tests)
  auto train = salamander::testing::synthetic_for(jc.model, 1, 512);
  REQUIRE(models::describe(models::model_spec::parse(jc.model)).total_params() >
          2 * actors::tuning::dp_chunk_values);
  auto run = [&](bool in_processes, const std::string& metrics) {
    caf::actor_system_config cfg;
    actors::configure(cfg);
    caf::actor_system sys{cfg};
    auto opts = polling();
    opts.fetch_weights = true;
    auto c = jc;
    c.metrics_path = metrics;
    if (!in_processes) {
      return actors::run_job(sys, c, actors::local_nodes(sys, 3, 1), train, train, opts);
    }
    actors::process_cluster procs(3, "n");
    auto nodes = actors::connect_nodes(sys, procs.nodes());
    REQUIRE(static_cast<bool>(nodes));
    auto r = actors::run_job(sys, c, *nodes, train, train, opts);
    for (size_t i = 0; i < 3; ++i) {
      CHECK(procs[i].stop() == 0);
    }
    return r;
  };
  salamander::testing::temp_dir dir;
  auto remote = run(true, dir.file("remote.jsonl"));
  auto local = run(false, "");
  REQUIRE(remote.status.error == "");
  CHECK_THAT(remote.status.plan, Catch::StartsWith("dp(n1:2 n2:1 n3:1)["));
  REQUIRE(remote.weights);
  REQUIRE(local.weights);
  CHECK(salamander::testing::max_weight_diff(*remote.weights, *local.weights) == 0);
  CHECK(salamander::testing::max_weight_diff(
            *remote.weights, salamander::testing::single_device_weights(jc, *train)) <=
        1e-5);
  // the members before and after each other connected directly: the sum
  // does not go through the supervisor's process
  std::set<std::pair<std::string, std::string>> peers;
  for (auto& e : salamander::testing::events(dir.file("remote.jsonl"), "peer")) {
    if (e["direct"].get<bool>()) {
      peers.emplace(e["from"].get<std::string>(), e["to"].get<std::string>());
    }
  }
  CHECK(peers ==
        std::set<std::pair<std::string, std::string>>{{"n1", "n2"}, {"n2", "n3"}});
}

// Weights between a round job and clients in node processes go in bounded
// parts (actors/clients/weights_parts.hpp); a model of 1.1 MB is several
// parts each way. The job ends with the very weights it gets when its
// clients run in this process, where weights travel in the message itself.
TEST_CASE("federated and split jobs over node processes end with the weights of "
          "clients in this process (weights in parts)",
          "[actor][federated][split][process]") {
  torch::set_num_threads(1);
  const std::string model = "mlp:hidden=256";
  auto canonical = models::describe(models::model_spec::parse(model)).spec.canonical();
  actors::process_cluster procs(2, "p");
  auto both = [&](auto run) {
    caf::actor_system_config cfg;
    actors::configure(cfg);
    caf::actor_system sys{cfg};
    auto local = actors::local_nodes(sys, 2, 1);
    auto here = run(sys, local);
    for (auto& n : local) {
      caf::anon_send(n.handle, leave_atom_v);
    }
    auto remote = actors::connect_nodes(sys, procs.nodes());
    REQUIRE(static_cast<bool>(remote));
    auto there = run(sys, *remote);
    return std::make_pair(std::move(here), std::move(there));
  };
  actors::job_options opts;
  opts.fetch_weights = true;
  {
    actors::fed_config cfg;
    cfg.model = canonical;
    cfg.rounds = 2;
    cfg.dataset = "synthetic";
    cfg.alpha = 0;
    cfg.batch_size = 32;
    cfg.max_samples = 96;
    cfg.profile_batches = 1;
    auto [here, there] = both([&](caf::actor_system& sys, std::vector<actors::remote_node> n) {
      return actors::run_fed_job(sys, cfg, std::move(n), opts);
    });
    REQUIRE(here.status.error == "");
    REQUIRE(there.status.error == "");
    CHECK(there.status.rounds.round == 2);
    CHECK(there.status.rounds.dropped_updates == 0);
    REQUIRE(here.weights);
    REQUIRE(there.weights);
    CHECK(salamander::testing::max_weight_diff(*here.weights, *there.weights) <= 1e-6);
  }
  {
    actors::split_config cfg;
    cfg.model = canonical;
    cfg.method = "vanilla";
    cfg.cut = 1;
    cfg.rounds = 2;
    cfg.dataset = "synthetic";
    cfg.alpha = 0;
    cfg.batch_size = 32;
    cfg.max_samples = 64;
    auto [here, there] = both([&](caf::actor_system& sys, std::vector<actors::remote_node> n) {
      return actors::run_split_job(sys, cfg, std::move(n), opts);
    });
    REQUIRE(here.status.error == "");
    REQUIRE(there.status.error == "");
    CHECK(there.status.rounds.round == 2);
    REQUIRE(here.weights);
    REQUIRE(there.weights);
    CHECK(salamander::testing::max_weight_diff(*here.weights, *there.weights) <= 1e-6);
  }
  for (size_t i = 0; i < 2; ++i) {
    CHECK(procs[i].stop() == 0);
  }
}

TEST_CASE("an unreachable node is named in the error", "[actor][startup][process]") {
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  uint16_t closed_port = 0;
  {
    node_process gone("gone"); // learn a port, then free it
    closed_port = gone.port();
  }
  auto nodes = actors::connect_nodes(sys, {{"ghost", "127.0.0.1", closed_port}});
  REQUIRE(!static_cast<bool>(nodes));
  auto msg = sys.render(nodes.error());
  CHECK_THAT(msg, Catch::Contains("ghost") &&
                      Catch::Contains(std::to_string(closed_port)) &&
                      Catch::Contains("unreachable"));
}

TEST_CASE("a node killed during start-up fails the job promptly, naming it",
          "[actor][startup][process]") {
  auto train = synthetic(1, 256);
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  actors::process_cluster procs(2, "n");
  auto& b = procs[1];
  auto nodes = actors::connect_nodes(sys, procs.nodes());
  REQUIRE(static_cast<bool>(nodes));
  b.signal(SIGKILL);
  auto jc = job(3);
  auto start = std::chrono::steady_clock::now();
  auto result = actors::run_job(sys, jc, *nodes, train, train, polling());
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(result.status.phase == status_phase::failed);
  CHECK_THAT(result.status.error, Catch::Contains("n2"));
  CHECK(took < jc.request_timeout); // the down message, not a timeout
}

namespace {

// A node of another build: answers hello with another protocol, or refuses
// every stage as a node with another model zoo would.
node_actor::behavior_type odd_node(node_actor::pointer self, uint32_t protocol) {
  return {
      [=](hello_atom, uint32_t, const std::string& challenge) {
        node_info info;
        info.name = "odd";
        info.protocol = protocol;
        info.proof = actors::prove("", "node", "odd", challenge); // an open cluster
        return info;
      },
      [=](auth_atom, const std::string&, const std::string&) {},
      [=](spawn_atom, stage_spec spec) -> caf::result<caf::actor> {
        spec.fingerprint = "0000000000000000"; // what a different zoo would compute
        return caf::make_error(errc::model_mismatch,
                               "node odd: " + actors::check_stage_spec(spec));
      },
      [=](spawn_atom, fed_client_spec) -> caf::result<caf::actor> {
        return caf::make_error(errc::model_mismatch, "node odd runs no federated client");
      },
      [=](spawn_atom, split_client_spec) -> caf::result<caf::actor> {
        return caf::make_error(errc::model_mismatch, "node odd runs no split client");
      },
      [=](profile_atom, const std::string&, uint32_t) -> caf::result<device_report> {
        return caf::make_error(errc::bad_config, "node odd cannot profile");
      },
      [=](probe_atom, caf::actor, const std::string&) -> caf::result<link_report> {
        return caf::make_error(errc::bad_config, "node odd cannot probe");
      },
      [=](peer_atom, const std::string&, uint16_t) { return false; },
      [=](slow_atom, double) -> caf::result<std::string> {
        return caf::make_error(errc::bad_config, "node odd cannot slow down");
      },
      [=](cut_atom, double) -> caf::result<std::string> {
        return caf::make_error(errc::bad_config, "node odd cannot cut its link");
      },
      [=](kill_atom) -> caf::result<std::string> {
        return caf::make_error(errc::bad_config, "node odd cannot be killed");
      },
      [=](leave_atom) { self->quit(); },
  };
}

} // namespace

TEST_CASE("nodes of another protocol or model build are refused by name",
          "[actor][startup]") {
  auto train = synthetic(1, 256);
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto opts = polling();
  auto jc = job(2);

  auto other_protocol = sys.spawn(odd_node, protocol_version + 1);
  auto r = actors::run_job(sys, jc, {{"odd", other_protocol}}, train, train, opts);
  CHECK(r.status.phase == status_phase::failed);
  CHECK_THAT(r.status.error, Catch::Contains("node odd speaks protocol " +
                                             std::to_string(protocol_version + 1)));

  auto other_zoo = sys.spawn(odd_node, protocol_version);
  // a node listed under another name than its own --name: said so, not
  // mistaken for a wrong secret
  r = actors::run_job(sys, jc, {{"node1", other_zoo}}, train, train, opts);
  CHECK(r.status.phase == status_phase::failed);
  CHECK_THAT(r.status.error, Catch::Contains("lists node 'node1'") &&
                                 Catch::Contains("calls itself 'odd'"));
  CHECK_THAT(r.status.error, !Catch::Contains("secret"));
  r = actors::run_job(sys, jc, {{"odd", other_zoo}}, train, train, opts);
  CHECK(r.status.phase == status_phase::failed);
  CHECK_THAT(r.status.error, Catch::Contains("odd") && Catch::Contains("fingerprint"));

  // and the real node refuses a spec whose fingerprint is not its own
  stage_spec spec;
  spec.model = "cnn";
  spec.fingerprint = "ffffffffffffffff";
  spec.end = 1;
  CHECK_THAT(actors::check_stage_spec(spec), Catch::Contains("fingerprint"));
  spec.fingerprint = models::describe(models::model_spec::parse("cnn")).fingerprint;
  CHECK(actors::check_stage_spec(spec) == "");
  spec.end = 9;
  CHECK_THAT(actors::check_stage_spec(spec), Catch::Contains("not within"));
  caf::anon_send(other_protocol, leave_atom_v);
  caf::anon_send(other_zoo, leave_atom_v);
}
