// Pipelines over stage actors compute exactly what one device computes with
// gradient accumulation over the same micro-batches.
#include "reference.hpp"

#include "actors/cluster/cluster_file.hpp"
#include "actors/train/train_job.hpp"
#include "actors/node/system.hpp"
#include "models/trainer.hpp"

using namespace salamander;
using salamander::testing::max_weight_diff;
using salamander::testing::single_device_weights;

namespace {

struct data_pair {
  std::shared_ptr<const models::dataset> train, test;
};

data_pair synthetic_for(const std::string& model) {
  return {salamander::testing::synthetic_for(model, 1, 512),
          salamander::testing::synthetic_for(model, 2, 256)};
}

actors::job_config small_job(const std::string& schedule, int64_t steps) {
  actors::job_config jc;
  jc.model = "cnn";
  jc.seed = 3;
  jc.batch_size = 32;
  jc.micro_batches = 4;
  jc.max_batches = steps;
  jc.schedule = schedule;
  jc.dataset = "synthetic";
  jc.evaluate = false;
  jc.request_timeout = std::chrono::seconds(10);
  jc.progress_timeout = std::chrono::seconds(30);
  return jc;
}

// Two epochs of 13 batches under the async schedule, replicas every 10:
// without evaluation the rows run across the epoch's end to the job's, and
// replicas are taken in the middle of them (evaluating, the job drains at
// the epoch's end: the weight aggregation test); neither changes a version.
actors::job_config two_async_epochs() {
  auto jc = small_job("async", 13);
  jc.epochs = 2;
  jc.replicate_every = 10;
  return jc;
}

// `jc` run to its end on `stages` local nodes of one core each.
actors::job_result run_on_local(const actors::job_config& jc, int stages, const data_pair& data) {
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  return actors::run_job(sys, jc, actors::local_nodes(sys, stages, 1), data.train, data.test,
                         salamander::testing::watched());
}

} // namespace

TEST_CASE("N-stage pipelines hold the single-device weights after K steps, both schedules",
          "[actor][pipeline]") {
  torch::set_num_threads(1);
  auto data = synthetic_for("cnn");
  for (auto schedule : {"gpipe", "1f1b"}) {
    auto jc = small_job(schedule, 5);
    auto reference = single_device_weights(jc, *data.train);
    for (int stages : {2, 3, 4}) {
      INFO(schedule << " with " << stages << " stages");
      caf::actor_system_config cfg;
      actors::configure(cfg);
      caf::actor_system sys{cfg};
      actors::job_options opts;
      opts.fetch_weights = true;
      opts.poll = std::chrono::milliseconds(20);
      auto result = actors::run_job(sys, jc, actors::local_nodes(sys, stages, 1), data.train,
                                    data.test, opts);
      REQUIRE(result.status.error == "");
      REQUIRE(result.status.phase == status_phase::finished);
      CHECK(result.status.training.committed == 5);
      REQUIRE(result.weights);
      CHECK(result.weights->version == 5);
      CHECK(max_weight_diff(*result.weights, reference) <= 1e-5);
    }
  }
}

TEST_CASE("async pipelines hold the weights of one device training on delayed weights",
          "[actor][pipeline][async]") {
  torch::set_num_threads(1);
  auto data = synthetic_for("cnn");
  auto jc = two_async_epochs();
  auto all = jc;
  all.max_batches = 26; // (the references count batches over epochs of 13)
  auto flushed = single_device_weights(all, *data.train, 13);
  // (stages, the job's --async-delay: 0 picks ceil((S-1)/M) = 1, at least 1;
  // --async-slack: how far a stage runs ahead, which the weights never show)
  // --no-weight-prediction: the versions as they were, FTPipeHD's plain
  // stashing)
  struct row {
    int stages;
    uint32_t delay, slack;
    bool predict;
  };
  for (auto [stages, delay, slack, predict] : std::vector<row>{{3, 0, 2, true},
                                                               {4, 2, 1, true},
                                                               {4, 0, 3, true},
                                                               {2, 0, 2, true},
                                                               {4, 2, 2, false}}) {
    jc.async_delay = delay;
    jc.async_slack = slack;
    jc.weight_prediction = all.weight_prediction = predict;
    uint64_t d = delay > 0 ? delay : 1;
    INFO(stages << " stages, delay " << d << ", slack " << slack << ", prediction "
                << predict);
    auto result = run_on_local(jc, stages, data);
    REQUIRE(result.status.error == "");
    CHECK(result.status.training.committed == 26);
    CHECK_THAT(result.status.pipeline.schedule,
               Catch::Contains("async, delay " + std::to_string(d) + ", slack " +
                               std::to_string(slack)));
    CHECK((result.status.pipeline.schedule.find("weights predicted") !=
           std::string::npos) == predict);
    REQUIRE(result.weights);
    CHECK(result.weights->version == 26);
    auto reference =
        salamander::testing::single_device_async_weights(all, *data.train, d, 13);
    CHECK(max_weight_diff(*result.weights, reference) <= 1e-5);
    // and the delay is real: not what a flushed pipeline computes
    CHECK(max_weight_diff(*result.weights, flushed) > 1e-3);
    // nor is the prediction (or its absence) a no-op
    auto other = all;
    other.weight_prediction = !predict;
    CHECK(
        max_weight_diff(*result.weights, salamander::testing::single_device_async_weights(
                                             other, *data.train, d, 13)) > 1e-4);
  }
}

