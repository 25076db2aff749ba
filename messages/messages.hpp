// Everything that crosses an actor boundary, declared once: atoms, message
// structs with their inspect() overloads, and the one CAF type-ID block.
//
// Tensors travel as tensor_payload. Inside one process CAF never serialises
// a message, so a payload is just a shared torch::Tensor (no copy at all).
// Between processes CAF calls inspect(): the tensor is encoded once into a
// Cap'n Proto frame (messages/tensor_codec.hpp) and written raw; the
// receiver reads it into an aligned frame and aliases the tensor out of it.
#pragma once

#include "messages/tensor_codec.hpp"

#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace salamander {

/// Bumped whenever a message changes shape; nodes of another protocol are
/// refused at hello time with both numbers in the error.
constexpr uint32_t protocol_version = 3;

struct tensor_payload {
  torch::Tensor tensor;
};

struct snapshot_payload {
  models::weight_snapshot snapshot;
};

/// What a node is asked to run: one pipeline stage.
struct stage_spec {
  std::string model;       ///< canonical model spec
  std::string fingerprint; ///< what the supervisor's describe() says
  uint64_t seed = 0;
  uint32_t index = 0;
  uint32_t stages = 1;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint32_t micro_batches = 1;
  std::string schedule = "gpipe";
  std::string optimizer = "adam";
  double lr = 1e-3;
  double momentum = 0.9;
  int32_t threads = 1;
  /// Examples per micro-batch (for the node's memory check).
  uint32_t micro_batch_size = 16;
  /// The first batch this stage runs (a re-planned stage starts mid-job).
  uint64_t start_batch = 0;
  /// Where a re-planned stage takes its weights and optimizer state from:
  /// source i holds layers [source_begin[i], source_end[i]). Empty for a
  /// fresh job (weights come from the seed).
  std::vector<caf::actor> sources;
  std::vector<uint64_t> source_begin;
  std::vector<uint64_t> source_end;
  /// The version to pull from each source (empty: start_batch for all;
  /// the fast recovery policy mixes versions).
  std::vector<uint64_t> source_version;
  /// Replication: every `replicate_every` batches (0: never) the stage sends
  /// a snapshot to the chain holder (next stage's node, or the central one
  /// for the last stage) and to the central (global) holder.
  uint32_t replicate_every = 0;
  /// Of those, every `global_every`-th also goes to the global holder
  /// (FTPipeHD: cheap chain copies often, global ones less often).
  uint32_t global_every = 1;
  caf::actor chain_holder;
  caf::actor global_holder;
  /// Data parallelism: `members` stages hold the same layers and split
  /// each batch's micro-batches into contiguous blocks; this one (member
  /// `member`, 0 leads) runs micro-batches [micro_begin, micro_end). At the
  /// flush they sum their gradients through the supervisor (reduce) and all
  /// take the same step. members == 1: a plain pipeline stage, which runs
  /// every micro-batch. Data-parallel stages are single-stage pipelines
  /// (each holds every layer).
  uint32_t member = 0;
  uint32_t members = 1;
  uint32_t micro_begin = 0;
  uint32_t micro_end = 0; ///< 0: micro_batches
};

/// One stage's account of one batch.
struct batch_stats {
  uint64_t batch = 0;
  uint32_t stage = 0;
  double compute_s = 0; ///< forward + backward + optimizer
  double wait_s = 0;    ///< idle between operations, waiting for inputs
  double send_s = 0;    ///< encoding and handing messages to CAF
  double loss = 0;      ///< last stage: mean loss of the batch
  int64_t correct = 0;  ///< last stage: top-1 correct
  int64_t samples = 0;
};

/// What a replica holder holds: (layer, version) pairs.
struct replica_inventory {
  std::vector<uint64_t> layers;
  std::vector<uint64_t> versions;
};

/// What a node's profiler measured for one model on its device.
struct device_report {
  std::string node;
  uint32_t micro_batch_size = 0;
  std::vector<double> forward_s;  ///< per layer, one micro-batch
  std::vector<double> backward_s; ///< per layer, one micro-batch
  double memory_bytes = 0;        ///< usable: the emulated cap or MemAvailable
  double link_bytes_per_s = 0;    ///< emulated rate, or 0: not known here
  double cpu_share = 1;           ///< emulated share in force, 1 on real devices
  std::string emulation;          ///< "none" on real devices
  /// Emulation: measured wall seconds per CPU second of the model's work
  /// (1/share if the quota were exact); 0 on real devices.
  double slowdown = 0;
};

