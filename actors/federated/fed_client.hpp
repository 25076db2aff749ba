// A federated client (ELFISH mode): one per node, spawned by the federated
// job through the node. It computes its own shard of the training data on
// its node (no training data crosses the network), profiles its training
// cost at several kept fractions, and trains whatever sub-model a round
// hands it, answering with the change of its weights.
//
//   profiling --(profile answered)--> idle <--(update sent / stop)-- training
//                                      '-------(round: task)--------->'
//
// Work is cut into ticks of a few batches, so that a newer task, a stop or
// a profile request is seen within one tick, and so that an emulated device
// is paced without blocking a scheduler thread: after a tick that took t of
// CPU time, the next one starts once t / share has passed (compute-time
// dilation); under a cgroup quota the throttled wall time is already the
// device's.
#pragma once

#include "actors/federated/width.hpp"
#include "actors/node/emulation.hpp"
#include "messages/interfaces.hpp"
#include "models/data.hpp"

#include <chrono>
#include <memory>
#include <optional>

namespace salamander::actors {

/// What a client does between ticks: a round's training, or the profile.
struct fed_work {
  uint64_t id = 0; ///< ticks carry it; a replaced work's ticks are dropped
  bool profile = false;
  fed_task task;           ///< training
  fed_job_actor reply;     ///< who gets the update
  size_t profile_step = 0; ///< profile: index into the spec's keeps
  std::vector<double> profile_batch_s;
  std::unique_ptr<models::layered_model> model;
  torch::nn::Sequential net{nullptr}; ///< the model's layers, as one module
  std::unique_ptr<torch::optim::Optimizer> opt;
  models::weight_snapshot start;
  std::vector<int64_t> order; ///< this epoch's example order (shard positions)
  int64_t epoch = 0;
  int64_t batch = 0;
  double loss_sum = 0;
  int64_t loss_batches = 0;
  double device_s = 0; ///< emulated (or real) seconds so far
  std::chrono::steady_clock::time_point started{};
};

struct fed_client_state {
  static inline const char* name = "fed_client";
  fed_client_spec spec;
  node_emulation emulation;
  std::string node;
  std::shared_ptr<const models::dataset> data;
  torch::Tensor shard; ///< int64 indices into data
  std::string data_note;
  models::model_desc desc;
  fed::model_layout layout;
  uint64_t next_work = 1;
  std::optional<fed_work> work;
  std::optional<caf::typed_response_promise<fed_profile>> profile_promise;
  fed_profile profile;
};

/// `data_dir` not "": the node's own data (its whole training split there),
/// instead of a shard of the experiment's data set.
fed_client_actor::behavior_type
fed_client(fed_client_actor::stateful_pointer<fed_client_state> self,
           fed_client_spec spec, node_emulation emulation, std::string node,
           std::string data_dir);

/// The training split of `name`, loaded once per process and shared by every
/// client in it (the embedded mode runs several).
std::shared_ptr<const models::dataset> shared_training_set(const std::string& name,
                                                           const models::model_desc& desc,
                                                           const std::string& dir);

/// This thread's CPU time, in seconds.
double thread_cpu();

/// LibTorch's intra-op thread count is OpenMP's, which is per thread: the
/// main thread's setting does not reach CAF's workers, which would each run
/// OpenMP teams of one thread per core (and time their barrier waits as the
/// device's compute). Clients call this before computing on a worker.
void use_intra_op_threads(int32_t threads);

/// Work that took `wall` seconds and `cpu` of CPU on an (emulated) device:
/// what the device took, and how long to wait before the next piece so that
/// the device's pace holds. Under compute-time dilation the emulated
/// device's time is its CPU time over its share (what the host's other load
/// adds to the wall time is not the device's); a real device, or one under a
/// cgroup quota, takes the wall time.
std::pair<double, std::chrono::microseconds> device_time(const node_emulation& emulation,
                                                         double wall, double cpu);

/// A client's examples: indices into the shared training set.
struct client_shard {
  std::shared_ptr<const models::dataset> data;
  torch::Tensor shard; ///< int64 indices into data
  std::string note;    ///< "shard 3 of 10, dirichlet(0.5), 4211 examples"
};

/// Client `client`'s shard of `dataset` among `clients` (Dirichlet(alpha)
/// label skew, IID for alpha <= 0; at most max_samples when > 0), or, with
/// `node_dir` set, the whole training split found there (a node's own
/// data). The federated and split-learning clients both shard this way.
client_shard load_shard(const std::string& dataset, const models::model_desc& desc,
                        const std::string& data_dir, const std::string& node_dir,
                        uint32_t client, uint32_t clients, double alpha, uint64_t seed,
                        int64_t max_samples);

} // namespace salamander::actors
