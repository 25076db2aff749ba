// The stage planner: which devices, in which order, hold which contiguous
// layer ranges, so that the pipeline runs as fast as possible.
//
// A pipeline in steady state moves at the pace of its slowest resource: a
// stage's compute per micro-batch, or a link's transfer of the activations
// (and, in training, gradients) crossing a cut. The planner minimises that
// bottleneck subject to memory: a stage must hold its weights (training:
// plus gradients, optimizer state and the snapshots it keeps for recovery)
// and the activations of the micro-batches in flight (1F1B: S-s for stage s
// of S; GPipe: M; inference: the buffers of the job's bound on micro-batches
// in flight, and one layer's working set). A slow device may be left out.
//
// Dynamic programming over suffixes, as in EdgePipe (Hu et al. 2021) and
// FTPipeHD (Chen et al. 2021): best(j, p, k) is the smallest bottleneck for
// layers [p, L) on a chain that starts with device j and has k stages. With
// up to `exact_device_limit` devices the chain may use any subset in any
// order (a bitmask of used devices joins the state) and the result is
// optimal. Beyond that, devices of nearly equal figures are grouped into
// types (PipeEdge's grouping, below type_tolerance) and, while the types are
// few, the search is exact over them. Otherwise the planner is a
// heuristic. It tries four device orders (as given, fastest first, best-linked first, largest memory
// first) and is optimal within each, skipping devices where that helps.
// Each order's plan that beats the orders before it is then improved by
// local search over chains (the devices a plan uses, in stage order; the
// best split over one chain is a smaller DP): remove, insert or replace a device, swap
// two or move one, taking the best move that lowers the objective, and at a local optimum
// descending again from each neighbour (iterated local search), within a
// fixed number of chain evaluations. No randomness: the neighbours come in
// a fixed order. Against brute force on random instances of up to four
// devices it finds the optimum in over 99% (tests/unit/partitioner_test.cpp;
// the four orders alone: 84%); 64 layers on 16 devices plan in a few
// milliseconds (bench planner_speed).
//
// Training may also use data parallelism (PipeDream and HetPipe replicate
// stages for this): several devices each hold the whole model and run a
// contiguous block of each batch's micro-batches, sized to their speed, and
// their gradients are summed at the flush. No fill or drain, but every
// member holds every layer and the sum moves the weights' size twice per
// member per batch. When the layers are too coarse to split in proportion
// to the devices (10:4:2:1 over eight layers), or M is small against the
// stages, it is the faster plan; the planner takes whichever predicts less
// time per batch.
//
// Pure: no clocks, no logging, no randomness. The caller (the supervisor)
// gathers measured profiles and calls plan_partition().
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace salamander::algorithms {

enum class plan_mode { training, inference };
enum class plan_schedule { gpipe, one_f_one_b, async };

struct layer_cost {
  std::string name;
  double param_bytes = 0;
  /// Per sample: what the layer keeps for backward (training) or needs
  /// while running (inference).
  double activation_bytes = 0;
  /// Per sample: the layer's output, which crosses a cut after it.
  double output_bytes = 0;
};

struct device_profile {
  std::string name;
  /// Per layer, seconds for one micro-batch: forward, and backward.
  std::vector<double> forward_s;
  std::vector<double> backward_s;
  double memory_bytes = 0;
  /// The device's link, bytes per second; a cut between two devices runs
  /// at the slower of their two links.
  double link_bytes_per_s = 0;
  double link_latency_s = 0;
  /// Seconds per micro-batch the device already spends on work planned
  /// beside this plan (another served model's stages, at the same request
  /// rate as this one): added to any stage it runs, so that the plan's
  /// bottleneck is that of the device's whole load and several models are
  /// planned over the cluster together. Its memory_bytes is then what that
  /// work leaves free.
  double busy_s = 0;
};

struct plan_request {
  plan_mode mode = plan_mode::training;
  plan_schedule schedule = plan_schedule::one_f_one_b;
  /// The async schedule (algorithms/schedule.hpp): its delay d (each stage
  /// keeps up to d + 1 copies of its weights), its slack K (stage s holds
  /// at most async_warmup + 1 micro-batches in flight) and its
  /// segment of R batches (a pipeline fills and drains once a segment, not
  /// once a batch: the job drains it at epochs and at the stages' longest
  /// row). Each kept snapshot stashes d older versions of the weights.
  int async_delay = 1;
  int async_slack = 1;
  int segment_batches = 10;
  std::vector<layer_cost> layers;
  std::vector<device_profile> devices;
  int64_t micro_batch_size = 16;
  int micro_batches = 4;
  /// Bytes of optimizer state per parameter byte (Adam: 2, SGD+momentum: 1).
  double optimizer_state_factor = 2.0;
  /// Snapshots of its own layers a stage keeps beside the live weights (for
  /// recovery: the training stage keeps its last two replications). Each
  /// costs the stage's weights again, plus their optimizer state when
  /// training. 0: none.
  size_t kept_snapshots = 0;
  /// Up to this many devices the search covers every subset and order.
  size_t exact_device_limit = 6;
  /// Beyond that limit, devices whose every figure (per-layer times,
  /// memory, link) is within this fraction of another's count as one type,
  /// planned at the type's worst member; while the search's table over the
  /// types (the product of each type's count + 1, times types, layers and,
  /// training, stage counts) stays within `typed_table_limit`, the search
  /// is exact over them (PipeEdge's grouping). 0: only identical figures
  /// group.
  double type_tolerance = 0.10;
  double typed_table_limit = 2e6;
  /// Training: also consider data-parallel plans.
  bool allow_data_parallel = true;
  /// Data parallelism: the members sum their gradients along their chain
  /// in chunks of this many bytes (actors/tuning.hpp dp_chunk_values);
  /// else through the supervisor.
  bool dp_chain = false;
  double dp_chunk_bytes = 1 << 20;
  /// Inference: micro-batches a stage may hold at once (its inputs waiting
  /// and the one it computes); each costs its input and output buffers, and
  /// the one computing the working set of its largest layer.
  int inference_in_flight = 1;
  /// Training: exactly this many pipeline stages (the user's `--stages N`);
  /// 0: whatever count is fastest. A count rules out data parallelism.
  size_t stages = 0;
};

struct stage_assignment {
  size_t device = 0; ///< index into plan_request::devices
  size_t begin = 0;
  size_t end = 0;
  double compute_s = 0; ///< per micro-batch
  double link_in_s = 0; ///< transfer across the cut before this stage
  double memory_bytes = 0;
};

struct partition_plan {
  std::vector<stage_assignment> stages;
  double bottleneck_s = 0; ///< per micro-batch
  /// What the planner minimises. Training ends every batch in a flush, so a
  /// batch takes (M + S - 1) bottleneck steps: more stages cost fill and
  /// drain; the async schedule fills and drains once a segment of R
  /// batches, M + (S - 1) / R steps a batch. Inference streams: the
  /// bottleneck itself.
  double objective_s = 0;
  double samples_per_s = 0; ///< predicted
  bool exact = false;       ///< searched every subset and order (of types)
  /// The exact search grouped the devices into this many types (0: it did
  /// not group: few devices, or a heuristic plan).
  size_t device_types = 0;
  /// Data parallelism: every stage holds every layer and stage i runs the
  /// next micro_split[i] micro-batches of each batch (contiguous blocks in
  /// stage order); link_in_s is its share of summing the gradients. Empty
  /// for a pipeline.
  std::vector<int> micro_split;
  bool data_parallel() const { return !micro_split.empty(); }
};

/// Nothing fits: the message says what does not fit where.
class plan_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Throws std::invalid_argument for a malformed request (profiles of the
/// wrong length, non-positive rates) and plan_error when no plan fits.
partition_plan plan_partition(const plan_request& req);

/// The bottleneck and memory of a given plan under the request's cost model
/// (the same arithmetic the planner uses; for tests, benchmarks and the
/// supervisor's predicted-vs-measured view). Fills the per-stage figures.
partition_plan evaluate_plan(const plan_request& req,
                             std::vector<stage_assignment> stages);

/// The planner PipeEdge compares with: PipeDream's (Narayanan et al. 2019),
/// which takes every device to be alike. Every device is planned as if it
/// were device `like` (its per-layer times and link), the layers are cut
/// into one stage per device (as many as there are layers, if fewer) so
/// that the stages' times on that device are as equal as they can be, and
/// stage i runs on device i in the given order. Memory is not checked. The
/// figures returned are what the real devices do (evaluate_plan).
partition_plan plan_homogeneous(const plan_request& req, size_t like = 0);

/// A data-parallel plan over `devices` (member order) with the given split
/// (empty: the best split for their speeds), under the request's cost
/// model. Throws plan_error when a member cannot hold the model.
partition_plan evaluate_data_parallel(const plan_request& req,
                                      const std::vector<size_t>& devices,
                                      std::vector<int> split = {});

/// The best data-parallel plan alone (what plan_partition weighs against
/// the best pipeline). Throws plan_error when fewer than two devices can
/// share the micro-batches (memory, M < 2, inference).
partition_plan plan_data_parallel(const plan_request& req);

/// Sizes of contiguous blocks of `micro_batches` micro-batches for devices
/// taking per_micro_s[i] each, so that the slowest block is as short as it
/// can be (greedy earliest finish, optimal for identical jobs on machines of
/// different speeds). Ties go to the earlier device.
std::vector<int> split_micro_batches(const std::vector<double>& per_micro_s,
                                     int micro_batches);

/// Memory a stage needs: weights (+ gradients and optimizer state when
/// training), the kept snapshots' copies of them, and activations for
/// `in_flight` micro-batches.
double stage_memory(const plan_request& req, size_t begin, size_t end, int in_flight);

/// Micro-batches in flight at stage `index` of `stages` under the request's
/// mode and schedule.
int in_flight(const plan_request& req, size_t index, size_t stages);

} // namespace salamander::algorithms
