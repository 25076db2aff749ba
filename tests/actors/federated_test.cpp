// Federated learning (ELFISH mode) over local clients: FedAvg gives exactly
// the sample-weighted mean of what each client trains alone; every strategy
// runs its rounds to the end and improves the global model, ELFISH and the
// width-sliced baselines soft-train the emulated straggler; a killed client
// never stalls a round and rejoins a later one; a hung one is dropped when
// the round's wait ends; a restarted job resumes from its checkpoint.
#include "../support.hpp"

#include "actors/clients/client_work.hpp"
#include "actors/cluster/cluster_file.hpp"
#include "actors/federated/fed_job.hpp"
#include "actors/node/system.hpp"
#include "algorithms/sampling.hpp"
#include "messages/checkpoint.hpp"
#include "models/data.hpp"
#include "models/layered_model.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

using namespace salamander;
using salamander::testing::events;
using salamander::testing::temp_dir;

namespace {

const std::string model = "mlp:hidden=96";

actors::fed_config config(const std::string& strategy, int64_t rounds) {
  actors::fed_config cfg;
  cfg.model = models::describe(models::model_spec::parse(model)).spec.canonical();
  cfg.strategy = strategy;
  cfg.rounds = rounds;
  cfg.dataset = "synthetic";
  cfg.alpha = 0; // IID: the clients' shards are alike, only their speeds differ
  cfg.batch_size = 32;
  cfg.lr = 0.05;
  cfg.max_samples = 320;
  cfg.profile_batches = 2;
  cfg.settings.buffer = 2;
  // the deadline strategy's default (1.25 x a round of these few batches,
  // tens of milliseconds) leaves no room for a loaded host
  cfg.settings.deadline_s = 5;
  return cfg;
}

struct fed_system {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  fed_system() {
    salamander::testing::one_compute_thread(); // as the CLI runs a device
    actors::configure(cfg, {});
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

std::vector<actors::emulation_config> shares(std::vector<double> s) {
  std::vector<actors::emulation_config> out;
  for (double x : s) {
    actors::emulation_config c;
    c.cpu_share = x;
    out.push_back(c);
  }
  return out;
}


void leave(std::vector<actors::remote_node>& nodes) {
  for (auto& n : nodes) {
    caf::anon_send(n.handle, leave_atom_v);
  }
}

// Runs a federated job over n local nodes to its end, which must be a
// finish, and fetches its global weights.
actors::job_result finished_with_weights(fed_system& s, const actors::fed_config& cfg,
                                         int n) {
  auto nodes = actors::local_nodes(*s.sys, n, 1);
  actors::job_options opts;
  opts.fetch_weights = true;
  auto r = actors::run_fed_job(*s.sys, cfg, nodes, opts);
  leave(nodes);
  INFO(r.status.error);
  REQUIRE(r.status.phase == status_phase::finished);
  REQUIRE(r.weights);
  return r;
}

// What client `c` trains alone in round 1 on the shard its node computes
// (actors::load_shard: label skew, classes apart), with FedRS's scale of
// the logits of the classes the shard lacks by `restricted` (1: plain).
std::pair<models::weight_snapshot, int64_t>
train_alone(const actors::fed_config& cfg, uint32_t c, uint32_t n, double restricted) {
  auto desc = models::describe(models::model_spec::parse(cfg.model));
  auto sh = actors::load_shard(cfg.dataset, desc, cfg.data_dir, "", c, n, cfg.alpha,
                               static_cast<uint32_t>(cfg.classes_apart), cfg.seed,
                               cfg.max_samples);
  models::layered_model m(desc, cfg.seed);
  auto net = m.all();
  torch::optim::SGD opt(net->parameters(),
                        torch::optim::SGDOptions(cfg.lr).momentum(cfg.momentum));
  auto size = sh.shard.size(0);
  auto order =
      algorithms::epoch_permutation(algorithms::mix_seed(cfg.seed, c, 1), 0, size);
  auto counts = actors::label_counts(*sh.data, sh.shard);
  for (int64_t b = 0; b < size; b += cfg.batch_size) {
    std::vector<int64_t> positions(order.begin() + b,
                                   order.begin() + std::min(size, b + cfg.batch_size));
    auto idx = sh.shard.index_select(0, torch::tensor(positions, torch::kInt64));
    opt.zero_grad();
    auto logits = net->forward(sh.data->images.index_select(0, idx));
    logits =
        logits * actors::restricted_softmax_scale(counts, logits.size(1), restricted);
    torch::nn::functional::cross_entropy(logits, sh.data->labels.index_select(0, idx))
        .backward();
    opt.step();
  }
  return {models::capture(m, nullptr, "", 1), size};
}

// The largest difference between `global` and the sample-weighted mean of
// what two clients train alone.
double off_mean(const models::weight_snapshot& global,
                const std::pair<models::weight_snapshot, int64_t>& a,
                const std::pair<models::weight_snapshot, int64_t>& b) {
  double worst = 0;
  auto wa = static_cast<double>(a.second) / static_cast<double>(a.second + b.second);
  for (size_t l = 0; l < global.layers.size(); ++l) {
    for (size_t p = 0; p < global.layers[l].params.size(); ++p) {
      auto mean = a.first.layers[l].params[p].tensor * wa +
                  b.first.layers[l].params[p].tensor * (1 - wa);
      worst = std::max(worst, salamander::testing::max_abs_diff(
                                  mean, global.layers[l].params[p].tensor));
    }
  }
  return worst;
}

} // namespace

TEST_CASE("restricted softmax (FedRS): each client scales the logits of the classes its "
          "shard lacks, and FedAvg gives the mean of what each trains alone so",
          "[actor][federated]") {
  auto scale = actors::restricted_softmax_scale({5, 0, 2}, 4, 0.25);
  REQUIRE(scale.sizes() == torch::IntArrayRef({4}));
  CHECK(scale[0].item<float>() == 1.0f);
  CHECK(scale[1].item<float>() == 0.25f); // none of class 1
  CHECK(scale[2].item<float>() == 1.0f);
  CHECK(scale[3].item<float>() == 0.25f); // beyond the counts: none either
  fed_system s;
  auto cfg = config("fedavg", 1);
  cfg.classes_apart = 1; // client 1 holds classes client 0 lacks, and the other way
  cfg.restricted_softmax = 0.25;
  auto r = finished_with_weights(s, cfg, 2);
  auto a = train_alone(cfg, 0, 2, 0.25), b = train_alone(cfg, 1, 2, 0.25);
  CHECK(off_mean(*r.weights, a, b) < 1e-5);
  // and the restriction made a difference: plain softmax trains otherwise
  auto pa = train_alone(cfg, 0, 2, 1.0), pb = train_alone(cfg, 1, 2, 1.0);
  CHECK(off_mean(*r.weights, pa, pb) > 1e-3);
}

TEST_CASE("federated averaging gives the sample-weighted mean of what each client "
          "trains alone",
          "[actor][federated]") {
  fed_system s;
  auto cfg = config("fedavg", 1);
  auto r = finished_with_weights(s, cfg, 2);
  REQUIRE(r.status.rounds.round == 1);
  CHECK(off_mean(*r.weights, train_alone(cfg, 0, 2, 1.0), train_alone(cfg, 1, 2, 1.0)) <
        1e-5);
  // and it learnt something: the synthetic classes are well apart
  CHECK(r.status.test_accuracy > 0.5);
}

TEST_CASE("every strategy runs its rounds and improves the global model; the width-sliced "
          "ones soft-train the slow client",
          "[actor][federated]") {
  for (std::string strategy :
       {"fedavg", "deadline", "elfish", "heterofl", "fedrolex", "fedbuff"}) {
    DYNAMIC_SECTION(strategy) {
      fed_system s;
      temp_dir dir;
      auto cfg = config(strategy, 3);
      cfg.metrics_path = dir.file("m.jsonl");
      // client 2 runs at a tenth of the others' speed (EMULATED, dilation:
      // each client's time is its CPU time over its share, whatever else
      // loads the host)
      auto nodes = actors::local_nodes(*s.sys, 3, 1, shares({0.5, 0.5, 0.05}));
      auto r = actors::run_fed_job(*s.sys, cfg, nodes);
      leave(nodes);
      INFO(r.status.error);
      REQUIRE(r.status.phase == status_phase::finished);
      CHECK(r.status.rounds.round == 3);
      CHECK(r.status.test_accuracy > 0.3);
      auto rounds = events(cfg.metrics_path, "round");
      REQUIRE(rounds.size() == 3);
      CHECK(rounds.back()["accuracy"].get<double>() == r.status.test_accuracy);
      if (strategy == "elfish" || strategy == "heterofl" || strategy == "fedrolex") {
        double slowest_keep = 1;
        for (auto& e : events(cfg.metrics_path, "round_start")) {
          for (auto& t : e["tasks"]) {
            if (t["client"] == 2) {
              slowest_keep = std::min(slowest_keep, t["keep"].get<double>());
            }
          }
        }
        CHECK(slowest_keep < 1.0);
      }
      if (strategy == "fedbuff") {
        // asynchronous: each server step took `buffer` updates
        for (auto& e : rounds) {
          CHECK(e["contributions"].size() == 2);
        }
      }
    }
  }
}

TEST_CASE("a killed client never stalls a round and rejoins a later one",
          "[actor][federated]") {
  fed_system s;
  temp_dir dir;
  auto cfg = config("fedavg", 100000); // the test stops it
  cfg.metrics_path = dir.file("m.jsonl");
  cfg.max_samples = 1200; // rounds long enough to kill a client in one
  auto nodes = actors::local_nodes(*s.sys, 3, 1);
  actors::job_options opts;
  opts.poll = std::chrono::milliseconds(50);
  cluster_actor cluster;
  opts.on_start = [&](cluster_actor c) { cluster = c; };
  int64_t killed_in = 0;
  bool rejoined = false;
  opts.on_status = [&](const job_status& st) {
    if (killed_in == 0 && st.rounds.round >= 1 && st.phase == status_phase::training) {
      caf::anon_send(cluster, kill_atom_v, uint32_t{1});
      killed_in = st.rounds.round + 1;
      return;
    }
    if (killed_in > 0 && !rejoined) {
      for (auto& e : events(cfg.metrics_path, "round")) {
        for (auto& c : e["contributions"]) {
          if (e["round"].get<int64_t>() > killed_in && c["client"] == 1) {
            rejoined = true;
          }
        }
      }
      if (rejoined) {
        caf::anon_send(cluster, stop_atom_v, std::string("test"));
      }
    }
  };
  auto r = actors::run_fed_job(*s.sys, cfg, nodes, opts);
  leave(nodes);
  INFO(r.status.error);
  REQUIRE(r.status.phase == status_phase::finished);
  REQUIRE(killed_in > 0);
  CHECK(rejoined);
  // the rounds after the kill went on with the two others
  bool without = false;
  for (auto& e : events(cfg.metrics_path, "round")) {
    without = without || (e["round"].get<int64_t>() >= killed_in &&
                          e["contributions"].size() == 2);
  }
  CHECK(without);
}

TEST_CASE("a hung client is out of the round when the round's wait ends",
          "[actor][federated]") {
  fed_system s;
  temp_dir dir;
  // rounds without end: the job cannot finish before the slow-down takes
  // hold, however long the host makes it wait; the test stops it once a
  // round has dropped the hung client
  auto cfg = config("fedavg", 1'000'000);
  cfg.metrics_path = dir.file("m.jsonl");
  cfg.settings.round_timeout_s = 3;
  auto nodes = actors::local_nodes(*s.sys, 3, 1);
  actors::job_options opts;
  opts.poll = std::chrono::milliseconds(50);
  cluster_actor cluster;
  opts.on_start = [&](cluster_actor c) { cluster = c; };
  bool slowed = false;
  bool stopped = false;
  opts.on_status = [&](const job_status& st) {
    if (!slowed && st.rounds.round >= 1) {
      // a thousandth of its speed: it will not finish a round in minutes
      caf::anon_send(cluster, slow_atom_v, std::string("local2"), 0.001);
      slowed = true;
    } else if (slowed && !stopped && st.rounds.dropped_updates >= 1) {
      caf::anon_send(cluster, stop_atom_v, std::string("the test"));
      stopped = true;
    }
  };
  auto r = actors::run_fed_job(*s.sys, cfg, nodes, opts);
  leave(nodes);
  INFO(r.status.error);
  REQUIRE(r.status.phase == status_phase::finished);
  CHECK(r.status.stopped == "the test");
  CHECK(r.status.rounds.round >= 2);
  CHECK(r.status.rounds.dropped_updates >= 1);
  bool dropped = false;
  for (auto& e : events(cfg.metrics_path, "round")) {
    for (auto& c : e["late"]) {
      dropped = dropped || c == 2;
    }
  }
  CHECK(dropped);
}

TEST_CASE("a restarted federated job resumes from the last round's checkpoint",
          "[actor][federated]") {
  temp_dir dir;
  auto cfg = config("elfish", 2);
  cfg.checkpoint_path = dir.file("fed.ckpt");
  double accuracy = 0;
  {
    fed_system s;
    auto nodes = actors::local_nodes(*s.sys, 2, 1);
    auto r = actors::run_fed_job(*s.sys, cfg, nodes);
    leave(nodes);
    REQUIRE(r.status.phase == status_phase::finished);
    accuracy = r.status.test_accuracy;
  }
  auto ckpt = messages::load_checkpoint(cfg.checkpoint_path);
  CHECK(ckpt.epoch == 2);
  {
    fed_system s;
    cfg.resume = true;
    cfg.rounds = 4;
    cfg.metrics_path = dir.file("m.jsonl");
    auto nodes = actors::local_nodes(*s.sys, 2, 1);
    auto r = actors::run_fed_job(*s.sys, cfg, nodes);
    leave(nodes);
    REQUIRE(r.status.phase == status_phase::finished);
    CHECK(r.status.rounds.round == 4);
    auto start = events(cfg.metrics_path, "start");
    REQUIRE(start.size() == 1);
    CHECK(start[0]["resumed_at"] == 2);
    // the model it resumed with is the one the first run ended with
    CHECK(start[0]["accuracy"].get<double>() == accuracy);
    auto rounds = events(cfg.metrics_path, "round");
    REQUIRE(rounds.size() == 2);
    CHECK(rounds[0]["round"] == 3);
  }
}

TEST_CASE("with --fraction-fit each round trains a seeded sample of the clients, and the "
          "samples change from round to round",
          "[actor][federated]") {
  fed_system s;
  temp_dir dir;
  auto cfg = config("fedavg", 4);
  cfg.metrics_path = dir.file("m.jsonl");
  cfg.fraction_fit = 0.5;
  auto nodes = actors::local_nodes(*s.sys, 4, 1);
  auto r = actors::run_fed_job(*s.sys, cfg, nodes);
  INFO(r.status.error);
  REQUIRE(r.status.phase == status_phase::finished);
  CHECK(r.status.rounds.round == 4);
  std::set<std::set<int>> samples;
  for (auto& e : events(cfg.metrics_path, "round_start")) {
    std::set<int> clients;
    for (auto& t : e["tasks"]) {
      clients.insert(t["client"].get<int>());
    }
    CHECK(clients.size() == 2);
    auto round = e["round"].get<uint64_t>();
    auto expect = algorithms::sample_clients(cfg.seed, round, {0, 1, 2, 3}, 0.5);
    CHECK(clients == std::set<int>(expect.begin(), expect.end()));
    samples.insert(clients);
  }
  CHECK(samples.size() > 1);
  for (auto& e : events(cfg.metrics_path, "round")) {
    CHECK(e["contributions"].size() == 2);
  }
  // fedbuff has no rounds to sample
  auto async = config("fedbuff", 2);
  async.fraction_fit = 0.5;
  r = actors::run_fed_job(*s.sys, async, nodes);
  CHECK(r.status.phase == status_phase::failed);
  CHECK_THAT(r.status.error, Catch::Contains("--fraction-fit"));
  leave(nodes);
}

TEST_CASE("stragglers among virtual clients: the drawn ones profile and train at their "
          "speed, the model is the same",
          "[actor][federated]") {
  fed_system s;
  temp_dir dir;
  actors::job_options opts;
  opts.fetch_weights = true;
  auto cfg = config("fedavg", 1);
  cfg.clients_per_node = 3;
  cfg.straggler_fraction = 1.0 / 3; // 2 of the 6
  cfg.straggler_speed = 0.25;
  cfg.metrics_path = dir.file("stragglers.jsonl");
  auto slow = algorithms::pick_stragglers(cfg.seed, 6, cfg.straggler_fraction);
  REQUIRE(std::count(slow.begin(), slow.end(), true) == 2);
  auto two = actors::local_nodes(*s.sys, 2, 1);
  auto r = actors::run_fed_job(*s.sys, cfg, two, opts);
  leave(two);
  INFO(r.status.error);
  REQUIRE(r.status.phase == status_phase::finished);
  // per node: the time of a batch at full width, for its clients at speed 1
  // and at 0.25 (all from the one measurement the node's clients share)
  std::map<std::string, std::vector<double>> fast, slowed;
  for (auto& e : events(cfg.metrics_path, "profile")) {
    auto c = e["client"].get<uint32_t>();
    auto batches = static_cast<double>(
        (e["samples"].get<int64_t>() + cfg.batch_size - 1) / cfg.batch_size);
    auto per_batch = e["epoch_s"].back().get<double>() / batches;
    (slow.at(c) ? slowed : fast)[e["node"].get<std::string>()].push_back(per_batch);
    CHECK((e["emulation"].get<std::string>().find("straggler at 0.25") != std::string::npos) ==
          slow.at(c));
  }
  size_t seen = 0;
  for (auto& [node, times] : slowed) {
    REQUIRE(fast.count(node));
    for (auto t : times) {
      CHECK(t == Approx(fast[node].front() / 0.25).epsilon(1e-9));
      ++seen;
    }
  }
  CHECK(seen == 2);
  // FedAvg waits for every client: how fast they are changes nothing else
  cfg.straggler_fraction = 0;
  cfg.metrics_path.clear();
  auto again = actors::local_nodes(*s.sys, 2, 1);
  auto even = actors::run_fed_job(*s.sys, cfg, again, opts);
  leave(again);
  REQUIRE(even.status.phase == status_phase::finished);
  REQUIRE(r.weights);
  REQUIRE(even.weights);
  for (size_t l = 0; l < r.weights->layers.size(); ++l) {
    for (size_t p = 0; p < r.weights->layers[l].params.size(); ++p) {
      CHECK(salamander::testing::max_abs_diff(r.weights->layers[l].params[p].tensor,
                                              even.weights->layers[l].params[p].tensor) ==
            0.0);
    }
  }
}

TEST_CASE("partial work: a straggler past the pace even at its narrowest trains only the "
          "part of its batches that fits, unless --no-partial-work",
          "[actor][federated]") {
  for (bool partial : {true, false}) {
    DYNAMIC_SECTION("partial work " << partial) {
      fed_system s;
      temp_dir dir;
      auto cfg = config("elfish", 2);
      cfg.settings.local_epochs = 2; // the cut lands in the second epoch's order too
      cfg.clients_per_node = 3;
      cfg.straggler_fraction = 1.0 / 3;
      // EMULATED: a twentieth of the speed, from the one profile the node's
      // clients share, so their profiles are exact multiples of the fast ones'
      cfg.straggler_speed = 0.05;
      cfg.settings.partial_work = partial;
      cfg.metrics_path = dir.file("m.jsonl");
      auto slow = algorithms::pick_stragglers(cfg.seed, 6, cfg.straggler_fraction);
      auto two = actors::local_nodes(*s.sys, 2, 1);
      auto r = actors::run_fed_job(*s.sys, cfg, two);
      leave(two);
      INFO(r.status.error);
      REQUIRE(r.status.phase == status_phase::finished);
      std::map<std::pair<int64_t, uint32_t>, double> work; // (round, client)
      for (auto& e : events(cfg.metrics_path, "round_start")) {
        for (auto& t : e["tasks"]) {
          auto c = t["client"].get<uint32_t>();
          auto w = t["work"].get<double>();
          work[{e["round"].get<int64_t>(), c}] = w;
          if (!partial) {
            CHECK(w == 1);
          } else if (slow.at(c) && e["round"].get<int64_t>() == 1) {
            // twenty times slower by the profile: even a sixteenth of the model
            // misses the pace (later rounds follow measured times, which a
            // loaded host moves)
            CHECK(t["keep"].get<double>() == cfg.settings.min_keep);
            CHECK(w < 1);
          }
        }
      }
      size_t slow_seen = 0;
      for (auto& e : events(cfg.metrics_path, "round")) {
        for (auto& u : e["contributions"]) {
          auto c = u["client"].get<uint32_t>();
          INFO("round " << e["round"] << ", client " << c);
          auto per_epoch =
              (u["samples"].get<int64_t>() + cfg.batch_size - 1) / cfg.batch_size;
          auto all = cfg.settings.local_epochs * per_epoch;
          auto w = work.at({e["round"].get<int64_t>(), c});
          auto batches = u["batches"].get<int64_t>();
          slow_seen += slow.at(c) ? 1 : 0;
          if (w == 1) {
            CHECK(batches == all);
          } else {
            // what the task asked: ceil(w x all), at least one, and fewer than all
            auto part =
                static_cast<int64_t>(std::ceil(w * static_cast<double>(all) - 1e-9));
            CHECK(batches == std::max<int64_t>(1, part));
            CHECK(batches < all);
          }
        }
      }
      CHECK(slow_seen == 4); // two stragglers, two rounds, none dropped
    }
  }
}

TEST_CASE("virtual clients: two nodes of three clients train as six nodes of one",
          "[actor][federated]") {
  fed_system s;
  temp_dir dir;
  actors::job_options opts;
  opts.fetch_weights = true;
  auto cfg = config("fedavg", 2);
  cfg.clients_per_node = 3;
  cfg.metrics_path = dir.file("virtual.jsonl");
  auto two = actors::local_nodes(*s.sys, 2, 1);
  auto r = actors::run_fed_job(*s.sys, cfg, two, opts);
  leave(two);
  INFO(r.status.error);
  REQUIRE(r.status.phase == status_phase::finished);
  // a node's clients share its device: one measures a batch at each kept
  // fraction, the others take that measurement (scaled to their shards)
  std::map<std::string, std::vector<std::vector<double>>> per_batch; // node -> clients
  for (auto& e : events(cfg.metrics_path, "profile")) {
    auto batches = static_cast<double>(
        (e["samples"].get<int64_t>() + cfg.batch_size - 1) / cfg.batch_size);
    std::vector<double> times;
    for (auto& t : e["epoch_s"]) {
      times.push_back(t.get<double>() / batches);
    }
    per_batch[e["node"].get<std::string>()].push_back(times);
  }
  REQUIRE(per_batch.size() == 2);
  for (auto& [node, clients] : per_batch) {
    REQUIRE(clients.size() == 3);
    for (auto& c : clients) {
      REQUIRE(c.size() == clients[0].size());
      for (size_t k = 0; k < c.size(); ++k) {
        CHECK(c[k] == Approx(clients[0][k]).epsilon(1e-9));
      }
    }
  }
  cfg.metrics_path.clear();
  CHECK(r.status.rounds.clients == 6);
  CHECK(r.status.rounds.contributed == 6);
  REQUIRE(r.status.nodes.size() == 2);
  for (auto& row : r.status.nodes) {
    CHECK(std::count(row.role.begin(), row.role.end(), ';') == 2); // three clients
  }
  cfg.clients_per_node = 1;
  auto six = actors::local_nodes(*s.sys, 6, 1);
  auto alone = actors::run_fed_job(*s.sys, cfg, six, opts);
  leave(six);
  REQUIRE(alone.status.phase == status_phase::finished);
  REQUIRE(r.weights);
  REQUIRE(alone.weights);
  double worst = 0;
  for (size_t l = 0; l < r.weights->layers.size(); ++l) {
    for (size_t p = 0; p < r.weights->layers[l].params.size(); ++p) {
      worst = std::max(worst, salamander::testing::max_abs_diff(
                                  r.weights->layers[l].params[p].tensor,
                                  alone.weights->layers[l].params[p].tensor));
    }
  }
  CHECK(worst < 1e-5); // the same shards, averaged in another order
}

TEST_CASE("a federated job refuses a model it cannot slice, an unknown strategy and a "
          "restricted softmax out of range",
          "[actor][federated]") {
  fed_system s;
  auto nodes = actors::local_nodes(*s.sys, 1, 1);
  auto cfg = config("fedavg", 1);
  cfg.model = "resnet";
  auto r = actors::run_fed_job(*s.sys, cfg, nodes);
  CHECK(r.status.phase == status_phase::failed);
  CHECK_THAT(r.status.error, Catch::Contains("dense and conv"));
  cfg = config("fedprox", 1);
  r = actors::run_fed_job(*s.sys, cfg, nodes);
  CHECK(r.status.phase == status_phase::failed);
  CHECK_THAT(r.status.error, Catch::Contains("elfish"));
  // a restricted softmax outside [0, 1], as the CLI would refuse it too
  cfg = config("fedavg", 1);
  cfg.restricted_softmax = 1.5;
  r = actors::run_fed_job(*s.sys, cfg, nodes);
  CHECK(r.status.phase == status_phase::failed);
  CHECK_THAT(r.status.error, Catch::Contains("--restricted-softmax"));
  leave(nodes);
}