/// What a node's profiler measured of its link to another node's.
struct link_report {
  std::string from;
  std::string to;
  double latency_s = 0;   ///< one way: half the median round trip of small pings
  double bytes_per_s = 0; ///< from the median time of 256 KB transfers
  std::string method;     ///< "measured", or "measured + EMULATED rate"
};

/// A node's answer to hello.
struct node_info {
  std::string name;
  uint32_t protocol = 0;
  std::string host;
  int32_t threads = 1;
  std::string zoo_fingerprint; ///< describe("cnn").fingerprint: same zoo build?
  std::string emulation = "none";
  caf::actor replica_holder; ///< this node's
  double memory_bytes = 0;   ///< usable: the emulated cap or MemAvailable
  /// HMAC of the supervisor's challenge under the cluster secret (see
  /// actors/auth.hpp), and the node's own challenge for the supervisor.
  std::string proof;
  std::string challenge;
  double cpu_share = 1;       ///< emulated share in force now, 1 on real devices
  double link_bytes_per_s = 0; ///< emulated link rate, 0: not known
  caf::actor profiler;         ///< this node's (link probes go profiler to profiler)
  uint16_t port = 0;           ///< where it listens (0: inside the supervisor's process)
};

/// One node as the console's `nodes` shows it.
struct node_row {
  std::string name;
  std::string health;   ///< ok, late, dead, refused
  std::string role;     ///< "stage 1", or "spare" when the plan leaves it out
  std::string emulation; ///< "none" on real devices
  double cpu_share = 1;
  /// Relative compute speed from its profile and measured stage times
  /// (1: as profiled), 0 when not profiled.
  double speed = 0;
  double memory_bytes = 0;
  double link_bytes_per_s = 0; ///< measured to its peers (median), else emulated; 0: unknown
  double link_latency_s = 0;   ///< measured, one way (median over peers); 0: unknown
  double last_heartbeat_s = -1; ///< seconds since it last answered; -1: never
  double capacity = 1; ///< its profiler's last report: compute capacity vs the start
};

/// One stage of the current plan as the console's `plan` shows it.
struct stage_row {
  uint32_t index = 0;
  std::string node;
  uint64_t begin = 0;
  uint64_t end = 0;
  double predicted_s = 0; ///< per batch, from the profiles (0: no profiles)
  double measured_s = 0;  ///< compute of the last committed batch
  double wait_s = 0;      ///< of the last committed batch
  double send_s = 0;
};

/// The supervisor's answer to a status request (console, progress line).
struct job_status {
  std::string phase; ///< connecting, starting, training, evaluating, finished, failed
  int64_t epoch = 0;
  int64_t epochs = 0;
  int64_t batch = 0; ///< batches committed in this epoch
  int64_t batches = 0;
  int64_t committed = 0; ///< batches committed in the whole job
  double samples_per_s = 0;
  double loss = 0;
  double test_accuracy = -1; ///< after the last evaluation, -1 before
  int64_t plan_version = 0;  ///< 1 for the first plan, +1 per re-plan
  std::string plan;          ///< "node1[0,2) node2[2,4)"
  int64_t replans = 0;
  double last_replan_s = 0;  ///< pause of the last re-plan, drain to resume
  int64_t last_replan_moved_bytes = 0; ///< snapshot bytes that changed node
  int64_t recoveries = 0;
  int64_t rollback_version = -1;  ///< of the last recovery
  double last_recovery_s = 0;     ///< failure noticed -> training resumed
  int64_t redone_batches = 0;     ///< committed work rolled back, summed
  std::vector<std::string> dead_nodes;
  /// The batch ids in the lineage of the current weights, in order.
  std::vector<uint64_t> lineage;
  double elapsed_s = 0;
  /// Wall time spent training (no start-up, no evaluation).
  double train_s = 0;
  /// Per stage of the current plan, summed over the `plan_batches` batches
  /// committed under it: compute, waiting, sending.
  int64_t plan_batches = 0;
  std::vector<double> stage_compute_s;
  std::vector<double> stage_wait_s;
  std::vector<double> stage_send_s;
  std::string error;
  double recent_samples_per_s = 0; ///< over the last few seconds of batches
  bool paused_by_user = false;     ///< console `pause`; `resume` ends it
  std::string health = "ok";       ///< ok, or what is wrong (for progress lines)
  std::string metrics_path;        ///< the JSON-lines log, "" if none
  int64_t replicated_version = -1; ///< newest version forced by `replicate`
  /// False once a fast-policy recovery kept survivors' newer weights: the
  /// lineage then holds for the surviving layers only.
  bool exact = true;
  int64_t missed_layer_updates = 0; ///< fast policy: (layer, batch) updates lost
  std::vector<node_row> nodes;
  std::vector<stage_row> stages;
  bool finished() const { return phase == "finished" || phase == "failed"; }
};

