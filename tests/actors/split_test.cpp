// Split learning (AdaSplit mode) over local clients: vanilla split learning
// equals training the whole model on the clients' shards in turn; every
// method's bytes and client FLOPs are exactly what its protocol sends and
// computes; AdaSplit sends nothing in its local phase, no gradients ever,
// and only what the orchestrator picks; the server's mask for a client
// confines that client's updates; a killed client never stalls a round and
// rejoins; a restarted job resumes from its checkpoint with its counters;
// bad cuts and bad activations are refused with why.
#include "../support.hpp"

#include "actors/node/system.hpp"
#include "actors/split/split_job.hpp"
#include "algorithms/sampling.hpp"
#include "messages/checkpoint.hpp"
#include "models/data.hpp"
#include "models/layered_model.hpp"
#include "models/trainer.hpp"

#include <nlohmann/json.hpp>
#include <numeric>

using namespace salamander;
using salamander::testing::events;
using salamander::testing::temp_dir;

namespace {

const std::string model = "mlp:hidden=96";

actors::split_config config(const std::string& method, int64_t rounds) {
  actors::split_config cfg;
  cfg.model = models::describe(models::model_spec::parse(model)).spec.canonical();
  cfg.method = method;
  cfg.cut = 1;
  cfg.rounds = rounds;
  cfg.dataset = "synthetic";
  cfg.alpha = 0; // IID
  cfg.batch_size = 32;
  cfg.lr = 0.05;
  cfg.max_samples = 96;
  cfg.local_fraction = 0.5;
  cfg.client_fraction = 0.5;
  return cfg;
}

struct split_system {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  split_system() {
    salamander::testing::one_compute_thread(); // as the CLI runs a device
    actors::configure(cfg, {});
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

void leave(std::vector<actors::remote_node>& nodes) {
  for (auto& n : nodes) {
    caf::anon_send(n.handle, leave_atom_v);
  }
}

// Runs a split job over n local nodes to its end, which must be a finish.
actors::job_result finished_job(split_system& s, const actors::split_config& cfg, int n,
                                bool fetch_weights = false) {
  auto nodes = actors::local_nodes(*s.sys, n, 1);
  actors::job_options opts;
  opts.fetch_weights = fetch_weights;
  auto r = actors::run_split_job(*s.sys, cfg, nodes, opts);
  leave(nodes);
  INFO(r.status.error);
  REQUIRE(r.status.phase == status_phase::finished);
  REQUIRE((!fetch_weights || r.weights));
  return r;
}

// A job run to its end on `n` nodes: its metrics log's last round event.
nlohmann::json last_round(split_system& s, actors::split_config cfg, int n) {
  temp_dir dir;
  cfg.metrics_path = dir.file("m.jsonl");
  finished_job(s, cfg, n);
  return events(cfg.metrics_path, "round").back();
}

std::vector<int64_t> shard_of(const actors::split_config& cfg,
                              const models::dataset& data, uint32_t c, uint32_t n) {
  auto shard = algorithms::partition_iid(cfg.seed, data.size(), static_cast<int>(n))[c];
  shard.resize(static_cast<size_t>(cfg.max_samples));
  return shard;
}

// Vanilla split learning written out as one process would: each client's
// epoch in the round's turn order, each batch through the whole model; the
// client side's optimizer is fresh at each turn (the weights are handed
// on, not its state), the server's lives on.
models::weight_snapshot sequential_reference(const actors::split_config& cfg,
                                             uint32_t n) {
  auto desc = models::describe(models::model_spec::parse(cfg.model));
  auto data = models::load_dataset(cfg.dataset, true, desc);
  models::layered_model m(desc, cfg.seed);
  auto cut = static_cast<size_t>(cfg.cut);
  auto client = m.slice(0, cut);
  auto server = m.slice(cut, desc.layers.size());
  models::optimizer_config ocfg{cfg.optimizer, cfg.lr, cfg.momentum, 0.0};
  auto server_opt = models::make_optimizer(ocfg, server->parameters());
  std::vector<uint32_t> clients(n);
  std::iota(clients.begin(), clients.end(), 0u);
  // one round: the clients in its turn order
  for (uint32_t c : algorithms::turn_order(cfg.seed, 1, clients)) {
    auto client_opt = models::make_optimizer(ocfg, client->parameters());
    auto shard = shard_of(cfg, data, c, n);
    auto order = algorithms::epoch_permutation(algorithms::mix_seed(cfg.seed, c, 1), 0,
                                               static_cast<int64_t>(shard.size()));
    for (size_t b = 0; b < order.size(); b += static_cast<size_t>(cfg.batch_size)) {
      std::vector<int64_t> idx;
      for (size_t i = b; i < std::min(order.size(), b + cfg.batch_size); ++i) {
        idx.push_back(shard[static_cast<size_t>(order[i])]);
      }
      auto t = torch::tensor(idx, torch::kInt64);
      client_opt->zero_grad();
      auto act = client->forward(data.images.index_select(0, t));
      auto across = act.detach().requires_grad_(true);
      server_opt->zero_grad();
      torch::nn::functional::cross_entropy(server->forward(across),
                                           data.labels.index_select(0, t))
          .backward();
      server_opt->step();
      act.backward(across.grad());
      client_opt->step();
    }
  }
  return models::capture(m, nullptr, "", 1);
}

double max_diff(const models::weight_snapshot& a, const models::weight_snapshot& b) {
  double worst = 0;
  REQUIRE(a.layers.size() == b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    REQUIRE(a.layers[l].index == b.layers[l].index);
    for (size_t p = 0; p < a.layers[l].params.size(); ++p) {
      worst = std::max(worst,
                       salamander::testing::max_abs_diff(a.layers[l].params[p].tensor,
                                                         b.layers[l].params[p].tensor));
    }
  }
  return worst;
}

// What crosses the cut per example (activations up, and labels), and what
// the gradient back weighs.
struct per_example {
  int64_t up;
  int64_t down;
  double client_flops;
};

per_example costs(const actors::split_config& cfg) {
  auto desc = models::describe(models::model_spec::parse(cfg.model));
  auto c = actors::costs_of(desc, static_cast<size_t>(cfg.cut));
  return {c.activation_bytes + 8, c.activation_bytes, 3 * c.client_forward_flops};
}

} // namespace

TEST_CASE("with --fraction-fit each split round takes a seeded sample of the clients",
          "[actor][split]") {
  for (std::string method : {"vanilla", "splitfed"}) {
    DYNAMIC_SECTION(method) {
      split_system s;
      temp_dir dir;
      auto cfg = config(method, 3);
      cfg.metrics_path = dir.file("m.jsonl");
      cfg.fraction_fit = 0.34; // 2 of 4 (rounded up)
      auto nodes = actors::local_nodes(*s.sys, 4, 1);
      auto r = actors::run_split_job(*s.sys, cfg, nodes);
      leave(nodes);
      INFO(r.status.error);
      REQUIRE(r.status.phase == status_phase::finished);
      CHECK(r.status.rounds.round == 3);
      auto starts = events(cfg.metrics_path, "round_start");
      REQUIRE(starts.size() == 3);
      for (auto& e : starts) {
        auto key = method == "vanilla" ? "turns" : "clients";
        auto got = e[key].get<std::vector<uint32_t>>();
        auto round = e["round"].get<uint64_t>();
        auto sample = algorithms::sample_clients(cfg.seed, round, {0, 1, 2, 3}, 0.34);
        // vanilla's turns: the sample in this round's seeded order
        CHECK(got == (method == "vanilla"
                          ? algorithms::turn_order(cfg.seed, round, sample)
                          : sample));
      }
    }
  }
}

TEST_CASE("vanilla split learning equals training the whole model on the clients' shards "
          "in turn",
          "[actor][split]") {
  split_system s;
  auto cfg = config("vanilla", 1);
  auto r = finished_job(s, cfg, 2, true);
  CHECK(max_diff(*r.weights, sequential_reference(cfg, 2)) < 1e-5);
  CHECK(r.status.test_accuracy > 0.5); // the synthetic classes are well apart
}

TEST_CASE("each method's bytes and client FLOPs are what its protocol sends and computes",
          "[actor][split]") {
  for (std::string method : {"vanilla", "splitfed", "adasplit"}) {
    DYNAMIC_SECTION(method) {
      split_system s;
      temp_dir dir;
      auto cfg = config(method, 2);
      cfg.metrics_path = dir.file("m.jsonl");
      auto nodes = actors::local_nodes(*s.sys, 3, 1);
      auto r = actors::run_split_job(*s.sys, cfg, nodes);
      leave(nodes);
      INFO(r.status.error);
      REQUIRE(r.status.phase == status_phase::finished);
      REQUIRE(r.status.rounds.round == 2);
      auto per = costs(cfg);
      auto desc = models::describe(models::model_spec::parse(cfg.model));
      auto weights =
          models::capture(models::layered_model(desc, cfg.seed, 0, 1), nullptr, "", 0)
              .bytes();
      int64_t examples = 3 * cfg.max_samples; // per round
      if (method != "adasplit") {
        // every batch up and its gradient down; the client side handed out
        // and back every turn (vanilla) or round (splitfed)
        CHECK(r.status.rounds.bytes_up == 2 * (examples * per.up + 3 * weights));
        CHECK(r.status.rounds.bytes_down == 2 * (examples * per.down + 3 * weights));
        CHECK(r.status.rounds.client_flops == Approx(2 * examples * per.client_flops));
      } else {
        // the auxiliary head: a dense layer from the cut to the classes
        int64_t in = desc.layers[0].output_bytes / 4;
        weights += (in * desc.classes + desc.classes) * 4;
        auto aux = split::aux_head_flops(desc.layers[0].output_bytes, desc.classes);
        CHECK(r.status.rounds.client_flops ==
              Approx(2 * examples * (per.client_flops + 3 * aux)));
        auto rounds = events(cfg.metrics_path, "round");
        REQUIRE(rounds.size() == 2);
        CHECK(rounds[0]["phase"] == "local");
        CHECK(rounds[1]["phase"] == "global");
        // the local phase sends nothing across the cut but the weights back
        CHECK(rounds[0]["bytes_up"].get<int64_t>() == 3 * weights);
        // no gradient ever comes back: only each client's first weights
        CHECK(r.status.rounds.bytes_down == 3 * weights);
        // the global phase: each of the 3 batches of a round, ceil(0.5 x 3)
        // = 2 of the 3 clients send
        int64_t sent = 0;
        for (auto& c : rounds[1]["clients"]) {
          sent += c["sent"].get<int64_t>();
        }
        CHECK(sent == 3 * 2);
        CHECK(r.status.rounds.bytes_up ==
              2 * 3 * weights + sent * cfg.batch_size * per.up);
        // the orchestrator's picks, as its round_start said
        auto starts = events(cfg.metrics_path, "round_start");
        REQUIRE(starts.size() == 2);
        int64_t planned = 0;
        for (auto& [k, v] : starts[1]["sends"].items()) {
          planned += v.get<int64_t>();
        }
        CHECK(planned == sent);
      }
      CHECK(r.status.test_accuracy > 0.3);
    }
  }
}

TEST_CASE(
    "a split job scores the shared model, and each client's model on its own labels",
    "[actor][split]") {
  split_system s;
  temp_dir dir;
  auto cfg = config("vanilla", 2);
  cfg.metrics_path = dir.file("m.jsonl");
  cfg.classes_apart = 1; // client 2's classes are its own
  auto r = finished_job(s, cfg, 3, true);
  // the final model on the test split, per class, by hand
  auto desc = models::describe(models::model_spec::parse(cfg.model));
  models::layered_model m(desc, cfg.seed);
  models::restore(m, nullptr, *r.weights);
  auto net = m.all();
  auto test = models::load_dataset(cfg.dataset, false, desc);
  auto stats = models::evaluate(net, test, 1000);
  auto train = models::load_dataset(cfg.dataset, true, desc);
  auto labels = train.label_vector();
  auto last = events(cfg.metrics_path, "round").back();
  CHECK(last["shared_accuracy"].get<double>() == Approx(stats.accuracy()).margin(1e-9));
  CHECK(last["accuracy"].get<double>() == Approx(stats.accuracy()).margin(1e-9));
  auto personal = last["personal_accuracy"].get<std::vector<double>>();
  REQUIRE(personal.size() == 3);
  auto shards = algorithms::partition_apart(cfg.seed, labels, 3, 1, cfg.alpha);
  std::vector<std::vector<int64_t>> counts(3, std::vector<int64_t>(desc.classes, 0));
  for (size_t c = 0; c < 3; ++c) {
    auto& shard = shards[c];
    shard.resize(static_cast<size_t>(cfg.max_samples));
    for (auto i : shard) {
      counts[c][static_cast<size_t>(labels[static_cast<size_t>(i)])]++;
    }
    INFO("client " << c);
    CHECK(personal[c] == Approx(stats.weighted_accuracy(counts[c])).margin(1e-9));
  }
  // the apart client holds classes the others lack, and none of theirs
  int64_t own = 0;
  for (size_t k = 0; k < counts[2].size(); ++k) {
    CHECK_FALSE((counts[2][k] > 0 && counts[0][k] + counts[1][k] > 0));
    own += counts[2][k];
  }
  CHECK(own == cfg.max_samples);
}

TEST_CASE("an AdaSplit job scores the clients' averaged sides with the server unmasked",
          "[actor][split]") {
  split_system s;
  auto last = last_round(s, config("adasplit", 2), 3);
  auto shared = last["shared_accuracy"].get<double>();
  CHECK(shared > 0.3); // the synthetic classes are well apart
  CHECK(shared <= 1.0);
  auto personal = last["personal_accuracy"].get<std::vector<double>>();
  REQUIRE(personal.size() == 3);
  for (auto a : personal) {
    CHECK(a > 0.3);
  }
}

TEST_CASE("a mask's sparsity target keeps the highest-scoring share of each tensor",
          "[unit][split]") {
  auto scores = torch::tensor({0.9, 0.1, 0.5, 0.7, 0.3, 0.8, 0.2, 0.6, 0.4, 1.0});
  // (keep) -> which are kept
  CHECK(actors::mask_kept(scores, 0.5).equal(scores >= 0.6));
  CHECK(actors::mask_kept(scores, 0.3).equal(scores >= 0.8));
  CHECK(actors::mask_kept(scores, 0.01).sum().item<int64_t>() == 1); // at least one
  CHECK(actors::mask_kept(scores, 0.25).sum().item<int64_t>() == 3); // ceil(2.5)
  // ties at the cut are kept: masks of ones keep everything until scores move
  CHECK(actors::mask_kept(torch::ones({4, 5}), 0.5).all().item<bool>());
  // keep 1: the threshold rule
  CHECK(actors::mask_kept(scores, 1.0).equal(scores > 0.5));
}

TEST_CASE("under a sparsity target every client's mask keeps that share of the server",
          "[actor][split]") {
  split_system s;
  auto cfg = config("adasplit", 3);
  cfg.mask_keep = 0.7;
  auto last = last_round(s, cfg, 2);
  auto density = last["mask_density"].get<std::vector<double>>();
  REQUIRE(density.size() == 2);
  for (auto d : density) {
    // every tensor keeps ceil(0.7 n) or, with ties at the cut, a little more
    CHECK(d >= 0.7);
    CHECK(d < 0.75);
  }
  auto personal = last["personal_accuracy"].get<std::vector<double>>();
  for (auto a : personal) {
    CHECK(a > 0.3); // the synthetic classes are well apart
  }
}

TEST_CASE("an AdaSplit client's server mask confines its updates to the server's model",
          "[actor][split]") {
  split_system s;
  caf::scoped_actor self{*s.sys};
  actors::split_server_config sc;
  sc.model = models::describe(models::model_spec::parse(model)).spec.canonical();
  sc.cut = 1;
  sc.method = "adasplit";
  sc.clients = 2;
  sc.lr = 0.05;
  sc.mask_l1 = 1e3; // one step takes client 0's mask to 0 everywhere
  auto server = s.sys->spawn(actors::split_server, sc, models::weight_snapshot{});
  auto x = torch::randn({16, 96});
  auto y = torch::randint(0, 10, {16}, torch::kInt64);
  auto step = [&](uint32_t client) {
    split_smash smash;
    smash.client = client;
    smash.want_gradient = false;
    smash.activations.tensor = x;
    smash.labels.tensor = y;
    self->request(server, caf::infinite, forward_atom_v, smash)
        .receive([](split_reply& r) { CHECK(r.gradient.tensor.numel() == 0); },
                 [](caf::error& e) { FAIL(caf::to_string(e)); });
  };
  auto snapshot = [&] {
    models::weight_snapshot out;
    self->request(server, caf::infinite, snapshot_atom_v)
        .receive([&](snapshot_payload& p) { out = std::move(p.snapshot); },
                 [](caf::error& e) { FAIL(caf::to_string(e)); });
    return out;
  };
  auto before = snapshot();
  step(0); // its mask was ones: this step updates W, and zeroes the mask
  auto after_first = snapshot();
  CHECK(max_diff(actors::untagged(before), actors::untagged(after_first)) > 0);
  CHECK(actors::mask_density(after_first, 0) == 0.0);
  CHECK(actors::mask_density(after_first, 1) == 1.0);
  step(0); // nothing of W is client 0's any more
  auto after_second = snapshot();
  CHECK(max_diff(actors::untagged(after_first), actors::untagged(after_second)) == 0);
  step(1); // client 1's mask still covers everything
  auto after_third = snapshot();
  CHECK(max_diff(actors::untagged(after_second), actors::untagged(after_third)) > 0);
  // client 0 sees the server through its mask: all zeros
  for (auto& lw : actors::server_view(after_third, 0).layers) {
    for (auto& p : lw.params) {
      CHECK(p.tensor.abs().max().item<double>() == 0);
    }
  }
  // activations of the wrong width are refused, with the shapes
  split_smash bad;
  bad.activations.tensor = torch::randn({4, 95});
  bad.labels.tensor = torch::randint(0, 10, {4}, torch::kInt64);
  self->request(server, caf::infinite, forward_atom_v, bad)
      .receive(
          [](split_reply&) { FAIL("accepted activations of the wrong shape"); },
          [](caf::error& e) { CHECK_THAT(caf::to_string(e), Catch::Contains("96")); });
  self->send_exit(server, caf::exit_reason::user_shutdown);
}

TEST_CASE("a killed split client never stalls a round and rejoins a later one",
          "[actor][split]") {
  for (std::string method : {"vanilla", "splitfed"}) {
    DYNAMIC_SECTION(method) {
      split_system s;
      temp_dir dir;
      auto cfg = config(method, 100000); // the test stops it
      cfg.metrics_path = dir.file("m.jsonl");
      cfg.max_samples = 640; // rounds long enough to kill a client in one
      auto nodes = actors::local_nodes(*s.sys, 3, 1);
      actors::job_options opts;
      opts.poll = std::chrono::milliseconds(50);
      cluster_actor cluster;
      opts.on_start = [&](cluster_actor c) { cluster = c; };
      int64_t killed_in = 0;
      bool rejoined = false;
      opts.on_status = [&](const job_status& st) {
        if (killed_in == 0 && st.rounds.round >= 1 &&
            st.phase == status_phase::training) {
          caf::anon_send(cluster, kill_atom_v, uint32_t{1});
          killed_in = st.rounds.round + 1;
          return;
        }
        if (killed_in > 0 && !rejoined) {
          for (auto& e : events(cfg.metrics_path, "round")) {
            for (auto& c : e["clients"]) {
              rejoined =
                  rejoined || (e["round"].get<int64_t>() > killed_in && c["client"] == 1);
            }
          }
          if (rejoined) {
            caf::anon_send(cluster, stop_atom_v, std::string("test"));
          }
        }
      };
      auto r = actors::run_split_job(*s.sys, cfg, nodes, opts);
      leave(nodes);
      INFO(r.status.error);
      REQUIRE(r.status.phase == status_phase::finished);
      REQUIRE(killed_in > 0);
      CHECK(rejoined);
      // a round went on without it: the two others' results only
      bool without = false;
      for (auto& e : events(cfg.metrics_path, "round")) {
        without = without ||
                  (e["round"].get<int64_t>() >= killed_in && e["clients"].size() == 2);
      }
      CHECK(without);
    }
  }
}

TEST_CASE("a restarted split job resumes from its checkpoint with its counters",
          "[actor][split]") {
  for (std::string method : {"vanilla", "adasplit"}) {
    DYNAMIC_SECTION(method) {
      temp_dir dir;
      auto cfg = config(method, 2);
      cfg.local_fraction = 0.25; // of 4 rounds: round 1
      cfg.checkpoint_path = dir.file("split.ckpt");
      job_status first;
      {
        split_system s;
        auto nodes = actors::local_nodes(*s.sys, 2, 1);
        auto r = actors::run_split_job(*s.sys, cfg, nodes);
        leave(nodes);
        INFO(r.status.error);
        REQUIRE(r.status.phase == status_phase::finished);
        first = r.status;
      }
      CHECK(messages::load_checkpoint(cfg.checkpoint_path).epoch == 2);
      split_system s;
      cfg.resume = true;
      cfg.rounds = 4;
      cfg.metrics_path = dir.file("m.jsonl");
      auto nodes = actors::local_nodes(*s.sys, 2, 1);
      auto r = actors::run_split_job(*s.sys, cfg, nodes);
      leave(nodes);
      INFO(r.status.error);
      REQUIRE(r.status.phase == status_phase::finished);
      CHECK(r.status.rounds.round == 4);
      auto start = events(cfg.metrics_path, "start");
      REQUIRE(start.size() == 1);
      CHECK(start[0]["resumed_at"] == 2);
      // the models it resumed with are the ones the first run ended with
      CHECK(start[0]["accuracy"].get<double>() == first.test_accuracy);
      auto rounds = events(cfg.metrics_path, "round");
      REQUIRE(rounds.size() == 2);
      CHECK(rounds[0]["round"] == 3);
      // the counters carried on from the checkpoint's
      CHECK(rounds[0]["bytes_up"].get<int64_t>() > first.rounds.bytes_up);
      if (method == "vanilla") {
        // every vanilla round sends the same
        CHECK(r.status.rounds.bytes_up == 2 * first.rounds.bytes_up);
        CHECK(r.status.rounds.bytes_down == 2 * first.rounds.bytes_down);
      } else {
        // weights come down only when a client has none of its own: once
        // in the first run, again to the resumed clients (round 3), and the
        // average after round 3's global phase (round 4); no gradients
        CHECK(r.status.rounds.bytes_down == 3 * first.rounds.bytes_down);
      }
    }
  }
}

TEST_CASE("a split job refuses a cut outside the model and an unknown method, with the "
          "valid ones",
          "[actor][split]") {
  split_system s;
  auto nodes = actors::local_nodes(*s.sys, 1, 1);
  auto cfg = config("vanilla", 1);
  cfg.cut = 3; // mlp has 3 layers: cuts 1 and 2
  auto r = actors::run_split_job(*s.sys, cfg, nodes);
  CHECK(r.status.phase == status_phase::failed);
  CHECK_THAT(r.status.error, Catch::Contains("--cut 2: client fc1..fc2"));
  cfg = config("splitnn", 1);
  r = actors::run_split_job(*s.sys, cfg, nodes);
  CHECK(r.status.phase == status_phase::failed);
  CHECK_THAT(r.status.error, Catch::Contains("adasplit"));
  leave(nodes);
}
