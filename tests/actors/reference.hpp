// What the distributed runs are compared with: one device doing gradient
// accumulation over the same micro-batches of the same batches.
#pragma once

#include "algorithms/sampling.hpp"
#include "algorithms/schedule.hpp"

#include "../support.hpp"

#include "actors/job/runner.hpp"
#include "actors/train/train_job.hpp"
#include "models/trainer.hpp"

#include <map>
#include <numeric>

namespace salamander::testing {

inline std::shared_ptr<const models::dataset> synthetic_for(const std::string& model,
                                                            uint64_t seed, int64_t n) {
  auto d = models::describe(models::model_spec::parse(model));
  return std::make_shared<models::dataset>(
      models::make_synthetic(seed, n, d.input, d.classes));
}

/// The weights after the job's first `max_batches` batches on one device.
/// `jc.max_batches` batches in all, `epoch_batches` to an epoch (0: as many
/// as the data set holds), in the job's order: batch g is batch g % E of
/// epoch g / E.
inline models::weight_snapshot single_device_weights(const actors::job_config& jc,
                                                     const models::dataset& train,
                                                     int64_t epoch_batches = 0) {
  models::layered_model m(models::describe(models::model_spec::parse(jc.model)), jc.seed);
  models::range_executor exec(m.all(), true, true);
  auto opt = models::make_optimizer({jc.optimizer, jc.lr, jc.momentum, 0.0},
                                    m.all()->parameters());
  auto per_epoch = epoch_batches > 0
                       ? epoch_batches
                       : algorithms::batches_per_epoch(train.size(), jc.batch_size, false);
  for (int64_t g = 0; g < jc.max_batches; ++g) {
    auto epoch = static_cast<uint64_t>(g / per_epoch);
    models::set_lr(*opt,
                   models::warmup_lr(jc.lr, static_cast<uint64_t>(g), jc.warmup_batches));
    models::train_step(
        exec, *opt, models::get_batch(train, jc.seed, epoch, g % per_epoch, jc.batch_size),
        jc.micro_batches);
  }
  return models::capture(m, nullptr, "", static_cast<uint64_t>(jc.max_batches));
}

/// The same under the async schedule (algorithms/schedule.hpp), written
/// out on its own: batch g trains on the weights of version
/// max(0, g - delay), across epochs, drains and replicas alike; its
/// gradients step the newest weights. BatchNorm statistics follow the
/// forwards in order, whichever weights they run on. Under the job's weight
/// prediction each version is kept as the optimizer's running direction
/// moves it `delay` steps on (the stage's keep_version). With
/// `aggregate_every`, every that many updates the newest weights become the
/// mean of themselves and the versions batches in flight use, max(0, v -
/// delay) .. v - 1 (FTPipeHD's weight aggregation; the stage's
/// aggregate_versions).
inline models::weight_snapshot single_device_async_weights(const actors::job_config& jc,
                                                           const models::dataset& train,
                                                           uint64_t delay,
                                                           int64_t epoch_batches = 0,
                                                           uint64_t aggregate_every = 0) {
  auto desc = models::describe(models::model_spec::parse(jc.model));
  models::layered_model newest(desc, jc.seed), stashed(desc, jc.seed);
  models::range_executor exec(stashed.all(), true, true);
  auto opt = models::make_optimizer({jc.optimizer, jc.lr, jc.momentum, 0.0},
                                    newest.all()->parameters());
  auto params = newest.all()->parameters();
  auto old_params = stashed.all()->parameters();
  auto buffers = newest.all()->buffers();
  auto old_buffers = stashed.all()->buffers();
  auto copy = [](std::vector<torch::Tensor>& to, const std::vector<torch::Tensor>& from) {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < to.size(); ++i) {
      to[i].copy_(from[i]);
    }
  };
  std::map<uint64_t, std::vector<torch::Tensor>> versions;
  auto per_epoch = epoch_batches > 0
                       ? epoch_batches
                       : algorithms::batches_per_epoch(train.size(), jc.batch_size, false);
  for (int64_t g = 0; g < jc.max_batches; ++g) {
    auto v = static_cast<uint64_t>(g);
    models::set_lr(*opt,
                   models::warmup_lr(jc.lr, v, jc.warmup_batches)); // batch g's rate
    auto ahead = jc.weight_prediction ? static_cast<double>(delay) : 0.0;
    for (auto& p : params) {
      versions[v].push_back(torch::empty_like(p));
      models::predict_weights(*opt, jc.optimizer, p, ahead, versions[v].back());
    }
    copy(old_params, versions.at(algorithms::async_version(v, 0, delay)));
    auto b = models::get_batch(train, jc.seed, static_cast<uint64_t>(g / per_epoch),
                               g % per_epoch, jc.batch_size);
    int64_t m = std::min<int64_t>(jc.micro_batches, b.x.size(0));
    auto xs = models::split_micro(b.x, m);
    auto ys = models::split_micro(b.y, m);
    for (int64_t i = 0; i < m; ++i) {
      auto k = static_cast<size_t>(i);
      copy(old_buffers, buffers);
      exec.forward(i, xs[k]);
      copy(buffers, old_buffers);
      exec.loss_backward(i, ys[k],
                         static_cast<double>(xs[k].size(0)) /
                             static_cast<double>(b.x.size(0)));
    }
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].mutable_grad() = old_params[i].grad();
      old_params[i].mutable_grad() = torch::Tensor();
    }
    opt->step();
    opt->zero_grad();
    auto after = v + 1;
    if (aggregate_every > 0 && after % aggregate_every == 0) {
      std::vector<uint64_t> kept;
      for (auto u = algorithms::async_version(after, 0, delay); u < after; ++u) {
        kept.push_back(u);
      }
      if (!kept.empty()) {
        torch::NoGradGuard no_grad;
        auto n = static_cast<double>(kept.size() + 1);
        for (size_t i = 0; i < params.size(); ++i) {
          auto sum = params[i].clone();
          for (auto u : kept) {
            sum.add_(versions.at(u)[i]);
          }
          params[i].copy_(sum.div_(n));
        }
      }
    }
  }
  return models::capture(newest, nullptr, "", static_cast<uint64_t>(jc.max_batches));
}

