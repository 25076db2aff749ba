// The supervisor: owns one training job.
//
//   starting ──> training ──(epoch end)──> evaluating ──> training ... ──> finished
//       │            │                         │
//       └────────────┴───── failure ───────────┴──> failed
//
// starting: hello every node (protocol check), split the layers (the user's
//   balance or an even split), ask node i to spawn stage i, wire the chain,
//   monitor every stage.
// training: feed batch (seed, epoch, id) as M micro-batches to stage 0 and
//   the labels to the last stage, keeping `window` batches in flight; a batch
//   is committed when every stage has stepped it.
// evaluating: stream the test set through the stages (forward only) and count
//   correct predictions from the logits the last stage returns.
// recovering (DESIGN.md, "Recovery"): a stage or node lost while training
//   freezes feeding, waits `failure_window` for failures that come together,
//   picks the newest version v that every layer has in a live replica
//   holder (0: the seed), re-plans over the surviving nodes, spawns stages
//   that pull their layers at v from the holders, and resumes at batch v.
//   Batches after v are replayed (data order is deterministic), so the
//   weights equal a fault-free run's, and the lineage lists each batch once.
// Start-up failures still fail the job with a message naming the node.
#pragma once

#include "algorithms/partitioner.hpp"
#include "algorithms/schedule.hpp"
#include "messages/interfaces.hpp"
#include "models/data.hpp"

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>

namespace salamander::actors {

class metrics_log;

struct job_config {
  std::string model = "cnn";
  uint64_t seed = 1;
  int64_t epochs = 1;
  int64_t batch_size = 64;
  int64_t micro_batches = 4;
  int64_t max_batches = 0; ///< per epoch; 0: all
  std::string schedule = "1f1b";
  std::string optimizer = "adam";
  double lr = 2e-3;
  double momentum = 0.9;
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  std::vector<size_t> balance; ///< layers per stage; empty: even split
  /// Forced re-plans: after batch N commits, re-plan with this balance
  /// ("" lets the planner decide). For tests, benchmarks and the demo.
  std::map<uint64_t, std::string> replan_at;
  /// Profile every node and plan with the partitioner (else an even split).
  bool auto_plan = false;
  /// The planner may choose data parallelism (every device holds the whole
  /// model and runs its share of each batch's micro-batches).
  bool allow_data_parallel = true;
  /// Without the planner: data parallelism over every node with an even
  /// share of micro-batches, instead of a pipeline.
  bool data_parallel = false;
  /// Re-plan live when the profiles, corrected by measured stage times,
  /// predict at least this gain in throughput (0: never).
  double replan_gain = 0.15;
  /// Batches between two automatic re-plans (lets measurements settle).
  int64_t replan_min_batches = 20;
  /// A link whose rate no profile reports (no emulation, not measured).
  double default_link_bytes_per_s = 1e9;
  std::chrono::milliseconds profile_timeout{120000};
  /// Replicate every stage's weights every K batches (chain + global);
  /// 0 turns replication (and recovery beyond a restart from the seed) off.
  uint32_t replicate_every = 10;
  /// Of the replications, every G-th also goes to the global (central)
  /// holder; the others only along the chain.
  uint32_t global_every = 1;
  /// exact: roll back to a version every layer has and replay (the result
  /// equals a fault-free run); fast (FTPipeHD-like): survivors keep their
  /// newer weights, lost layers come back from their newest replica, nothing
  /// is replayed (less redone work, not exact).
  std::string recovery_policy = "exact";
  /// Failures noticed within this window are recovered from together.
  std::chrono::milliseconds failure_window{30};
  int32_t threads = 1;
  int window = 2; ///< batches in flight
  bool evaluate = true;
  std::chrono::milliseconds request_timeout{10000};
  /// The job fails when no batch commits for this long.
  std::chrono::milliseconds progress_timeout{60000};
  /// The cluster secret nodes must prove ("": an open cluster).
  std::string secret;
  /// Where the JSON-lines metrics log goes ("": none).
  std::string metrics_path;
};

struct remote_node {
  std::string name;
  node_actor handle;
  /// Where it listens, for its pipeline neighbours ("" / 0: not reachable
  /// that way, e.g. in the supervisor's process).
  std::string host = "";
  uint16_t port = 0;
};

struct supervisor_state {
  static inline const char* name = "supervisor";

