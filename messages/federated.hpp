// The federated protocol's data (ELFISH mode, actors/federated/): what a
// node is asked to run (a client), a client's profile, a round's task and
// the update that answers it. Training data never crosses the network: a
// client computes its own shard on its node.
#pragma once

#include "messages/payloads.hpp"

#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace salamander {

/// What a node is asked to run: one federated client.
struct fed_client_spec {
  uint32_t client = 0;  ///< its index among the job's clients
  uint32_t clients = 1; ///< how many the data is sharded over
  std::string model;       ///< canonical model spec
  std::string fingerprint; ///< what the supervisor's describe() says
  std::string dataset = "fashion-mnist";
  /// Where to read it ("": the usual places); a node's own data (node
  /// --data) goes before it.
  std::string data_dir;
  /// Dirichlet(alpha) label skew over the clients; <= 0: IID shards.
  double alpha = 0.5;
  /// Not 0: the last this many clients hold classes no other client holds.
  uint32_t classes_apart = 0;
  uint64_t seed = 1;
  int64_t batch_size = 64;
  std::string optimizer = "sgd";
  double lr = 0.01;
  double momentum = 0.9;
  int32_t threads = 1;
  /// Kept fractions to profile (the time model of ELFISH), and how many
  /// training batches to time at each after one warm-up batch.
  std::vector<double> profile_keeps;
  int64_t profile_batches = 3;
  /// At most this many examples of the shard (0: all; tests).
  int64_t max_samples = 0;
  /// This client's speed as a part of its node's: below 1 a straggler among
  /// the node's virtual clients (EMULATED: its device time is stretched).
  double speed = 1.0;
  /// FedRS (Li and Zhan 2021): in local training, the logits of the classes
  /// this client's shard lacks are scaled by this; 1: plain softmax.
  double restricted_softmax = 1.0;
};

/// A client's profile: its data and seconds per local epoch at each kept
/// fraction (emulated devices: emulated seconds).
struct fed_profile {
  uint32_t client = 0;
  int64_t samples = 0;
  std::vector<double> keep;
  std::vector<double> epoch_s;
  std::string data;      ///< "shard 3 of 10, dirichlet(0.5)" or the node's own data
  std::string emulation; ///< "none" on real devices
};

/// One round's work for one client: the sub-model's starting weights (the
/// global layers cut to `kept`), and how long to train it.
struct fed_task {
  uint64_t round = 0;
  uint64_t base_version = 0;
  double keep = 1;
  /// Kept units per layer (algorithms/federated.hpp); empty: the whole model.
  std::vector<std::vector<int64_t>> kept;
  int64_t epochs = 1;
  /// The part of the epochs' batches to train, in (0, 1]: at least one
  /// batch (partial work, algorithms/federated.hpp)
  double work = 1;
  snapshot_payload weights;
  /// not 0: the weights came before this message in parts, as this
  /// sender's transfer `parts` (actors/clients/weights_parts.hpp)
  uint64_t parts = 0;
};

/// A client's answer: trained minus starting weights of its sub-model.
struct fed_update {
  uint64_t round = 0;
  uint32_t client = 0;
  uint64_t base_version = 0;
  double keep = 1;
  int64_t batches = 0; ///< batches trained, over every epoch
  int64_t samples = 0;
  double train_s = 0; ///< the round's training, as the device experienced it
  double loss = 0;    ///< mean training loss of its last epoch
  std::string error;  ///< not "": training failed, no delta
  snapshot_payload delta;
  /// not 0: the delta came before this message in parts, as this
  /// sender's transfer `parts` (actors/clients/weights_parts.hpp)
  uint64_t parts = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fed_client_spec& x) {
  return f(caf::meta::type_name("fed_client_spec"), x.client, x.clients, x.model,
           x.fingerprint, x.dataset, x.data_dir, x.alpha, x.classes_apart, x.seed,
           x.batch_size, x.optimizer, x.lr, x.momentum, x.threads, x.profile_keeps,
           x.profile_batches, x.max_samples, x.speed, x.restricted_softmax);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fed_profile& x) {
  return f(caf::meta::type_name("fed_profile"), x.client, x.samples, x.keep, x.epoch_s,
           x.data, x.emulation);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fed_task& x) {
  return f(caf::meta::type_name("fed_task"), x.round, x.base_version, x.keep, x.kept,
           x.epochs, x.work, x.weights, x.parts);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fed_update& x) {
  return f(caf::meta::type_name("fed_update"), x.round, x.client, x.base_version, x.keep,
           x.batches, x.samples, x.train_s, x.loss, x.error, x.delta, x.parts);
}

} // namespace salamander