/// What one device computes under the job's schedule: the flushed ones
/// train on the newest weights; the async one on weights one update old
/// (the job's delay at 4 micro-batches for up to 5 stages).
inline models::weight_snapshot
single_device_weights_as_scheduled(const actors::job_config& jc,
                                   const models::dataset& train) {
  if (jc.schedule == "async") {
    return single_device_async_weights(jc, train, 1);
  }
  return single_device_weights(jc, train);
}

/// The largest parameter difference between two snapshots of one model.
inline double max_weight_diff(const models::weight_snapshot& a,
                              const models::weight_snapshot& b) {
  REQUIRE(a.layers.size() == b.layers.size());
  double worst = 0;
  for (size_t i = 0; i < a.layers.size(); ++i) {
    REQUIRE(a.layers[i].name == b.layers[i].name);
    REQUIRE(a.layers[i].params.size() == b.layers[i].params.size());
    for (size_t j = 0; j < a.layers[i].params.size(); ++j) {
      worst = std::max(worst, max_abs_diff(a.layers[i].params[j].tensor,
                                           b.layers[i].params[j].tensor));
    }
  }
  return worst;
}

/// The CNN job the recovery and outage tests run: `steps` batches of 32 in
/// 4 micro-batches on synthetic data, replicas every `replicate_every`.
inline actors::job_config recovery_job(int64_t steps, uint32_t replicate_every) {
  actors::job_config jc;
  jc.model = "cnn";
  jc.seed = 9;
  jc.batch_size = 32;
  jc.micro_batches = 4;
  jc.max_batches = steps;
  jc.dataset = "synthetic";
  jc.evaluate = false;
  jc.replicate_every = replicate_every;
  jc.request_timeout = std::chrono::seconds(10);
  jc.progress_timeout = std::chrono::seconds(30);
  return jc;
}

/// Options for a job a test watches closely and whose weights it checks.
inline actors::job_options watched() {
  actors::job_options opts;
  opts.fetch_weights = true;
  opts.poll = std::chrono::milliseconds(5);
  return opts;
}

/// The lineage holds batches 0 .. batches-1, each once, in order.
inline void check_lineage(const job_status& s, int64_t batches) {
  std::vector<uint64_t> expect(static_cast<size_t>(batches));
  std::iota(expect.begin(), expect.end(), uint64_t{0});
  CHECK(s.training.lineage == expect);
}

/// The run computed what a fault-free one of `batches` batches computes, and
/// trained every batch exactly once.
inline void check_exact(const actors::job_result& r, actors::job_config jc,
                        const models::dataset& train, int64_t batches) {
  check_lineage(r.status, batches);
  REQUIRE(r.weights);
  // the job's epoch: the data set's batches, at most max_batches
  auto per_epoch = algorithms::batches_per_epoch(train.size(), jc.batch_size, false);
  if (jc.max_batches > 0) {
    per_epoch = std::min(per_epoch, jc.max_batches);
  }
  jc.max_batches = batches;
  CHECK(max_weight_diff(*r.weights, single_device_weights(jc, train, per_epoch)) <= 1e-5);
}

/// The fault tests' data (CNN-shaped, synthetic) and job.
inline std::shared_ptr<const models::dataset> synthetic(uint64_t seed, int64_t n) {
  return synthetic_for("cnn", seed, n);
}

inline actors::job_config job(int64_t steps, uint32_t replicate_every) {
  return recovery_job(steps, replicate_every);
}

} // namespace salamander::testing