namespace detail {

// Writes a message as (u64 length, raw bytes) straight from the tensors'
// memory; reads it back into an aligned frame that decoded tensors alias.
// Only binary (de)serialisers see the bytes; to_string sees a summary.
template <class Inspector, class Prepare, class Decode>
typename Inspector::result_type inspect_frame(Inspector& f, const char* name, Prepare&& prepare,
                                              Decode&& decode) {
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    messages::outgoing msg = prepare();
    uint64_t n = msg.byte_size();
    if (auto err = f(n)) {
      return err;
    }
    caf::error result;
    msg.write([&](const void* data, size_t size) {
      if (!result) {
        result = f.apply_raw(size, const_cast<void*>(data));
      }
    });
    return result;
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    uint64_t n = 0;
    if (auto err = f(n)) {
      return err;
    }
    if (n % sizeof(capnp::word) != 0 || n > messages::max_frame_bytes) {
      return caf::make_error(caf::sec::invalid_argument,
                             std::string(name) + ": bad frame length " + std::to_string(n));
    }
    auto storage = messages::acquire_words(n / sizeof(capnp::word));
    if (n > 0) {
      if (auto err = f.apply_raw(n, storage->begin())) {
        return err;
      }
    }
    try {
      decode(messages::frame(std::move(storage), n / sizeof(capnp::word)));
    } catch (const std::exception& e) {
      return caf::make_error(caf::sec::invalid_argument, std::string(name) + ": " + e.what());
    }
    return caf::error{};
  } else {
    std::string summary = name;
    return f(caf::meta::type_name(name), summary);
  }
}

} // namespace detail

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_payload& x) {
  return detail::inspect_frame(
      f, "tensor_payload", [&] { return messages::prepare_tensor(x.tensor); },
      [&](const messages::frame& fr) {
        x.tensor = messages::decode_tensor(fr, messages::decode_mode::alias);
      });
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, snapshot_payload& x) {
  return detail::inspect_frame(
      f, "snapshot_payload", [&] { return messages::prepare_snapshot(x.snapshot); },
      [&](const messages::frame& fr) { x.snapshot = messages::decode_snapshot(fr); });
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_spec& x) {
  return f(caf::meta::type_name("stage_spec"), x.model, x.fingerprint, x.seed, x.index,
           x.stages, x.begin, x.end, x.micro_batches, x.schedule, x.optimizer, x.lr, x.momentum,
           x.threads, x.micro_batch_size, x.start_batch, x.sources, x.source_begin, x.source_end,
           x.source_version,
           x.replicate_every, x.global_every, x.chain_holder, x.global_holder, x.member,
           x.members, x.micro_begin, x.micro_end);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, batch_stats& x) {
  return f(caf::meta::type_name("batch_stats"), x.batch, x.stage, x.compute_s, x.wait_s,
           x.send_s, x.loss, x.correct, x.samples);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_status& x) {
  return f(caf::meta::type_name("job_status"), x.phase, x.epoch, x.epochs, x.batch, x.batches,
           x.committed, x.samples_per_s, x.loss, x.test_accuracy, x.plan_version, x.plan,
           x.replans, x.last_replan_s, x.last_replan_moved_bytes, x.recoveries, x.rollback_version,
           x.last_recovery_s, x.redone_batches, x.dead_nodes, x.lineage, x.elapsed_s, x.train_s,
           x.plan_batches, x.stage_compute_s, x.stage_wait_s, x.stage_send_s, x.error,
           x.recent_samples_per_s,
           x.paused_by_user, x.health, x.metrics_path, x.replicated_version, x.exact,
           x.missed_layer_updates, x.nodes, x.stages);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_row& x) {
  return f(caf::meta::type_name("node_row"), x.name, x.health, x.role, x.emulation, x.cpu_share,
           x.speed, x.memory_bytes, x.link_bytes_per_s, x.link_latency_s, x.last_heartbeat_s,
           x.capacity);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_row& x) {
  return f(caf::meta::type_name("stage_row"), x.index, x.node, x.begin, x.end, x.predicted_s,
           x.measured_s, x.wait_s, x.send_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_info& x) {
  return f(caf::meta::type_name("node_info"), x.name, x.protocol, x.host, x.threads,
           x.zoo_fingerprint, x.emulation, x.replica_holder, x.memory_bytes, x.proof,
           x.challenge, x.cpu_share, x.link_bytes_per_s, x.profiler, x.port);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, link_report& x) {
  return f(caf::meta::type_name("link_report"), x.from, x.to, x.latency_s, x.bytes_per_s,
           x.method);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_inventory& x) {
  return f(caf::meta::type_name("replica_inventory"), x.layers, x.versions);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device_report& x) {
  return f(caf::meta::type_name("device_report"), x.node, x.micro_batch_size, x.forward_s,
           x.backward_s, x.memory_bytes, x.link_bytes_per_s, x.cpu_share, x.emulation,
           x.slowdown);
}

} // namespace salamander