TEST_CASE("under a learning-rate warm-up flushed and async pipelines hold the weights of "
          "one device warming up the same way",
          "[actor][pipeline][async]") {
  // a warm-up of 17 batches runs past the first epoch's end (13 batches):
  // batch g steps at warmup_lr(lr, g, 17), counted over the job, whichever
  // stage steps it and whichever version it ran on
  torch::set_num_threads(1);
  auto data = synthetic_for("cnn");
  for (auto schedule : {"1f1b", "async"}) {
    auto jc = two_async_epochs();
    jc.schedule = schedule;
    jc.warmup_batches = 17;
    auto all = jc;
    all.max_batches = 26;
    bool async = std::string(schedule) == "async";
    auto reference = [&](const actors::job_config& c) {
      return async
                 ? salamander::testing::single_device_async_weights(c, *data.train, 1, 13)
                 : single_device_weights(c, *data.train, 13);
    };
    INFO(schedule);
    auto result = run_on_local(jc, 3, data);
    REQUIRE(result.status.error == "");
    CHECK(result.status.training.committed == 26);
    REQUIRE(result.weights);
    CHECK(max_weight_diff(*result.weights, reference(all)) <= 1e-5);
    auto cold = all;
    cold.warmup_batches = 0;
    CHECK(max_weight_diff(*result.weights, reference(cold)) > 1e-4);
  }
}

TEST_CASE("async pipelines with weight aggregation hold the weights of one device that "
          "averages its versions in flight every K updates",
          "[actor][pipeline][async]") {
  // 4 stages, delay 2: two kept versions join each average, every 3
  // updates (versions 3, 6, ..., 24), the one at 15 with version 13, the
  // first after the epoch's drain, and 14
  torch::set_num_threads(1);
  auto data = synthetic_for("cnn");
  auto jc = two_async_epochs();
  jc.async_delay = 2;
  jc.weight_aggregation = 3;
  jc.evaluate = true; // (the pipeline drains at the epoch's end to evaluate)
  auto all = jc;
  all.max_batches = 26;
  auto result = run_on_local(jc, 4, data);
  REQUIRE(result.status.error == "");
  CHECK(result.status.training.committed == 26);
  CHECK_THAT(result.status.pipeline.schedule,
             Catch::Contains("weights averaged every 3 updates"));
  REQUIRE(result.weights);
  auto averaged =
      salamander::testing::single_device_async_weights(all, *data.train, 2, 13, 3);
  CHECK(max_weight_diff(*result.weights, averaged) <= 1e-5);
  // and the averaging is real: not what the async run without it computes
  auto plain = salamander::testing::single_device_async_weights(all, *data.train, 2, 13);
  CHECK(max_weight_diff(*result.weights, plain) > 1e-4);
}

TEST_CASE("schedule auto: async for a pipeline, 1f1b for data parallelism, and what the "
          "planner predicts faster when it profiles",
          "[actor][pipeline][async]") {
  torch::set_num_threads(1);
  auto data = synthetic_for("cnn");
  struct row {
    bool data_parallel, auto_plan;
    std::string expect; // the schedule's first word ("" : either, chosen by the model)
  };
  for (auto r : std::vector<row>{{false, false, "async"}, {true, false, "1f1b"},
                                 {false, true, ""}}) {
    INFO("data parallel " << r.data_parallel << ", planner " << r.auto_plan);
    auto jc = small_job("auto", 4);
    jc.data_parallel = r.data_parallel;
    jc.auto_plan = r.auto_plan;
    jc.optimizer = "sgd"; // (a data-parallel sum is exact up to rounding, which SGD keeps
    jc.lr = 0.05;         // small; see the data-parallel tests)
    caf::actor_system_config cfg;
    actors::configure(cfg);
    caf::actor_system sys{cfg};
    auto result = actors::run_job(sys, jc, actors::local_nodes(sys, 3, 1), data.train,
                                  data.test, salamander::testing::watched());
    REQUIRE(result.status.error == "");
    CHECK(result.status.training.committed == 4);
    auto& chosen = result.status.pipeline.schedule;
    if (r.expect.empty()) {
      CHECK((chosen.rfind("async", 0) == 0 || chosen == "1f1b"));
    } else {
      CHECK(chosen.rfind(r.expect, 0) == 0);
    }
    REQUIRE(result.weights);
    // whichever it chose, the weights are that schedule's exactly
    jc.schedule = chosen.rfind("async", 0) == 0 ? "async" : "1f1b";
    CHECK(max_weight_diff(*result.weights,
                          salamander::testing::single_device_weights_as_scheduled(
                              jc, *data.train)) <= 1e-5);
  }
}

