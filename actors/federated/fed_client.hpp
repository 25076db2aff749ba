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

#include "actors/clients/client_work.hpp"
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
  int64_t trained = 0; ///< batches trained this round, over every epoch
  int64_t limit = 0;   ///< batches the round trains (task.work of them all)
  double loss_sum = 0;
  int64_t loss_batches = 0;
  double device_s = 0; ///< emulated (or real) seconds so far
  std::chrono::steady_clock::time_point started{};
};

struct fed_client_state : client_base_state {
  static inline const char* name = "fed_client";
  fed_client_spec spec;
  fed::model_layout layout;
  uint64_t next_work = 1;
  std::optional<fed_work> work;
  std::optional<caf::typed_response_promise<fed_profile>> profile_promise;
  fed_profile profile;
  /// spec.restricted_softmax's scale of the logits, made with the shard
  /// (undefined: plain softmax)
  torch::Tensor logit_scale;
};

/// `data_dir` not "": the node's own data (its whole training split there),
/// instead of a shard of the experiment's data set.
fed_client_actor::behavior_type
fed_client(fed_client_actor::stateful_pointer<fed_client_state> self,
           fed_client_spec spec, node_emulation emulation, std::string node,
           std::string data_dir);

} // namespace salamander::actors
