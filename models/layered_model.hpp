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

/// The module of a described TorchScript layer (models/torchscript.hpp):
/// child `info.attrs["child"]` of the file `info.source`, a fresh copy with
/// its own parameters.
torch::nn::AnyModule build_script_layer(const layer_info& info);

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

// Data parallelism over micro-batches. Members hold the same layers at the
// same weights and each runs a contiguous block of a batch's micro-batches,
// member 0 the first block. At the flush every member contributes
//   [ its accumulated gradients | BatchNorm statistics | their decay ]
// and the merge gives what one device running every micro-batch in order
// would have: the gradients summed (in member order), and the running
// statistics chained. A running statistic is an exponential average,
//   r <- (1 - m) r + m x,
// so after k forwards from r0 it is (1 - m)^k r0 + c: member i sends c_i and
// (1 - m)^k_i, member 0 its statistics as they are, and the merge folds
// r <- decay_i * r + c_i member by member. Equal up to float rounding.

/// The running mean and variance of every BatchNorm module of `net`, in
/// module order (the live buffers, not copies).
std::vector<torch::Tensor> batchnorm_stats(torch::nn::Module& net);

/// What a member contributes after running `micro_count` micro-batches of a
/// batch; `stats_before` are copies of batchnorm_stats() at the batch's start.
/// `grad_values` receives the length of the gradient part.
torch::Tensor dp_contribution(torch::nn::Module& net, const std::vector<torch::Tensor>& stats_before,
                              int64_t micro_count, bool leader, int64_t& grad_values);

/// The members' contributions merged, member by member along the chain of
/// members (a pipelined chain reduce: member 0 starts every chunk, each
/// member folds its own contribution in and passes the chunk on, the last
/// one sends the merged chunk back down), so that no node carries more than
/// the weights' size each way and the links work at once. The merged
/// update is [ summed gradients | chained statistics ] (what dp_apply
/// takes), equal to the last bit whatever the chunk size: each value is
/// folded in member order, gradients in float32, statistics in float64.
///
/// Chunks j < grad_chunks() are gradient values [j C, (j+1) C) (C =
/// chunk_values); the last chunk is the BatchNorm statistics. Pure.
struct dp_chunks {
  int64_t grad_values = 0;  ///< length of the gradient part
  int64_t stats = 0;        ///< BatchNorm values (and as many decays)
  int64_t chunk_values = 1; ///< gradient values per chunk

  /// The chunking of contributions like `contribution` (from
  /// dp_contribution, with its `grad_values`); throws
  /// std::invalid_argument on a malformed contribution or chunk size.
  static dp_chunks of(const torch::Tensor& contribution, int64_t grad_values,
                      int64_t chunk_values);
  uint32_t grad_chunks() const;
  uint32_t count() const { return grad_chunks() + 1; }
  /// Folds this member's `contribution` into chunk `chunk` of the members
  /// before it (`partial`, undefined at member 0).
  torch::Tensor fold(const torch::Tensor& partial, const torch::Tensor& contribution,
                     uint32_t chunk) const;
  /// The last member's folded chunk as values of the merged update.
  torch::Tensor finish(const torch::Tensor& folded, uint32_t chunk) const;
  /// The finished chunks, in order, as the merged update; throws
  /// std::invalid_argument when one is missing or of the wrong length.
  torch::Tensor assemble(const std::vector<torch::Tensor>& finished) const;
  /// Every chunk folded over `parts` (the members' contributions, in
  /// member order), finished and assembled: the merged update at once.
  torch::Tensor merge(const std::vector<torch::Tensor>& parts) const;

private:
  std::pair<int64_t, int64_t> grad_range(uint32_t chunk) const;
};

/// The members' contributions, in member order, merged at once (the
/// supervisor's sum): dp_chunks::merge with one gradient chunk. Pure.
torch::Tensor dp_merge(const std::vector<torch::Tensor>& parts, int64_t grad_values);

/// Sets `net`'s gradients and BatchNorm statistics from the merged update
/// (dp_chunks::assemble), and
/// counts the `other_forwards` micro-batches the other members ran in each
/// BatchNorm's num_batches_tracked. The optimizer step follows.
void dp_apply(torch::nn::Module& net, const torch::Tensor& merged, int64_t other_forwards);

/// Top-1 correct predictions in `logits` against `labels`.
int64_t count_correct(const torch::Tensor& logits, const torch::Tensor& labels);

} // namespace salamander::models
