// What the distributed runs are compared with: one device doing gradient
// accumulation over the same micro-batches of the same batches.
#pragma once

#include "../support.hpp"

#include "actors/train/train_job.hpp"
#include "models/trainer.hpp"

namespace salamander::testing {

inline std::shared_ptr<const models::dataset> synthetic_for(const std::string& model, uint64_t seed,
                                                            int64_t n) {
  auto d = models::describe(models::model_spec::parse(model));
  return std::make_shared<models::dataset>(models::make_synthetic(seed, n, d.input, d.classes));
}

/// The weights after the job's first `max_batches` batches on one device.
inline models::weight_snapshot single_device_weights(const actors::job_config& jc,
                                                     const models::dataset& train) {
  models::layered_model m(models::describe(models::model_spec::parse(jc.model)), jc.seed);
  models::range_executor exec(m.all(), true, true);
  auto opt = models::make_optimizer({jc.optimizer, jc.lr, jc.momentum, 0.0}, m.all()->parameters());
  for (int64_t b = 0; b < jc.max_batches; ++b) {
    models::train_step(exec, *opt, models::get_batch(train, jc.seed, 0, b, jc.batch_size),
                       jc.micro_batches);
  }
  return models::capture(m, nullptr, "", static_cast<uint64_t>(jc.max_batches));
}

/// The largest parameter difference between two snapshots of one model.
inline double max_weight_diff(const models::weight_snapshot& a, const models::weight_snapshot& b) {
  REQUIRE(a.layers.size() == b.layers.size());
  double worst = 0;
  for (size_t i = 0; i < a.layers.size(); ++i) {
    REQUIRE(a.layers[i].name == b.layers[i].name);
    REQUIRE(a.layers[i].params.size() == b.layers[i].params.size());
    for (size_t j = 0; j < a.layers[i].params.size(); ++j) {
      worst = std::max(worst,
                       max_abs_diff(a.layers[i].params[j].tensor, b.layers[i].params[j].tensor));
    }
  }
  return worst;
}

} // namespace salamander::testing
