// Training and evaluation on one device, through the layered-model path.
//
// Why here: this loop is the reference every distributed mode is measured
// against. A batch is split into M micro-batches whose gradients accumulate
// (each loss scaled by 1/M) before one optimizer step - exactly what an
// M-micro-batch pipeline computes, so pipeline tests compare against it.
#pragma once

#include "models/data.hpp"
#include "models/layered_model.hpp"
#include "models/weights.hpp"

#include <functional>

namespace salamander::models {

struct train_options {
  uint64_t seed = 1;
  int64_t batch_size = 64;
  int64_t micro_batches = 1;
  /// Stop after this many batches of the epoch (0: the whole epoch).
  int64_t max_batches = 0;
  /// The learning rate's warm-up over the run's first N batches, counted
  /// across epochs (warmup_lr of `lr`); 0: the optimizer's rate is left as
  /// it is.
  uint32_t warmup_batches = 0;
  double lr = 0;
};

struct batch_report {
  int64_t batch = 0;
  int64_t batches = 0;
  int64_t samples = 0;
  double loss = 0.0;
  int64_t correct = 0;
};

struct epoch_stats {
  int64_t batches = 0;
  int64_t samples = 0;
  double mean_loss = 0.0;
  double train_accuracy = 0.0;
  double seconds = 0.0;
};

struct eval_stats {
  int64_t samples = 0;
  int64_t correct = 0;
  double mean_loss = 0.0;
  /// By label: examples and correct answers (as many entries as the largest
  /// label seen + 1).
  std::vector<int64_t> class_samples;
  std::vector<int64_t> class_correct;
  double accuracy() const { return samples ? static_cast<double>(correct) / samples : 0.0; }
  /// The accuracy on a test set whose labels followed `histogram` (counts by
  /// label, e.g. one client's shard): each class's accuracy weighted by its
  /// count. Classes absent from the evaluated data carry no weight. 0 when no
  /// weight is left.
  double weighted_accuracy(const std::vector<int64_t>& histogram) const;
};

/// Splits a batch into `m` near-equal micro-batches along dimension 0 (the
/// first ones one larger when it does not divide). Throws if m < 1 or the
/// batch has fewer than m rows.
std::vector<torch::Tensor> split_micro(const torch::Tensor& batch, int64_t m);

/// One training step on `batch` with gradient accumulation over micro-batches.
batch_report train_step(range_executor& exec, torch::optim::Optimizer& opt, const batch& b,
                        int64_t micro_batches);

/// One epoch of deterministic batches; `on_batch` is called after each step.
epoch_stats train_epoch(range_executor& exec, torch::optim::Optimizer& opt,
                        const dataset& data, uint64_t epoch, const train_options& opts,
                        const std::function<void(const batch_report&)>& on_batch = {});

/// Accuracy and loss over the whole data set, in storage order.
eval_stats evaluate(torch::nn::Sequential& net, const dataset& data, int64_t batch_size = 1000);

} // namespace salamander::models