TEST_CASE("a pipeline evaluates through its stages like the whole model", "[actor][pipeline]") {
  torch::set_num_threads(1);
  auto data = synthetic_for("cnn");
  auto jc = small_job("1f1b", 4);
  jc.evaluate = true;
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  actors::job_options opts;
  opts.fetch_weights = true;
  opts.poll = std::chrono::milliseconds(20);
  auto result = actors::run_job(sys, jc, actors::local_nodes(sys, 3, 1), data.train, data.test,
                                opts);
  REQUIRE(result.status.phase == status_phase::finished);
  REQUIRE(result.weights);
  models::layered_model m(models::describe(models::model_spec::parse(jc.model)));
  models::restore(m, nullptr, *result.weights);
  auto net = m.all();
  auto expect = models::evaluate(net, *data.test);
  CHECK(result.status.test_accuracy == Approx(expect.accuracy()).margin(1e-9));
}

TEST_CASE("bad plans fail the job with a message naming the problem", "[actor][pipeline]") {
  auto data = synthetic_for("cnn");
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  actors::job_options opts;
  opts.poll = std::chrono::milliseconds(20);

  auto jc = small_job("gpipe", 2);
  jc.balance = {3, 0, 1};
  auto r = actors::run_job(sys, jc, actors::local_nodes(sys, 3, 1), data.train, data.test, opts);
  CHECK(r.status.phase == status_phase::failed);
  CHECK_THAT(r.status.error, Catch::Contains("[3, 0, 1]"));

  jc.balance = {};
  r = actors::run_job(sys, jc, actors::local_nodes(sys, 5, 1), data.train, data.test, opts);
  CHECK(r.status.phase == status_phase::failed);
  CHECK_THAT(r.status.error, Catch::Contains("each of the 5 nodes, but model cnn has 4 layers"));

  jc.schedule = "zigzag";
  r = actors::run_job(sys, jc, actors::local_nodes(sys, 2, 1), data.train, data.test, opts);
  CHECK(r.status.phase == status_phase::failed);
  CHECK_THAT(r.status.error, Catch::Contains("zigzag"));
}

TEST_CASE("re-planning at a flush moves layers and keeps the weights exact",
          "[actor][pipeline][replan]") {
  torch::set_num_threads(1);
  auto data = synthetic_for("cnn");
  for (auto schedule : {"gpipe", "1f1b"}) {
    INFO(schedule);
    auto jc = small_job(schedule, 9);
    // 3 stages (2,1,1) -> 3 stages (1,1,2) after batch 3 -> 2 stages after 6
    jc.replan_at = {{3, "1,1,2"}, {6, "2,2"}};
    auto reference = single_device_weights(jc, *data.train);
    caf::actor_system_config cfg;
    actors::configure(cfg);
    caf::actor_system sys{cfg};
    actors::job_options opts;
    opts.fetch_weights = true;
    opts.poll = std::chrono::milliseconds(20);
    auto result = actors::run_job(sys, jc, actors::local_nodes(sys, 3, 1), data.train,
                                  data.test, opts);
    REQUIRE(result.status.error == "");
    REQUIRE(result.status.phase == status_phase::finished);
    CHECK(result.status.training.committed == 9);
    CHECK(result.status.pipeline.replans == 2);
    CHECK(result.status.pipeline.plan_version == 3);
    CHECK(result.status.plan == "local0[0,2) local1[2,4)");
    CHECK(result.status.pipeline.last_replan_moved_bytes > 0);
    REQUIRE(result.weights);
    CHECK(result.weights->version == 9);
    CHECK(max_weight_diff(*result.weights, reference) <= 1e-5);
  }
}

