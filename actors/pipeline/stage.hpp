// The stage actor: one contiguous range of layers on one device.
//
// Why it is written this way: a stage executes its own row of the schedule
// table (algorithms/schedule.hpp) strictly in order. Messages may arrive in
// any order - the next batch's first micro-batch can arrive before this
// batch's last gradient - so inputs are buffered by (batch, micro) and the
// stage runs the next operation of its row as soon as that operation's input
// is there. Executing a fixed order is what makes the result independent of
// timing, and therefore exact.
//
//   message in ──> buffer[(batch, micro)] ──> pump(): while next op ready: run
//                                                     row done: optimizer step,
//                                                     (done, stats) -> supervisor
//
// A serving stage (spec.mode "infer", actors/serve/) runs the same layers
// forward only: eval(mb, 0, x) in, the output to the next stage (the last
// one's to the job), in arrival order, with no batches and no flush.
#pragma once

#include "actors/tuning.hpp"

#include "actors/node/emulation.hpp"
#include "actors/replication/replica_store.hpp"
#include "algorithms/schedule.hpp"
#include "messages/interfaces.hpp"
#include "models/layered_model.hpp"
#include "models/weights.hpp"

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>

namespace salamander::actors {

struct stage_state {
  static inline const char* name = "stage";

  stage_spec spec;
  std::unique_ptr<models::layered_model> model;
  std::unique_ptr<models::range_executor> exec;
  std::unique_ptr<torch::optim::Optimizer> opt;
  stage_actor prev;
  stage_actor next;
  train_job_actor supervisor;

  std::vector<algorithms::stage_op> order;
  size_t cursor = 0;
  uint64_t batch = 0;   ///< the batch being executed
  uint64_t version = 0; ///< batches stepped into the weights

  using key = std::pair<uint64_t, uint32_t>;
  std::map<key, torch::Tensor> inputs;
  std::map<key, torch::Tensor> grads;
  std::map<key, std::pair<double, torch::Tensor>> labels;

  bool ready = true;  ///< false while pulling state from re-plan sources
  bool wired = false; ///< the supervisor has named the neighbours
  node_emulation emulation;
  std::shared_ptr<link_shaper> link; ///< the node's (none: unshaped)
  /// The snapshot this stage last replicated (FTPipeHD keeps it too).
  /// The snapshots it last replicated, newest last. Two: a stage runs ahead
  /// of its neighbours by at most `window` batches, so with K >= window one
  /// of them is at the version the others' replicas have (recovery pulls it
  /// when the holder of its chain replica died).
  replica_store kept{tuning::stage_kept_snapshots};
  /// snapshots sent in parts so far (each transfer's id, with the sender)
  uint64_t transfers = 0;
  /// The courier of the last snapshot sent in parts, by holder: the next
  /// one to that holder starts when it ends.
  std::map<caf::actor_addr, caf::actor> couriers;
  /// A replication the console asked for: at this version (0: none).
  uint64_t replicate_at = 0;
  /// Recovery froze this stage: it computes nothing more.
  bool frozen = false;
  /// Position in the pipeline: first receives data, last computes the loss.
  bool first = true;
  bool last = true;
  /// Data parallelism: at the flush the step waits for the members' sum
  /// (reducing), from the supervisor, or along the chain (spec.reduce
  /// "chain"; models::dp_chunks): `prev` and `next` are then the members
  /// before and after this one, chunks of the members before come from
  /// `prev` (kept in
  /// `partials` until this member's own contribution is there), are folded
  /// and go to `next`; the last member's finished chunks come back down the
  /// chain, each member keeping them in `summed`.
  bool reducing = false;
  std::chrono::steady_clock::time_point reduce_sent{};
  torch::Tensor contribution;
  models::dp_chunks chunks;
  std::map<std::pair<uint64_t, uint32_t>, torch::Tensor> partials;
  std::vector<torch::Tensor> summed;
  size_t summed_count = 0;
  /// BatchNorm statistics at the start of the batch (data parallelism).
  std::vector<torch::Tensor> stats_before;
  bool have_stats_before = false;
  batch_stats stats;
  std::chrono::steady_clock::time_point last_op_end{};
  bool batch_started = false;
  /// Serving (spec.mode "infer"): forward only, no optimizer. Micro-batches
  /// that come before the stage is ready and wired wait here, in order; the
  /// busy time since the last report goes to the job about twice a second.
  bool infer = false;
  std::deque<std::tuple<uint64_t, uint32_t, torch::Tensor>> stream;
  batch_stats busy;
  std::chrono::steady_clock::time_point busy_reported{};
  /// The asynchronous schedule (spec.schedule "async", algorithms/
  /// schedule.hpp): the current row of batches, [segment.first,
  /// segment.second) (`order` is unused), and the weight versions that
  /// batches in flight use, each a copy of the layers (weights and
  /// buffers; gradients accumulate in it and move to `model` at the batch's
  /// step). `model` holds the newest version with the optimizer; copies no
  /// longer needed wait in `spare`. A row ends where the job asked for a
  /// drain (`drain_at`), among others; the versions go on across rows.
  struct version_copy {
    std::unique_ptr<models::layered_model> model;
    std::unique_ptr<models::range_executor> exec;
  };
  bool async = false;
  std::pair<uint64_t, uint64_t> segment{0, 0};
  std::vector<algorithms::async_op> async_row;
  std::map<uint64_t, version_copy> versions;
  std::vector<version_copy> spare;
  uint64_t drain_at = 0;
  /// Async, a model with buffers (BatchNorm): the newest weights' buffers,
  /// layer by layer, as they were before the first forward of each batch
  /// not yet stepped, so that a replica at that version is the state the
  /// batches from it replay on (capture_state).
  bool has_buffers = false;
  std::map<uint64_t, std::vector<std::vector<torch::Tensor>>> buffers_before;
  /// A batch through this stage whose optimizer step waits for a gap in the
  /// row (the stage waiting for an input) or for an operation that needs it
  /// (a forward on the version it makes, a backward on the copy holding its
  /// gradients, the row's end), so that the step is off the path of the
  /// neighbours' inputs: (batch, the version its micro-batches used).
  std::optional<std::pair<uint64_t, uint64_t>> unstepped;
};

/// Builds the stage's layers from `spec` (weights from the spec's seed).
/// Throws std::invalid_argument when the spec does not describe a valid range.
stage_actor::behavior_type stage(stage_actor::stateful_pointer<stage_state> self,
                                 stage_spec spec, node_emulation emulation = {});

} // namespace salamander::actors
