// What a model is, without its weights.
//
// Why: the planner needs per-layer parameter bytes, activation bytes and a
// FLOP estimate for models that may not fit on any device here (ViT-Huge has
// 630M parameters). describe() computes all of it analytically, so cost tables
// never allocate weights; layered_model::build() allocates only when asked,
// and the tests check that the two agree for every model small enough to
// build.
//
// This header is deliberately free of LibTorch: the CAF-only code and the
// planner include it cheaply.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace salamander::models {

/// A per-sample tensor shape (no batch dimension).
using shape = std::vector<int64_t>;

int64_t elements(const shape& s);
std::string to_string(const shape& s);

/// A model by name plus options, written `name` or `name:key=value,key=value`,
/// e.g. `cnn`, `mlp:hidden=512`, `vit:size=base,image=224,patch=16,channels=3`.
struct model_spec {
  std::string name;
  std::map<std::string, std::string> options;

  /// Throws std::invalid_argument naming the bad part of `text`.
  static model_spec parse(const std::string& text);
  /// `name:k=v,...` with keys sorted: equal specs give equal strings.
  std::string canonical() const;

  int64_t get_int(const std::string& key, int64_t fallback) const;
  std::string get(const std::string& key, const std::string& fallback) const;
};

/// One layer of a layered model. Costs are per sample and in float32.
struct layer_info {
  std::string name;
  std::string kind;
  shape input;
  shape output;
  int64_t params = 0;
  int64_t param_bytes = 0;
  /// Bytes of the layer's output: what crosses a cut after this layer.
  int64_t output_bytes = 0;
  /// Bytes this layer keeps alive for its backward pass (an estimate of the
  /// saved intermediate tensors, output included).
  int64_t activation_bytes = 0;
  /// Forward floating-point operations (a multiply-add counts as 2).
  double flops = 0.0;
  /// The layer's hyper-parameters (channels, kernel, heads, ...): everything
  /// layered_model::build() needs to construct it, so describe() is the one
  /// source of truth for the architecture.
  std::map<std::string, int64_t> attrs;
  /// Where a layer that is not the zoo's comes from: the TorchScript file
  /// whose top-level child `attrs["child"]` it is. Empty for the zoo's.
  std::string source;

  int64_t attr(const std::string& key) const;
};

struct model_desc {
  model_spec spec;
  shape input;
  int64_t classes = 0;
  std::vector<layer_info> layers;
  /// Identifies compatible weights: architecture and options, hex.
  std::string fingerprint;

  int64_t total_params() const;
  double total_flops() const;
  /// Throws std::invalid_argument if no layer has that name.
  size_t index_of(const std::string& layer_name) const;
};

/// How two specs differ, for messages: "hidden=64 vs hidden=128", "mlp vs
/// cnn", "depth=3 vs depth not given (its default)"; "" when equal.
std::string spec_difference(const model_spec& a, const model_spec& b);

/// What training a model takes in memory, in bytes (float32), estimated from
/// its description: nothing is allocated, so a model too large for the host
/// can be refused before it is built.
struct memory_estimate {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;   ///< adam keeps 2 values per parameter, sgd 1 (momentum)
  double activations = 0; ///< what one batch keeps alive for its backward pass
  std::string optimizer_kind;
  int64_t batch_size = 0;

  double total() const { return weights + gradients + optimizer + activations; }
  /// "3.1 GB (weights 784 MB, gradients 784 MB, adam state 1.6 GB,
  /// activations 12 MB for a batch of 64)"
  std::string describe() const;
};

memory_estimate training_memory(const model_desc& desc, const std::string& optimizer,
                                int64_t batch_size);

/// Bytes for people: "812 KB", "512 MB", "39.2 GB", "3.1 TB".
std::string format_bytes(double bytes);

/// Names accepted by describe() and layered_model::build().
std::vector<std::string> zoo_names();

/// Describes a zoo model analytically, or a TorchScript file
/// (`torchscript:PATH`) by loading it, once LibTorch code has registered how
/// (models/torchscript.hpp; the salamander binary does at start). Throws
/// std::invalid_argument for an unknown model or a bad option, naming it.
model_desc describe(const model_spec& spec);

/// How `torchscript:` models are described: set by enable_torchscript()
/// (models/torchscript.hpp), which needs LibTorch; this header does not.
using layers_describer = model_desc (*)(const model_spec& spec, const shape& input,
                                        int64_t classes);
void set_torchscript_describer(layers_describer describer);

/// FNV-1a, 64 bit: stable across platforms and runs.
uint64_t fnv1a(const void* data, size_t size, uint64_t hash = 0xcbf29ce484222325ULL);

} // namespace salamander::models
