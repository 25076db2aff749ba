// Data sets: Fashion-MNIST from Debian's dataset-fashion-mnist package, and a
// synthetic set for tests and for shapes no real data set here has.
//
// Batches are deterministic: batch (seed, epoch, id) always holds the same
// examples in the same order (algorithms/sampling.hpp), so replay after a
// rollback sees exactly what the lost run saw.
#pragma once

#include "models/model_desc.hpp"

#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace salamander::models {

/// A data set that could not be read; the message says what and where.
class data_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct batch {
  torch::Tensor x;
  torch::Tensor y;
};

struct dataset {
  std::string name;
  torch::Tensor images; ///< N x C x H x W, float32, normalised
  torch::Tensor labels; ///< N, int64
  int64_t classes = 0;

  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
  shape sample_shape() const;
  std::vector<int64_t> label_vector() const;
};

/// Directories searched for Fashion-MNIST, in order: only `dir` if given;
/// otherwise $SALAMANDER_DATA, then Debian's /usr/share/datasets/fashion-mnist.
std::vector<std::string> fashion_mnist_dirs(const std::string& dir = "");

/// Reads the training or test split (IDX files, gzipped or raw). Throws
/// data_error naming every path searched and the Debian package.
dataset load_fashion_mnist(bool train, const std::string& dir = "");

/// The split as stored: images N x 28 x 28 uint8, labels N uint8 (what a
/// stream replays). Throws data_error like load_fashion_mnist.
batch read_fashion_mnist_bytes(bool train, const std::string& dir = "");

/// Fashion-MNIST pixel bytes (N x H x W uint8) as models see them:
/// N x 1 x H x W float32, scaled and normalised.
torch::Tensor normalise_fashion_mnist(const torch::Tensor& bytes);

/// Reads one IDX file (gzipped or raw) into a uint8 tensor of its dimensions.
/// Throws data_error for a bad magic number, a truncated body or trailing data.
torch::Tensor read_idx(const std::string& path);

/// A learnable synthetic set: each class is a fixed random prototype, each
/// example its prototype plus Gaussian noise. Same arguments, same data.
dataset make_synthetic(uint64_t seed, int64_t n, const shape& sample, int64_t classes,
                       double noise = 1.0);

/// Throws when `desc` cannot train on the data set `name` (data_error, naming
/// the model option to change) or the name is unknown (std::invalid_argument).
/// Reads no data: a job checks this before it builds anything. Synthetic
/// data is shaped for the model, so every model fits it.
void check_fits(const std::string& name, const model_desc& desc);

/// Loads "fashion-mnist" (train or test split) or "synthetic" (shaped for
/// `desc`, 4096 training / 1024 test examples).
dataset load_dataset(const std::string& name, bool train, const model_desc& desc,
                     const std::string& dir = "");

/// The batch (seed, epoch, id) of `data`.
batch get_batch(const dataset& data, uint64_t seed, uint64_t epoch, int64_t batch_id,
                int64_t batch_size, bool drop_last = false);

/// Rows [begin, end) in storage order (evaluation needs no shuffling).
batch get_range(const dataset& data, int64_t begin, int64_t end);

} // namespace salamander::models
