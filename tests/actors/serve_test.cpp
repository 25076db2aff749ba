// Serving (EdgePipe mode): forward-only pipelines give one device's outputs,
// dynamic batching merges requests and a full queue refuses them, and a
// stage node that dies (kill -9), hangs (SIGSTOP) or two that die in a row
// lose no accepted request: every one is answered once, with the outputs of
// a single process that holds the whole model.
#include "../support.hpp"

#include "actors/cluster/cluster_file.hpp"
#include "actors/cluster/cluster_supervisor.hpp"
#include "actors/node/node_process.hpp"
#include "actors/node/system.hpp"
#include "actors/serve/inference.hpp"
#include "actors/serve/served_load.hpp"
#include "messages/errors.hpp"
#include "models/data.hpp"
#include "models/layered_model.hpp"

#include <csignal>
#include <thread>

using namespace salamander;
using salamander::testing::max_abs_diff;

namespace {

// Weights that are not the seed's, so that pulling them is what is tested.
std::shared_ptr<models::weight_snapshot> weights_of(const std::string& model,
                                                    uint64_t seed) {
  models::layered_model m(models::describe(models::model_spec::parse(model)), seed);
  return std::make_shared<models::weight_snapshot>(models::capture(m, nullptr, "", 7));
}

// One process holding the whole model, `rows` rows at a time.
torch::Tensor reference(const models::weight_snapshot& w, const torch::Tensor& x,
                        int64_t rows) {
  models::layered_model m(models::describe(models::model_spec::parse(w.model)), 1);
  models::restore(m, nullptr, w);
  auto net = m.all();
  net->eval();
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> out;
  for (int64_t b = 0; b < x.size(0); b += rows) {
    out.push_back(net->forward(x.narrow(0, b, std::min(rows, x.size(0) - b))));
  }
  return torch::cat(out, 0);
}

torch::Tensor inputs_for(const std::string& model, int64_t n) {
  auto d = models::describe(models::model_spec::parse(model));
  return models::make_synthetic(5, n, d.input, d.classes).images;
}

actors::serve_config config(const std::string& model) {
  actors::serve_config cfg;
  cfg.model = models::describe(models::model_spec::parse(model)).spec.canonical();
  cfg.weights = weights_of(model, 21);
  cfg.auto_plan = false;
  cfg.max_batch = 8;
  return cfg;
}

struct process_system {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  explicit process_system(
      std::chrono::milliseconds hang = std::chrono::milliseconds(2500)) {
    actors::system_options o;
    o.connection_timeout = hang; // nodes beat every second
    actors::configure(cfg, o);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

// Streams `x` through the service in requests of `rows` while `chaos` runs
// once the first `at` rows are answered.
actors::inference_result stream_with(actors::service& svc, const torch::Tensor& x,
                                     int64_t rows, int64_t at,
                                     const std::function<void()>& chaos) {
  actors::inference_options o;
  o.request_rows = rows;
  o.outstanding = 24;
  o.poll = std::chrono::milliseconds(10);
  bool fired = false;
  o.on_progress = [&](const job_status&, int64_t done) {
    if (!fired && done >= at) {
      fired = true;
      chaos();
    }
  };
  auto r = actors::infer_all(svc, x, o);
  CHECK(fired);
  return r;
}

// `n` node processes and a serving job over them: the CNN with weights other
// than the seed's, in micro-batches of 4.
struct served_cluster {
  actors::process_cluster procs;
  process_system ps;
  std::vector<actors::remote_node> nodes;
  actors::serve_config sc = config("cnn");
  std::unique_ptr<actors::service> svc;

  served_cluster(int n, const std::string& prefix, const std::string& metrics = "")
      : procs(n, prefix) {
    auto connected = actors::connect_nodes(*ps.sys, procs.nodes());
    REQUIRE(static_cast<bool>(connected));
    nodes = std::move(*connected);
    sc.max_batch = 4;
    sc.metrics_path = metrics;
    svc = std::make_unique<actors::service>(*ps.sys, sc, nodes);
  }
  /// What one process holding the whole model answers.
  torch::Tensor expected(const torch::Tensor& x) const {
    return reference(*sc.weights, x, sc.max_batch);
  }
};

} // namespace

TEST_CASE("a serving pipeline's outputs equal one process's, over an even split and the "
          "planner's",
          "[actor][serve]") {
  torch::set_num_threads(1);
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto x = inputs_for("cnn", 200);
  for (bool planned : {false, true}) {
    DYNAMIC_SECTION((planned ? "planned" : "even")) {
      auto sc = config("cnn");
      sc.auto_plan = planned;
      auto nodes = actors::local_nodes(sys, 3, 1);
      actors::service svc(sys, sc, nodes);
      actors::inference_options o;
      o.request_rows = sc.max_batch; // micro-batches as the reference cuts them
      auto r = actors::infer_all(svc, x, o);
      REQUIRE(r.error.empty());
      REQUIRE(r.outputs.size(0) == 200);
      CHECK(max_abs_diff(r.outputs, reference(*sc.weights, x, sc.max_batch)) <= 1e-6);
      CHECK(r.status.serving.requests == 25);
      CHECK(r.status.serving.duplicates == 0);
      CHECK(r.status.stages.size() >= 2);
      for (auto& n : nodes) {
        caf::anon_send(n.handle, leave_atom_v);
      }
    }
  }
}

TEST_CASE("dynamic batching sends a lone request at once, merges what queued while the "
          "pipeline could not take it, and a full queue answers busy",
          "[actor][serve]") {
  torch::set_num_threads(1);
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto nodes = actors::local_nodes(sys, 2, 1);
  auto sc = config("mlp");
  sc.max_batch = 8;
  sc.batch_delay = std::chrono::milliseconds(60000); // a busy pipeline holds rows long
  sc.max_queue = 8;
  actors::service svc(sys, sc, nodes);
  REQUIRE(svc.wait_serving(std::chrono::seconds(30)));
  auto x = inputs_for("mlp", 8);
  auto ref = reference(*sc.weights, x, 8);
  caf::scoped_actor self{sys};
  // a lone request finds the pipeline idle: it goes at once, not after the
  // minute's delay (the wait below gives up long before)
  self->request(svc.job(), std::chrono::seconds(30), infer_atom_v,
                tensor_payload{x.narrow(0, 0, 1)})
      .receive([&](tensor_payload& y) { CHECK(max_abs_diff(y.tensor, ref.narrow(0, 0, 1)) <= 1e-6); },
               [&](caf::error& e) { FAIL("a lone request waited: " << sys.render(e)); });
  CHECK(svc.status().serving.executions == 1);
  // paused, nothing is sent on: seven one-row requests queue
  self->request(svc.job(), std::chrono::seconds(10), pause_atom_v)
      .receive([](std::string&) {}, [](caf::error&) {});
  for (int i = 1; i < 8; ++i) {
    self->send(svc.job(), infer_atom_v, tensor_payload{x.narrow(0, i, 1)});
  }
  // (a request is only seen once the job took it: ask for the status)
  REQUIRE(svc.status().serving.queue_depth == 7);
  CHECK(svc.status().serving.requests == 1);
  // resumed with the pipeline idle, the seven go together: one micro-batch
  self->request(svc.job(), std::chrono::seconds(10), resume_atom_v)
      .receive([](std::string&) {}, [](caf::error&) {});
  std::vector<torch::Tensor> answers(7);
  for (size_t i = 0; i < answers.size(); ++i) {
    self->receive([&](tensor_payload& y) { answers[i] = y.tensor; },
                  caf::after(std::chrono::seconds(30)) >> [] { FAIL("no answer"); });
  }
  auto s = svc.status();
  CHECK(s.serving.requests == 8);
  CHECK(s.serving.queue_depth == 0);
  CHECK(s.stages.size() == 2);
  // Triton's statistics count it: 8 rows in 2 executions, of 1 and 7 rows
  CHECK(s.serving.rows == 8);
  CHECK(s.serving.executions == 2);
  REQUIRE(s.serving.batches.size() == 2);
  CHECK(s.serving.batches[0].rows == 1);
  CHECK(s.serving.batches[0].count == 1);
  CHECK(s.serving.batches[1].rows == 7);
  CHECK(s.serving.batches[1].count == 1);
  CHECK(s.serving.batches[1].infer_ns > 0);
  CHECK(s.serving.queue_ns > 0); // the seven waited while paused
  CHECK(s.serving.infer_ns > 0);
  CHECK(s.serving.last_answer_ms > 0);
  // the answers came in an order of their own; each is one row of the reference
  for (auto& a : answers) {
    REQUIRE(a.size(0) == 1);
    double best = 1e9;
    for (int64_t r = 1; r < 8; ++r) {
      best = std::min(best, max_abs_diff(a, ref.narrow(0, r, 1)));
    }
    CHECK(best <= 1e-6);
  }
  // a full queue refuses at once, with errc::busy: paused, nothing is sent
  // on, so eight requests fill it
  self->request(svc.job(), std::chrono::seconds(10), pause_atom_v)
      .receive([](std::string&) {}, [](caf::error&) {});
  for (int i = 0; i < 8; ++i) {
    self->send(svc.job(), infer_atom_v, tensor_payload{x.narrow(0, i, 1)});
  }
  caf::error busy;
  self->request(svc.job(), std::chrono::seconds(10), infer_atom_v,
                tensor_payload{x.narrow(0, 0, 1)})
      .receive([](tensor_payload&) {}, [&](caf::error& e) { busy = e; });
  self->request(svc.job(), std::chrono::seconds(10), resume_atom_v)
      .receive([](std::string&) {}, [](caf::error&) {});
  for (int i = 0; i < 8; ++i) {
    self->receive([&](tensor_payload& y) { CHECK(y.tensor.size(0) == 1); },
                  caf::after(std::chrono::seconds(30)) >> [] { FAIL("no answer"); });
  }
  // wrong shapes and types are refused with a message
  caf::error shape, type;
  self->request(svc.job(), std::chrono::seconds(10), infer_atom_v,
                tensor_payload{torch::zeros({2, 3})})
      .receive([](tensor_payload&) {}, [&](caf::error& e) { shape = e; });
  self->request(svc.job(), std::chrono::seconds(10), infer_atom_v,
                tensor_payload{x.narrow(0, 0, 1).to(torch::kFloat64)})
      .receive([](tensor_payload&) {}, [&](caf::error& e) { type = e; });
  CHECK(busy.code() == static_cast<uint8_t>(errc::busy));
  CHECK(shape.code() == static_cast<uint8_t>(errc::bad_config));
  CHECK(sys.render(shape).find("the model takes") != std::string::npos);
  CHECK(type.code() == static_cast<uint8_t>(errc::bad_config));
  CHECK(svc.status().serving.rejected >= 1);
  for (auto& n : nodes) {
    caf::anon_send(n.handle, leave_atom_v);
  }
}

TEST_CASE("serving through a kill -9 of a stage node: every request answered once, with "
          "one process's outputs",
          "[actor][serve][process]") {
  torch::set_num_threads(1);
  salamander::testing::temp_dir dir;
  served_cluster c(3, "s", dir.file("m.jsonl"));
  auto x = inputs_for("cnn", 6000);
  auto r = stream_with(*c.svc, x, 4, 1200, [&] { c.procs[1].signal(SIGKILL); });
  REQUIRE(r.error.empty());
  CHECK(r.status.pipeline.recoveries >= 1);
  CHECK(r.status.serving.requests == 1500);
  CHECK(r.status.serving.failed_requests == 0);
  CHECK(r.status.plan.find("s2[") == std::string::npos);
  CHECK(max_abs_diff(r.outputs, c.expected(x)) <= 1e-5);
  c.svc.reset(); // (its metrics log complete)
  // the recovered pipeline made its chain copies, after what it sent again
  // was answered
  auto recovered = events(c.sc.metrics_path, "recovered");
  REQUIRE(recovered.size() == 1);
  auto plans = events(c.sc.metrics_path, "plan");
  REQUIRE(plans.size() >= 2);
  auto generation = plans.back()["plan_version"].get<int64_t>();
  bool copied = false;
  for (auto& e : events(c.sc.metrics_path, "chain_copies")) {
    if (e["plan_version"].get<int64_t>() == generation) {
      copied = true;
      // (made at once, they would come before any answer of the new pipeline)
      auto waited = e["after_resent"].get<int64_t>();
      CHECK(waited == recovered[0]["resent"].get<int64_t>());
      CHECK(e["answered_since_ready"].get<int64_t>() >= waited);
      CHECK(e["t"].get<double>() >= recovered[0]["t"].get<double>());
    }
  }
  CHECK(copied);
}

TEST_CASE("serving through a hung node (SIGSTOP), then planning it back in when it "
          "resumes, without stopping the service",
          "[actor][serve][process]") {
  torch::set_num_threads(1);
  served_cluster c(3, "h");
  auto x = inputs_for("cnn", 4000);
  auto r = stream_with(*c.svc, x, 4, 800, [&] { c.procs[2].signal(SIGSTOP); });
  REQUIRE(r.error.empty());
  CHECK(r.status.pipeline.recoveries >= 1);
  CHECK(r.status.serving.requests == 1000);
  CHECK(max_abs_diff(r.outputs, c.expected(x)) <= 1e-5);
  // it resumes: the cluster dials it again, the job plans it in (a re-plan
  // while serving), and requests go on being answered
  c.procs[2].signal(SIGCONT);
  bool back = false;
  for (int i = 0; i < 300 && !back; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    back = c.svc->status().plan.find("h3[") != std::string::npos;
  }
  REQUIRE(back);
  CHECK(c.svc->status().pipeline.replans >= 1);
  auto again = actors::infer_all(*c.svc, x.narrow(0, 0, 400));
  REQUIRE(again.error.empty());
  CHECK(max_abs_diff(again.outputs, c.expected(x.narrow(0, 0, 400))) <= 1e-5);
}

TEST_CASE("serving through two node failures in a row", "[actor][serve][process]") {
  torch::set_num_threads(1);
  served_cluster c(4, "t");
  auto x = inputs_for("cnn", 6000);
  auto r = stream_with(*c.svc, x, 4, 1000, [&] {
    c.procs[1].signal(SIGKILL);
    // the second while the first recovery is under way or just done
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    c.procs[2].signal(SIGKILL);
  });
  REQUIRE(r.error.empty());
  CHECK(r.status.pipeline.recoveries >= 1);
  CHECK(r.status.serving.requests == 1500);
  CHECK(r.status.dead_nodes.size() == 2);
  CHECK(max_abs_diff(r.outputs, c.expected(x)) <= 1e-5);
}

TEST_CASE("ViT-Base, which fits no single device, served by four nodes of 128 MB each, "
          "gives one process's outputs",
          "[actor][serve][process][large][serial]") {
  torch::set_num_threads(1);
  const std::string model = "vit:size=base,image=224,channels=3,classes=1000";
  auto desc = models::describe(models::model_spec::parse(model));
  REQUIRE(desc.total_params() > 80'000'000); // 86M parameters, 344 MB in fp32
  std::vector<std::vector<std::string>> caps(4, {"--mem-mb", "128"});
  actors::process_cluster procs(4, "b", caps);
  // a ViT-Base forward takes seconds; under ThreadSanitizer, so does
  // serialising its four ~90 MB stages on CAF's one network thread, and CAF
  // counts a node as seen only once a whole message has arrived
#if defined(__SANITIZE_THREAD__)
  process_system ps(std::chrono::milliseconds(60000));
#else
  process_system ps(std::chrono::milliseconds(10000));
#endif
  auto nodes = actors::connect_nodes(*ps.sys, procs.nodes());
  REQUIRE(static_cast<bool>(nodes));
  auto sc = config(model);
  sc.max_batch = 1;
  sc.in_flight = 2;
  sc.request_timeout = std::chrono::seconds(240);
  SECTION("one node cannot hold it: refused with the sizes") {
    std::vector<actors::remote_node> one{(*nodes)[0]};
    actors::service svc(*ps.sys, sc, one);
    CHECK_FALSE(svc.wait_serving(std::chrono::seconds(120)));
    auto s = svc.status();
    CHECK(s.phase == status_phase::failed);
    INFO(s.error);
    CHECK(s.error.find("node b1: layers 0..14 need") != std::string::npos);
    CHECK(s.error.find("MB but this node has 134 MB (emulated cap)") !=
          std::string::npos);
  }
  SECTION("four nodes hold it between them") {
    sc.balance = {4, 3, 3, 4}; // embed+3 blocks, 3, 3, 3 blocks+head: ~90 MB each
    actors::service svc(*ps.sys, sc, *nodes);
    auto x = inputs_for(model, 2);
    actors::inference_options o;
    o.request_rows = 1;
    auto r = actors::infer_all(svc, x, o);
    REQUIRE(r.error.empty());
    CHECK(r.status.stages.size() == 4);
    CHECK(max_abs_diff(r.outputs, reference(*sc.weights, x, 1)) <= 1e-5);
  }
}

TEST_CASE("two models on one cluster are planned together: the second goes where the "
          "first leaves room",
          "[actor][serve][process]") {
  torch::set_num_threads(1);
  // p1 at full speed, p2 at 0.3 of it (dilated: profiled in CPU time), both
  // behind a 1 Mbit/s link, so that each model keeps to one node (a cut
  // would cost seconds). The first model is the ResNet (41 MFLOP a row),
  // the second the CNN (1.7): p2 runs the CNN 3.3x slower than p1 alone,
  // but p1 with the ResNet's work counted runs it ~25x slower. Margins that
  // wide hold on a loaded host; a CNN against a CNN on a 0.7 node (1.43x
  // against 2x) flipped one run in five under three busy loops.
  std::vector<std::vector<std::string>> caps{
      {"--link-mbps", "1"}, {"--link-mbps", "1", "--cpu-share", "0.3", "--dilate"}};
  actors::process_cluster procs(2, "p", caps);
  process_system ps;
  auto nodes = actors::connect_nodes(*ps.sys, procs.nodes());
  REQUIRE(static_cast<bool>(nodes));
  auto heavy = config("resnet");
  auto light = config("cnn");
  for (auto* c : {&heavy, &light}) {
    c->auto_plan = true;
    c->chain_copies = false;
  }
  auto cluster = ps.sys->spawn(actors::cluster_supervisor,
                               actors::cluster_config_for(heavy), *nodes);
  auto serves_on = [](actors::service& svc) {
    REQUIRE(svc.wait_serving(std::chrono::seconds(120)));
    auto plan = svc.status().plan;
    INFO(plan);
    REQUIRE(plan.find(' ') == std::string::npos); // one stage
    return plan.substr(0, plan.find('['));
  };
  for (bool together : {false, true}) {
    DYNAMIC_SECTION((together ? "planned together" : "planned alone")) {
      auto load = together ? std::make_shared<actors::served_load>() : nullptr;
      auto a = heavy, b = light;
      a.shared_load = b.shared_load = load;
      a.served_name = "a";
      b.served_name = "b";
      actors::service sa(*ps.sys, a, cluster);
      CHECK(serves_on(sa) == "p1"); // the faster node
      if (together) {
        CHECK(load->jobs() == 1);
        CHECK(load->others("b", "p1").seconds_per_row > 0);
        CHECK(load->others("b", "p1").bytes > 0);
        CHECK(load->others("b", "p2").seconds_per_row == 0);
        CHECK(load->others("a", "p1").seconds_per_row == 0); // not its own
      }
      actors::service sb(*ps.sys, b, cluster);
      // alone, the second model takes the faster node too; with the first's
      // work counted there, p2 is faster
      CHECK(serves_on(sb) == (together ? "p2" : "p1"));
      // both answer
      for (auto [svc, cfg] : {std::pair{&sa, &heavy}, std::pair{&sb, &light}}) {
        auto x = inputs_for(cfg->model, 4);
        actors::inference_options o;
        o.request_rows = 4;
        auto r = actors::infer_all(*svc, x, o);
        CHECK(r.error.empty());
        CHECK(max_abs_diff(r.outputs, reference(*cfg->weights, x, 4)) <= 1e-5);
      }
      if (together) {
        CHECK(load->jobs() == 2);
      }
    }
  }
  // (each service stops its job as it goes: the other's work leaves the ledger)
  caf::anon_send_exit(cluster, caf::exit_reason::user_shutdown);
}
