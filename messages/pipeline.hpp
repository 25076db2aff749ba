// The pipeline protocol's data: what a node is asked to run (a stage), what
// a stage reports per batch, and a stage as the console's `plan` shows it.
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace salamander {

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
  /// The learning rate rises linearly over the job's first `warmup_batches`
  /// batches (models::warmup_lr); 0: `lr` from the first batch.
  uint32_t warmup_batches = 0;
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
  /// flush they sum their gradients (`reduce`: "supervisor", through the
  /// supervisor, or "chain", along the chain of members) and all take the
  /// same step. members == 1: a plain pipeline stage, which runs
  /// every micro-batch. Data-parallel stages are single-stage pipelines
  /// (each holds every layer).
  uint32_t member = 0;
  uint32_t members = 1;
  uint32_t micro_begin = 0;
  uint32_t micro_end = 0; ///< 0: micro_batches
  std::string reduce = "supervisor";
  /// "train", or "infer": a serving stage (actors/serve/): forward only, no
  /// optimizer state, micro-batches stream through without a flush
  /// (eval messages), and `micro_batches` is the number the job keeps in
  /// flight (the node's memory check counts that many input buffers).
  std::string mode = "train";
  /// The asynchronous schedule (schedule "async"): every batch b uses the
  /// weights of version max(0, b - async_delay), whichever
  /// stage holds it and whenever the pipeline was drained or relaunched in
  /// between: replicas, pulls and checkpoints carry the older versions a
  /// stage still needs (models::layer_weights::stashed), so none of them
  /// waits for the pipeline to drain. A row (algorithms::async_order) runs
  /// from where the pipeline was empty to the next of: `row_batches` later,
  /// an epoch's end (multiples of `epoch_batches`, where the job evaluates),
  /// `total_batches`, or where the job asks it to drain (drain_atom).
  uint32_t async_delay = 0;
  /// Async: how many forwards stage s runs before its first backward,
  /// S-s-1 for 1, more for more (algorithms::async_warmup).
  uint32_t async_slack = 1;
  uint32_t row_batches = 0;
  uint64_t epoch_batches = 0;
  uint64_t total_batches = 0;
  /// Async: every `aggregate_every` updates the newest weights become the
  /// mean of themselves and the versions kept for batches in flight,
  /// versions max(0, v - async_delay) .. v - 1 (FTPipeHD's
  /// weight aggregation); 0: never.
  uint32_t aggregate_every = 0;
  /// Async: the copy of version v that batches v + async_delay run on is
  /// the weights predicted async_delay steps ahead by the optimizer's
  /// running direction (models::predict_weights), not version v as it was;
  /// it is stashed, replicated and aggregated as that copy.
  bool predict_weights = false;
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

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_spec& x) {
  return f(caf::meta::type_name("stage_spec"), x.model, x.fingerprint, x.seed, x.index,
           x.stages, x.begin, x.end, x.micro_batches, x.schedule, x.optimizer, x.lr,
           x.warmup_batches, x.momentum, x.threads, x.micro_batch_size, x.start_batch,
           x.sources, x.source_begin, x.source_end, x.source_version, x.replicate_every,
           x.global_every, x.chain_holder, x.global_holder, x.member, x.members,
           x.micro_begin, x.micro_end, x.mode, x.async_delay, x.async_slack,
           x.row_batches, x.epoch_batches, x.total_batches, x.aggregate_every,
           x.predict_weights, x.reduce);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, batch_stats& x) {
  return f(caf::meta::type_name("batch_stats"), x.batch, x.stage, x.compute_s, x.wait_s,
           x.send_s, x.loss, x.correct, x.samples);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stage_row& x) {
  return f(caf::meta::type_name("stage_row"), x.index, x.node, x.begin, x.end,
           x.predicted_s, x.measured_s, x.wait_s, x.send_s);
}

/// What a launcher (actors/pipeline/launcher.hpp) hands back: the stages it
/// spawned, in plan order, and the node pairs that connected directly; or
/// the stage that could not start and why (its other stages are stopped).
struct launch_result {
  std::vector<caf::actor> stages;
  std::vector<uint64_t> peered; ///< flattened (lower, higher) node pairs
  bool ok = true;
  uint32_t failed_stage = 0;
  std::string error;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, launch_result& x) {
  return f(caf::meta::type_name("launch_result"), x.stages, x.peered, x.ok,
           x.failed_stage, x.error);
}

} // namespace salamander
