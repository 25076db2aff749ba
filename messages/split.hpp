// The split-learning protocol's data (AdaSplit mode, actors/split/): what a
// node is asked to run (a client holding the layers before the cut), a
// round's work for it, what it sends the server across the cut and what
// comes back, and its report at the end of its turn. Training data never
// crosses the network: a client computes its own shard on its node; only
// activations, labels, gradients and client-side weights do.
#pragma once

#include "messages/payloads.hpp"

#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace salamander {

/// What a node is asked to run: one split-learning client.
struct split_client_spec {
  uint32_t client = 0;     ///< its index among the job's clients
  uint32_t clients = 1;    ///< how many the data is sharded over
  std::string model;       ///< canonical model spec
  std::string fingerprint; ///< what the supervisor's describe() says
  uint32_t cut = 1;        ///< the client holds layers [0, cut)
  std::string method;      ///< vanilla, splitfed, adasplit
  std::string dataset = "fashion-mnist";
  std::string data_dir; ///< where to read it ("": the usual places)
  double alpha = 0.5;   ///< Dirichlet(alpha) label skew; <= 0: IID shards
  uint32_t classes_apart =
      0; ///< not 0: the last this many clients' classes are theirs alone
  uint64_t seed = 1;
  int64_t batch_size = 64;
  std::string optimizer = "sgd";
  double lr = 0.01;
  double momentum = 0.9;
  int32_t threads = 1;
  int64_t max_samples = 0; ///< at most this many examples of the shard (0: all)
  /// This client's speed as a part of its node's: below 1 a straggler among
  /// the node's virtual clients (EMULATED: its device time is stretched).
  double speed = 1.0;
};

/// One round's work for one client (one local epoch over its shard).
struct split_task {
  uint64_t round = 0;
  /// The client-side layers to start from (adasplit: with the auxiliary
  /// head); empty: keep the weights it has.
  snapshot_payload weights;
  /// adasplit: train on the local loss only; send[b] != 0: also send batch
  /// b's activations to the server (the orchestrator's pick). Others send
  /// every batch and wait for its gradient.
  bool local_loss = false;
  std::vector<uint8_t> send;
  caf::actor server;
  /// not 0: the weights came before this message in parts, as this
  /// sender's transfer `parts` (actors/clients/weights_parts.hpp)
  uint64_t parts = 0;
};

/// Across the cut: a batch's activations and labels; want_gradient: the
/// server answers the gradient of the activations (vanilla, splitfed).
struct split_smash {
  uint32_t client = 0;
  uint64_t round = 0;
  bool want_gradient = true;
  tensor_payload activations;
  tensor_payload labels;
};

/// The server's answer: its loss on the batch and, when asked for, the
/// gradient to send back across the cut.
struct split_reply {
  double loss = 0;
  int64_t correct = 0;
  tensor_payload gradient; ///< undefined when not asked for
};

/// A client's report at the end of its round: its client-side weights and
/// what the round cost it.
struct split_result {
  uint64_t round = 0;
  uint32_t client = 0;
  int64_t samples = 0;
  int64_t batches = 0;
  int64_t sent = 0;         ///< batches whose activations went to the server
  int64_t sent_samples = 0; ///< examples in them
  double loss = 0;          ///< mean training loss (local loss, or the server's)
  double server_loss = 0;   ///< mean server loss on what it sent (0: none)
  int64_t bytes_up = 0;     ///< activations and labels sent
  int64_t bytes_down = 0;   ///< gradients received
  double client_flops = 0;  ///< training FLOPs on the client
  double device_s = 0;      ///< the round as the device experienced it
  std::string error;        ///< not "": the round failed, no weights
  snapshot_payload weights; ///< client-side layers after the round
  /// not 0: the weights came before this message in parts, as this
  /// sender's transfer `parts` (actors/clients/weights_parts.hpp)
  uint64_t parts = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, split_client_spec& x) {
  return f(caf::meta::type_name("split_client_spec"), x.client, x.clients, x.model,
           x.fingerprint, x.cut, x.method, x.dataset, x.data_dir, x.alpha,
           x.classes_apart, x.seed, x.batch_size, x.optimizer, x.lr, x.momentum,
           x.threads, x.max_samples, x.speed);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, split_task& x) {
  return f(caf::meta::type_name("split_task"), x.round, x.weights, x.local_loss, x.send,
           x.server, x.parts);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, split_smash& x) {
  return f(caf::meta::type_name("split_smash"), x.client, x.round, x.want_gradient,
           x.activations, x.labels);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, split_reply& x) {
  return f(caf::meta::type_name("split_reply"), x.loss, x.correct, x.gradient);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, split_result& x) {
  return f(caf::meta::type_name("split_result"), x.round, x.client, x.samples, x.batches,
           x.sent, x.sent_samples, x.loss, x.server_loss, x.bytes_up, x.bytes_down,
           x.client_flops, x.device_s, x.error, x.weights, x.parts);
}

} // namespace salamander
