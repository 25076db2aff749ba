// What the federated and split-learning clients share: their shard of the
// training data (computed on their node), the training set loaded once per
// process, and how an emulated device paces its work (device time).
#pragma once

#include "actors/clients/weights_parts.hpp"
#include "actors/node/emulation.hpp"
#include "models/data.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <utility>

namespace salamander::actors {

/// What every client (federated, split) keeps of where it runs and what it
/// trains on: its node's emulation and name, and its shard of the data.
struct client_base_state {
  node_emulation emulation;
  std::string node;
  std::shared_ptr<const models::dataset> data;
  torch::Tensor shard; ///< int64 indices into data
  std::string data_note;
  models::model_desc desc;
  /// A task's weights arriving in parts, and this client's own transfers
  /// numbered (weights_parts.hpp).
  weights_inbox inbox;
  uint64_t transfers = 0;
};

/// The training split of `name`, loaded once per process and shared by every
/// client in it (the embedded mode runs several).
std::shared_ptr<const models::dataset> shared_training_set(const std::string& name,
                                                           const models::model_desc& desc,
                                                           const std::string& dir);

/// LibTorch's intra-op thread count is OpenMP's, which is per thread: the
/// main thread's setting does not reach CAF's workers, which would each run
/// OpenMP teams of one thread per core (and time their barrier waits as the
/// device's compute). Clients call this before computing on a worker.
void use_intra_op_threads(int32_t threads);

/// A client's examples: indices into the shared training set.
struct client_shard {
  std::shared_ptr<const models::dataset> data;
  torch::Tensor shard; ///< int64 indices into data
  std::string note;    ///< "shard 3 of 10, dirichlet(0.5), 4211 examples"
};

/// Client `client`'s shard of `dataset` among `clients` (Dirichlet(alpha)
/// label skew, IID for alpha <= 0; with classes_apart, the last that many
/// clients' classes are theirs alone; at most max_samples when > 0), or, with
/// `node_dir` set, the whole training split found there (a node's own
/// data). The federated and split-learning clients both shard this way.
client_shard load_shard(const std::string& dataset, const models::model_desc& desc,
                        const std::string& data_dir, const std::string& node_dir,
                        uint32_t client, uint32_t clients, double alpha,
                        uint32_t classes_apart, uint64_t seed, int64_t max_samples);

/// How many of the shard's examples carry each label (index: the label).
std::vector<int64_t> label_counts(const models::dataset& data,
                                  const torch::Tensor& shard);

/// FedRS's restricted softmax (Li and Zhan, KDD 2021): a float [classes]
/// scale for the logits, 1 for each class the shard's `counts` hold (index:
/// the label), `alpha` for the classes it lacks. A client that never sees a
/// class then pushes that class's logits down less (alpha 0: not at all),
/// so that clients holding the class alone are not outvoted on it.
torch::Tensor restricted_softmax_scale(const std::vector<int64_t>& counts,
                                       int64_t classes, double alpha);

} // namespace salamander::actors