  job_config cfg;
  std::vector<remote_node> nodes;
  std::vector<node_info> infos;
  std::string fingerprint;
  algorithms::layer_ranges ranges;
  std::vector<size_t> stage_nodes; ///< node index of each stage
  std::vector<stage_actor> stages;
  /// Data parallelism: stage i runs micro_split[i] micro-batches of each
  /// batch (every stage holds every layer); empty for a pipeline.
  std::vector<int> micro_split;
  /// Data parallelism: the members' contributions per batch, and how many
  /// of their values are gradients.
  std::map<uint64_t, std::vector<torch::Tensor>> reduce_parts;

  // re-planning (at a flush): request -> drain -> spawn new stages, which
  // pull their layers from the old ones -> all ready -> old ones stop
  bool replan_requested = false;
  std::string replan_balance;
  bool replanning = false;
  size_t ready_pending = 0;
  std::vector<stage_actor> old_stages;
  std::chrono::steady_clock::time_point replan_started{};
  bool has_pending_plan = false;
  algorithms::layer_ranges pending_ranges;
  std::vector<size_t> pending_nodes;
  std::vector<int> pending_split;

  // fault tolerance
  replica_holder_actor central_holder;
  std::vector<replica_holder_actor> holders; ///< per node, from hello
  std::vector<bool> node_dead;
  std::set<caf::actor_addr> dead_stages; ///< went down (down_msg seen)
  bool recovering = false;
  uint64_t recovery_gen = 0;
  std::chrono::steady_clock::time_point failure_at{};
  int64_t evaluated_epochs = 0;

  // capacity: profiles per node, corrected by measured/predicted stage time
  std::vector<device_report> profiles;
  std::vector<double> node_scale;
  /// Measured batch time over predicted, per kind of plan (0: pipeline,
  /// 1: data parallel): the cost model leaves out per-message costs, which
  /// weigh more on a pipeline. 1 until a plan of that kind has run.
  double plan_kind_ratio[2] = {1.0, 1.0};
  /// Measured links (from, to node index), from the profilers' probes.
  std::map<std::pair<size_t, size_t>, link_report> links;
  /// Per node: its profiler's last capacity report (1: as at the start).
  std::vector<double> capacity;
  uint64_t last_replan_batch = 0;
  double predicted_bottleneck_s = 0;
  std::shared_ptr<const models::dataset> train;
  std::shared_ptr<const models::dataset> test;

  job_status status;
  int64_t batches_per_epoch = 0;
  uint64_t fed = 0;       ///< global batches fed
  uint64_t committed = 0; ///< global batches committed
  std::map<uint64_t, std::vector<batch_stats>> reports;
  std::vector<batch_stats> last_reports; ///< of the last committed batch

  uint64_t eval_round = 0;
  int64_t eval_pending = 0;
  int64_t eval_correct = 0;
  int64_t eval_chunk = 500;

  std::chrono::steady_clock::time_point started{};
  std::chrono::steady_clock::time_point epoch_started{};
  std::chrono::steady_clock::time_point last_progress{};
  int64_t epoch_samples = 0;
  /// (commit time, samples) of the last commits, for the recent rate
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent;

  // operating: metrics, console, heartbeats, authentication
  std::shared_ptr<metrics_log> metrics;
  std::string replan_reason; ///< why the pending re-plan was asked for
  bool user_paused = false;  ///< console pause
  bool waiting_for_capacity = false; ///< paused until a node joins
  bool checkpointing = false;
  struct checkpoint_request {
    std::string path;
    caf::typed_response_promise<std::string> promise;
  };
  std::vector<checkpoint_request> checkpoints; ///< written at the next flush
  std::vector<bool> node_refused; ///< failed to prove the cluster secret
  std::vector<std::chrono::steady_clock::time_point> last_seen; ///< per node
  std::set<std::pair<size_t, size_t>> peered; ///< node pairs connected directly
  /// consoles that proved the cluster secret, and challenges handed out
  std::set<caf::actor_addr> consoles;
  std::map<caf::strong_actor_ptr, std::string> console_challenges;
  std::chrono::steady_clock::time_point recovery_planned_at{};
  uint64_t rollback_from = 0; ///< committed batches when the failure hit
};

/// "1,1,2" -> {1, 1, 2}; "" -> {}. Throws std::invalid_argument.
std::vector<size_t> parse_balance(const std::string& text);

/// `train` and `test` are shared with the caller (the embedded mode loads
/// them once); nodes are connected and named already.
supervisor_actor::behavior_type supervisor(supervisor_actor::stateful_pointer<supervisor_state> self,
                                           job_config cfg, std::vector<remote_node> nodes,
                                           std::shared_ptr<const models::dataset> train,
                                           std::shared_ptr<const models::dataset> test);

} // namespace salamander::actors