namespace {

// The largest difference of BatchNorm statistics (buffers) between two
// snapshots of one model.
double max_buffer_diff(const models::weight_snapshot& a, const models::weight_snapshot& b) {
  REQUIRE(a.layers.size() == b.layers.size());
  double worst = 0;
  for (size_t i = 0; i < a.layers.size(); ++i) {
    REQUIRE(a.layers[i].buffers.size() == b.layers[i].buffers.size());
    for (size_t j = 0; j < a.layers[i].buffers.size(); ++j) {
      auto& x = a.layers[i].buffers[j].tensor;
      auto& y = b.layers[i].buffers[j].tensor;
      worst = std::max(worst, (x.to(torch::kFloat64) - y.to(torch::kFloat64)).abs().max().item<double>());
    }
  }
  return worst;
}

} // namespace

TEST_CASE("data parallelism over uneven micro-batch shares holds the single-device weights "
          "and BatchNorm statistics",
          "[actor][pipeline][dp]") {
  torch::set_num_threads(1);
  // The members' gradients are summed block by block: when every member
  // after the first has one micro-batch, that is the order one device adds
  // them in and the result is the same to the last bits; with longer blocks
  // it differs by rounding, which training then carries along. The
  // ResNet's convolution biases under BatchNorm get gradients that are pure
  // rounding noise (BatchNorm cancels them), which Adam would scale up to
  // full steps, so the ResNet trains with SGD here.
  struct variant {
    std::string model;
    int micro;
    int members;
    double tolerance;
  };
  // (each sum through the supervisor and along the chain of members, which
  // add in the same order)
  for (auto v : {variant{"cnn", 4, 2, 1e-5}, variant{"cnn", 4, 3, 1e-5},
                 variant{"resnet", 3, 2, 1e-6}, variant{"resnet", 3, 3, 1e-6},
                 variant{"resnet", 5, 3, 1e-3}})
    for (std::string reduce : {"supervisor", "chain"}) {
      INFO(v.model << ", " << v.micro << " micro-batches over " << v.members
                   << " members, summed by " << reduce);
      auto train = salamander::testing::synthetic_for(v.model, 1, 256);
      auto jc = small_job("1f1b", 4);
      jc.model = v.model;
      jc.data_parallel = true;
      jc.dp_reduce = reduce;
      jc.micro_batches = v.micro;
      if (v.model == "resnet") {
        jc.optimizer = "sgd";
        jc.lr = 0.05;
      }
      auto reference = single_device_weights(jc, *train);
      auto result = run_on_local(jc, v.members, {train, train});
      REQUIRE(result.status.error == "");
      REQUIRE(result.status.phase == status_phase::finished);
      CHECK(result.status.training.committed == 4);
      CHECK_THAT(result.status.plan, Catch::StartsWith("dp(local0:"));
      CHECK(result.status.stages.size() == static_cast<size_t>(v.members));
      REQUIRE(result.weights);
      CHECK(result.weights->version == 4);
      REQUIRE(result.weights->layers.size() == reference.layers.size());
      CHECK(max_weight_diff(*result.weights, reference) <= v.tolerance);
      CHECK(max_buffer_diff(*result.weights, reference) <= v.tolerance);
      if (v.model == "resnet") {
        // the statistics moved: the comparison is not between two seeds
        models::layered_model fresh(models::describe(models::model_spec::parse(v.model)),
                                    jc.seed);
        CHECK(max_buffer_diff(models::capture(fresh, nullptr, "", 0), reference) > 1e-2);
      }
    }
}

TEST_CASE("re-planning between data parallelism and a pipeline keeps the weights exact",
          "[actor][pipeline][dp][replan]") {
  torch::set_num_threads(1);
  auto data = synthetic_for("cnn");
  auto jc = small_job("1f1b", 9);
  jc.data_parallel = true;
  // dp over 3 -> pipeline (2,2) after batch 3 -> dp again after 6
  jc.replan_at = {{3, "2,2"}, {6, ""}};
  auto reference = single_device_weights(jc, *data.train);
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  actors::job_options opts;
  opts.fetch_weights = true;
  opts.poll = std::chrono::milliseconds(20);
  auto result =
      actors::run_job(sys, jc, actors::local_nodes(sys, 3, 1), data.train, data.test, opts);
  REQUIRE(result.status.error == "");
  REQUIRE(result.status.phase == status_phase::finished);
  CHECK(result.status.training.committed == 9);
  CHECK(result.status.pipeline.replans == 2);
  CHECK(result.status.pipeline.plan_version == 3);
  CHECK(result.status.plan == "dp(local0:2 local1:1 local2:1)[0,4)");
  REQUIRE(result.weights);
  CHECK(max_weight_diff(*result.weights, reference) <= 1e-5);
}
