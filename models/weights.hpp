// Weights and optimizer state as plain named tensors, and the optimizers.
//
// Why: replication, recovery, re-partitioning and checkpoints all move "the
// state of layers [b, e)" - parameters, buffers (BatchNorm statistics) and
// per-parameter optimizer state - between owners. capture() takes a copy
// that training can run on from (replication stays off the critical path);
// restore() puts one back and checks that it fits before touching anything.
#pragma once

#include "models/layered_model.hpp"

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace salamander::models {

struct named_tensor {
  std::string name;
  torch::Tensor tensor;
};

struct layer_weights {
  uint32_t index = 0;
  std::string name;
  std::vector<named_tensor> params;
  std::vector<named_tensor> buffers;
  std::vector<named_tensor> optimizer_state;
  /// The async schedule's older versions (`<param>@-<k>`: the parameter
  /// at version - k) that batches after this snapshot's version train on;
  /// restore() leaves them to the stage (actors/pipeline/stage.cpp).
  std::vector<named_tensor> stashed;
};

struct weight_snapshot {
  std::string fingerprint;
  std::string model;
  uint64_t version = 0;
  std::string optimizer;
  std::vector<layer_weights> layers;

  int64_t bytes() const;
};

struct optimizer_config {
  std::string kind = "adam"; ///< adam or sgd
  double lr = 1e-3;
  double momentum = 0.9; ///< sgd only
  double weight_decay = 0.0;
};

/// Throws std::invalid_argument for an unknown kind or a non-positive rate.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const optimizer_config& cfg,
                                                        std::vector<torch::Tensor> params);

/// The learning rate of batch `batch` (the job's, counted from 0) under a
/// linear warm-up over the first `warmup` batches (Goyal et al. 2017; vision
/// transformers are trained with one): lr x (batch + 1) / warmup until then,
/// lr after; `warmup` 0: lr throughout.
double warmup_lr(double lr, uint64_t batch, uint64_t warmup);

/// Sets the learning rate of every parameter group of `opt`.
void set_lr(torch::optim::Optimizer& opt, double lr);

/// Writes into `out` the weights `p` would have after `steps` more
/// optimizer steps that each moved as the optimizer's running direction
/// does now: Adam's step with its moments as they stand (torch/optim/adam.cpp
/// without a new gradient), momentum SGD's momentum buffer. `p` itself
/// before the optimizer's first step, or for SGD without momentum. This is
/// the weight prediction of XPipe (Guan et al. 2019) and SpecTrain (Chen et
/// al. 2018): an async stage runs a batch on the weights its update will
/// meet, not on the ones `steps` updates older. The optimizer has one
/// parameter group (make_optimizer's).
void predict_weights(const torch::optim::Optimizer& opt, const std::string& kind,
                     const torch::Tensor& p, double steps, torch::Tensor& out);

/// Copies layers [b, e) of `model` (and their state in `opt`, if given).
weight_snapshot capture(const layered_model& model, size_t b, size_t e,
                        const torch::optim::Optimizer* opt, const std::string& opt_kind,
                        uint64_t version);

/// Copies every layer `model` holds.
weight_snapshot capture(const layered_model& model, const torch::optim::Optimizer* opt,
                        const std::string& opt_kind, uint64_t version);

/// Writes the layers of `snap` that `model` holds into it (and their
/// optimizer state into `opt`, if given). Checks the fingerprint and every
/// name, dtype and shape first, and throws std::invalid_argument naming the
/// first mismatch; on a throw nothing has been changed.
void restore(layered_model& model, torch::optim::Optimizer* opt, const weight_snapshot& snap);

} // namespace salamander::models