CAF_BEGIN_TYPE_ID_BLOCK(salamander, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(salamander, (salamander::tensor_payload))
  CAF_ADD_TYPE_ID(salamander, (salamander::snapshot_payload))
  CAF_ADD_TYPE_ID(salamander, (salamander::stage_spec))
  CAF_ADD_TYPE_ID(salamander, (salamander::batch_stats))
  CAF_ADD_TYPE_ID(salamander, (salamander::node_info))
  CAF_ADD_TYPE_ID(salamander, (salamander::job_status))
  CAF_ADD_TYPE_ID(salamander, (salamander::device_report))
  CAF_ADD_TYPE_ID(salamander, (salamander::replica_inventory))
  CAF_ADD_TYPE_ID(salamander, (std::vector<salamander::batch_stats>))
  CAF_ADD_TYPE_ID(salamander, (salamander::link_report))
  CAF_ADD_TYPE_ID(salamander, (salamander::node_row))
  CAF_ADD_TYPE_ID(salamander, (salamander::stage_row))
  CAF_ADD_TYPE_ID(salamander, (std::vector<salamander::node_row>))
  CAF_ADD_TYPE_ID(salamander, (std::vector<salamander::stage_row>))
  CAF_ADD_ATOM(salamander, salamander, forward_atom, "forward")
  CAF_ADD_ATOM(salamander, salamander, backward_atom, "backward")
  CAF_ADD_ATOM(salamander, salamander, labels_atom, "labels")
  CAF_ADD_ATOM(salamander, salamander, wire_atom, "wire")
  CAF_ADD_ATOM(salamander, salamander, done_atom, "done")
  CAF_ADD_ATOM(salamander, salamander, eval_atom, "eval")
  CAF_ADD_ATOM(salamander, salamander, hello_atom, "hello")
  CAF_ADD_ATOM(salamander, salamander, spawn_atom, "spawn")
  CAF_ADD_ATOM(salamander, salamander, snapshot_atom, "snapshot")
  CAF_ADD_ATOM(salamander, salamander, failed_atom, "failed")
  CAF_ADD_ATOM(salamander, salamander, leave_atom, "leave")
  CAF_ADD_ATOM(salamander, salamander, echo_atom, "echo")
  CAF_ADD_ATOM(salamander, salamander, tick_atom, "tick")
  CAF_ADD_ATOM(salamander, salamander, ready_atom, "ready")
  CAF_ADD_ATOM(salamander, salamander, replan_atom, "replan")
  CAF_ADD_ATOM(salamander, salamander, profile_atom, "profile")
  CAF_ADD_ATOM(salamander, salamander, slow_atom, "slow")
  CAF_ADD_ATOM(salamander, salamander, replicate_atom, "replicate")
  CAF_ADD_ATOM(salamander, salamander, recover_atom, "recover")
  CAF_ADD_ATOM(salamander, salamander, kill_atom, "kill")
  CAF_ADD_ATOM(salamander, salamander, join_atom, "join")
  CAF_ADD_ATOM(salamander, salamander, pause_atom, "pause")
  CAF_ADD_ATOM(salamander, salamander, resume_atom, "resume")
  CAF_ADD_ATOM(salamander, salamander, checkpoint_atom, "checkpoint")
  CAF_ADD_ATOM(salamander, salamander, auth_atom, "auth")
  CAF_ADD_ATOM(salamander, salamander, probe_atom, "probe")
  CAF_ADD_ATOM(salamander, salamander, capacity_atom, "capacity")
  CAF_ADD_ATOM(salamander, salamander, peer_atom, "peer")
  CAF_ADD_ATOM(salamander, salamander, reduce_atom, "reduce")
CAF_END_TYPE_ID_BLOCK(salamander)
