// A model as an ordered list of named layers that can be cut anywhere.
//
// Why: pipeline training and inference give each device a contiguous range
// of layers. A range must run on its own - forward on its input, backward
// from the gradient its successor sends back - and produce exactly what the
// whole model would. Ranges share parameters with the model they were cut
// from (torch::nn::Sequential::push_back keeps the module, not a copy), and
// parameter names are `<layer>.<param>`, so a snapshot of a range names the
// same tensors as a snapshot of the whole model.
//
// Weights are initialised per layer from (seed, layer index): building only
// layers [3, 7) on one device gives bit-identical weights to building all of
// them on another. Nodes therefore never ship initial weights around.
#pragma once

#include "models/model_desc.hpp"

#include <torch/torch.h>

#include <map>

namespace salamander::models {

class layered_model {
public:
  /// Builds layers [begin, end) of `desc` (all of them by default).
  explicit layered_model(model_desc desc, uint64_t seed = 0, size_t begin = 0,
                         size_t end = static_cast<size_t>(-1));

  /// Shorthand: describe(spec) and build all layers.
  static layered_model build(const model_spec& spec, uint64_t seed = 0);

  const model_desc& desc() const { return desc_; }
  /// Global index of the first and one past the last layer held here.
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }

  /// Layers [b, e) (global indices, within what is held) as one Sequential
  /// sharing this model's parameters.
  torch::nn::Sequential slice(size_t b, size_t e) const;
  /// Every held layer as one Sequential.
  torch::nn::Sequential all() const { return slice(begin_, end_); }

  torch::nn::AnyModule layer(size_t global_index) const;

private:
  model_desc desc_;
  size_t begin_;
  size_t end_;
  std::vector<torch::nn::AnyModule> layers_;
};

/// Builds the module for one described layer. Exposed for tests.
torch::nn::AnyModule build_layer(const layer_info& info);

/// Runs a contiguous range of layers on its own: forward for numbered
/// micro-batches, and backward for each when its upstream gradient arrives.
/// Micro-batches may be in flight out of order (1F1B interleaves them).
class range_executor {
public:
  /// `first` ranges receive data (no input gradient is returned); `last`
  /// ranges compute the loss.
  range_executor(torch::nn::Sequential net, bool first, bool last);

  /// Forward of micro-batch `micro`; keeps what its backward needs.
  torch::Tensor forward(int64_t micro, const torch::Tensor& input);

  /// Backward of micro-batch `micro` from the gradient of its output.
  /// Accumulates parameter gradients; returns the gradient of its input, or
  /// an undefined tensor for the first range.
  torch::Tensor backward(int64_t micro, const torch::Tensor& grad_output);

  struct loss_result {
    double loss = 0.0;
    int64_t correct = 0;
    torch::Tensor grad_input;
  };
  /// Last range only: cross-entropy of the stored output of `micro` against
  /// `labels`, scaled by `scale` (1/M for M micro-batches) before backward.
  loss_result loss_backward(int64_t micro, const torch::Tensor& labels, double scale);

  /// Forward without keeping anything (evaluation, inference).
  torch::Tensor infer(const torch::Tensor& input);

  size_t in_flight() const { return pending_.size(); }
  /// Forgets every in-flight micro-batch (a frozen or flushed batch).
  void drop_in_flight() { pending_.clear(); }

  torch::nn::Sequential& net() { return net_; }
  bool first() const { return first_; }
  bool last() const { return last_; }

private:
  struct saved {
    torch::Tensor input; // leaf that receives the input gradient
    torch::Tensor output;
  };
  torch::nn::Sequential net_;
  bool first_;
  bool last_;
  std::map<int64_t, saved> pending_;
};

/// Top-1 correct predictions in `logits` against `labels`.
int64_t count_correct(const torch::Tensor& logits, const torch::Tensor& labels);

} // namespace salamander::models
