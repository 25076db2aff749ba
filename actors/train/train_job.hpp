// The training job supervisor (FTPipeHD mode): one per pipeline-training
// job, a peer of the other modes' jobs under the cluster supervisor. It owns
// the plan (layer ranges -> nodes), the stages, the committed batch counter
// and the lineage; the cluster supervisor owns the nodes.
//
//   starting --> [profiling] --> training <--> paused
//                                 |  ^   \--> evaluating --> training
//                                 |  |    \-> replanning --> training
//                                 |  |     \> checkpointing -> training
//                         failure v  | recovered
//                              recovering --no capacity--> waiting --join--> recovering
//   any --> finished | failed      (algorithms/job_phase.hpp has the table)
//
// starting: submit to the cluster supervisor, get the admitted nodes; with
//   --plan auto ask it for a profiling round, then plan; launch the plan
//   (actors/pipeline/launcher.hpp), wire the chain, monitor every stage.
// training: feed batch (seed, epoch, id) as M micro-batches to stage 0 and
//   the labels to the last stage, keeping `window` batches in flight; a batch
//   is committed when every stage has stepped it (train_loop.cpp).
// evaluating: stream the test set through the stages (forward only) and count
//   correct predictions from the logits the last stage returns.
// replanning (at a flush): new stages pull only their layers from the old
//   ones, which stop once all are ready (train_plan.cpp).
// recovering (DESIGN.md, "Recovery"; train_recovery.cpp): a stage or node lost
//   while training freezes feeding, waits `failure_window` for failures that
//   come together, asks a recovery round (actors/replication/recovery_round.hpp)
//   for the rollback version and sources, re-plans over the surviving nodes,
//   spawns stages that pull their layers, and resumes at batch v + 1.
//   Batches after v are replayed (data order is deterministic), so the
//   weights equal a fault-free run's, and the lineage lists each batch once.
// Start-up failures fail the job with a message naming the node.
//
// Surviving its own supervisor's death (README, "When the supervisor dies"):
// with a state directory (the run directory of its metrics log) the job
// keeps there what a restarted supervisor needs: job_state.json (committed
// counter, plan, counters; written at start, at every plan, at every
// replication's commit and at the end) and central.ckpt (the central
// holder's newest complete version, written atomically by the holder). A job
// given a resume_point starts as a recovery does: the central holder holds
// the version read back, the nodes' holders what they kept, and the job
// rolls back to the newest version every layer has, re-plans (the persisted
// plan when all its nodes are back) and replays from there; the lineage
// before that version is the dead supervisor's, so every batch is in it
// exactly once.
#pragma once

#include "actors/job/job_core.hpp"
#include "actors/job/job_nodes.hpp"
#include "actors/job/runner.hpp"
#include "actors/planning/capacity.hpp"
#include "actors/tuning.hpp"
#include "algorithms/job_phase.hpp"
#include "algorithms/partitioner.hpp"
#include "algorithms/replan.hpp"
#include "algorithms/schedule.hpp"
#include "messages/interfaces.hpp"
#include "models/data.hpp"

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace salamander::actors {

class metrics_log;
class sample_stream;

/// What a dead supervisor left in its state directory (read_resume_point).
struct resume_point {
  /// The central holder's newest complete version (none: nothing was
  /// replicated centrally yet, the job starts again from the seed).
  std::optional<models::weight_snapshot> weights;
  uint64_t committed = 0; ///< batches committed when it was last written
  /// The plan that ran, by node name (empty: none had started).
  std::vector<std::string> plan_nodes;
  algorithms::layer_ranges plan_ranges;
  std::vector<int> plan_split;
  bool user_plan = false;
  int64_t recoveries = 0;
  int64_t replans = 0;
  int64_t redone_batches = 0;
  int64_t evaluated_epochs = 0;
  double test_accuracy = -1;
  int64_t resumes = 0; ///< resumes before this one
  uint32_t async_delay = 0; ///< the async schedule's delay (0: not async)
  /// The job's phase when the file was written (as its status showed it).
  algorithms::job_phase phase = algorithms::job_phase::starting;
  std::string stopped; ///< why a stopped job stopped
};

/// Reads job_state.json and central.ckpt from `dir`. Throws
/// std::runtime_error saying what is missing or wrong (a different model,
/// a finished job).
resume_point read_resume_point(const std::string& dir, const models::model_desc& desc);

/// A training job's description: what the command line and the tests set.
/// The defaults are the ones the README documents.
struct job_config {
  std::string model = "cnn";
  uint64_t seed = 1;
  int64_t epochs = 1;
  int64_t batch_size = 64;
  int64_t micro_batches = 4;
  int64_t max_batches = 0; ///< per epoch; 0: all
  std::string schedule = "1f1b";
  /// The async schedule's delay d: batch b trains on the weights of version
  /// b - d (algorithms/schedule.hpp); 0: ceil((S-1)/M) of the first plan,
  /// at least 1. Fixed for the whole job (re-plans and recoveries keep it:
  /// the run stays exact).
  uint32_t async_delay = 0;
  /// The async schedule's slack K: stage s of S runs S-s-1 forwards before
  /// its first backward, and up to (K-1)(S-s-1) more as the delay allows
  /// (algorithms::async_warmup). 1 is FTPipeHD's batch_diff; more holds
  /// more activations and absorbs message delays. The weights do not
  /// depend on it.
  uint32_t async_slack = tuning::async_slack;
  /// The async schedule's weight aggregation (FTPipeHD's
  /// `weight_aggregation_interval`): every K updates a stage's newest
  /// weights become the mean of the versions its batches in flight use; 0:
  /// off.
  uint32_t weight_aggregation = 0;
  /// The async schedule's weight prediction (XPipe, SpecTrain): batch b runs
  /// on version b - d moved d steps on by the optimizer's running direction
  /// (Adam's moments, SGD's momentum), the weights its update will meet,
  /// instead of as it was; same compute, closer to the flushed schedules'
  /// accuracy (bench async_accuracy). false: FTPipeHD's plain stashing.
  bool weight_prediction = true;
  std::string optimizer = "adam";
  double lr = 2e-3;
  /// A linear warm-up of the learning rate over the job's first N batches
  /// (models::warmup_lr); 0: none.
  uint32_t warmup_batches = 0;
  double momentum = 0.9;
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  std::vector<size_t> balance; ///< layers per stage; empty: even split
  /// Forced re-plans: after batch N commits, re-plan with this balance
  /// ("" lets the planner decide). For tests, benchmarks and the demo.
  std::map<uint64_t, std::string> replan_at;
  /// Profile every node and plan with the partitioner (else an even split).
  bool auto_plan = false;
  /// The planner must make exactly this many pipeline stages (`--stages N`
  /// with the planner); 0: as many as are fastest. A count, like a balance,
  /// is the user's plan: capacity re-plans never replace it.
  size_t stages = 0;
  /// The planner may choose data parallelism (every device holds the whole
  /// model and runs its share of each batch's micro-batches).
  bool allow_data_parallel = true;
  /// Without the planner: data parallelism over every node with an even
  /// share of micro-batches, instead of a pipeline.
  bool data_parallel = false;
  /// How data-parallel members sum their gradients: "supervisor" (each
  /// sends its contribution to the job, which sends back the sum: two hops,
  /// and the supervisor's process does the work, but its link carries the
  /// weights twice per member) or "chain" (node to node along the chain of
  /// members, in chunks: each link carries the weights once each way, the
  /// supervisor none; 2 (members - 1) hops, each on a member's CPU).
  std::string dp_reduce = "supervisor";
  /// Re-plan live when the profiles, corrected by measured stage times,
  /// predict at least this gain in throughput (0: never).
  double replan_gain = tuning::replan_gain;
  /// Batches between two automatic re-plans (lets measurements settle).
  int64_t replan_min_batches = tuning::replan_min_batches;
  /// Wall time between two looks at the plan (0: at every commit and tick,
  /// for tests that step by commits).
  std::chrono::milliseconds replan_look_every = tuning::replan_look_every;
  /// Looks in a row that must find the same plan best before it is taken.
  int replan_window = tuning::replan_window;
  /// ... and for at least this long.
  std::chrono::milliseconds replan_sustain = tuning::replan_sustain;
  /// Each capacity re-plan raises the gain the next must show, by half as
  /// much this long after it (0: never raised).
  std::chrono::milliseconds replan_damping_half_life = tuning::replan_damping_half_life;
  /// A link whose rate no profile reports (no emulation, not measured).
  double default_link_bytes_per_s = 1e9;
  std::chrono::milliseconds profile_timeout = tuning::profile_timeout;
  /// Replicate every stage's weights every K batches (chain + global);
  /// 0 turns replication (and recovery beyond a restart from the seed) off.
  uint32_t replicate_every = 10;
  /// Of the replications, every G-th also goes to the global (central)
  /// holder; the others only along the chain.
  uint32_t global_every = 1;
  /// EMULATION: the link of the supervisor's process in Mbit/s; the central
  /// holder's answers to recovering stages are spaced to it (0: unshaped).
  double central_link_mbps = 0;
  /// exact: roll back to a version every layer has and replay (the result
  /// equals a fault-free run); fast (FTPipeHD-like): survivors keep their
  /// newer weights, lost layers come back from their newest replica, nothing
  /// is replayed (less redone work, not exact).
  std::string recovery_policy = "exact";
  /// Failures noticed within this window are recovered from together.
  std::chrono::milliseconds failure_window = tuning::failure_window;
  /// A recovery round waits this long for a surviving stage's inventory,
  /// and this long for a replica holder's.
  std::chrono::milliseconds stage_inventory_timeout = tuning::stage_inventory_timeout;
  std::chrono::milliseconds holder_inventory_timeout = tuning::holder_inventory_timeout;
  int32_t threads = 1;
  int window = 2; ///< batches in flight
  bool evaluate = true;
  /// Test examples per evaluation message.
  int64_t eval_chunk = tuning::eval_chunk;
  std::chrono::milliseconds request_timeout = tuning::request_timeout;
  /// Neighbours that take longer to connect are relayed instead.
  std::chrono::milliseconds peer_timeout = tuning::peer_timeout;
  /// The job fails when no batch commits for this long.
  std::chrono::milliseconds progress_timeout = tuning::progress_timeout;
  /// A job paused for too little capacity (every node lost, or the
  /// survivors cannot hold the model) that no node rejoins for this long
  /// ends: failed, with the newest complete weights it keeps (the central
  /// holder's) for --save and an `end` event. 0: it waits for ever.
  std::chrono::milliseconds pause_timeout = tuning::pause_timeout;
  /// The job's own progress check.
  std::chrono::milliseconds tick_period = tuning::tick_period;
  /// Commits over which the recent rate (and a plan's measured batch time)
  /// is taken.
  size_t recent_commits = tuning::recent_commits;
  /// The cluster secret nodes must prove ("": an open cluster).
  std::string secret;
  /// Where the JSON-lines metrics log goes ("": none).
  std::string metrics_path;
  /// Where the job keeps what a restarted supervisor needs to carry it on
  /// (job_state.json, central.ckpt); "": nowhere (it cannot be resumed).
  std::string state_dir;
  /// Carry on a job whose supervisor died, from what it left (state_dir).
  std::shared_ptr<const resume_point> resume;
  /// Continual learning (actors/train/stream.hpp): batch g is the stream's
  /// g-th, waited for while it has not arrived; an epoch is `max_batches`
  /// batches of it (default tuning::stream_epoch), evaluated at its end.
  std::shared_ptr<sample_stream> stream;
};

/// The training job's state: the job core (actors/job/job_core.hpp: the
/// cluster, the nodes, pause and stop, the status, the metrics log), and
/// what training adds. A job the console paused returns to `paused` after
/// whatever it is doing (evaluation, re-plan, recovery) until resumed; a
/// stopped one ends `finished` at the next flush, with its weights there
/// to be saved.
struct train_job_state : job_core {
  static inline const char* name = "train_job";

  job_config cfg;
  algorithms::job_phase phase = algorithms::job_phase::starting;
  /// The model, described once: its layers' costs for every plan, its
  /// fingerprint for every stage spec.
  models::model_desc desc;
  size_t layers() const { return desc.layers.size(); }

  std::chrono::steady_clock::time_point phase_entered{};
  /// Why the job waits for capacity (what `paused` said), and, once the
  /// pause timed out, the weights it ends with (the central holder's newest
  /// complete version: what a checkpoint of the ended job saves).
  std::string waiting_for;
  bool giving_up = false;
  std::optional<models::weight_snapshot> final_weights;

  // the plan that runs (during a re-plan, until the new stages are up, the
  // old one; then the old one's stages and plan are kept until they stop)
  stage_plan plan;
  stage_plan old_plan;
  std::vector<stage_actor> stages;
  /// Data parallelism: the members' contributions per batch.
  std::map<uint64_t, std::vector<torch::Tensor>> reduce_parts;

  // re-planning (at a flush): request -> drain -> spawn new stages, which
  // pull their layers from the old ones -> all ready -> old ones stop
  bool replan_requested = false;
  std::string replan_balance;
  std::string replan_reason;
  std::optional<stage_plan> pending_plan; ///< chosen by the capacity check
  size_t ready_pending = 0;
  std::vector<stage_actor> old_stages;
  std::chrono::steady_clock::time_point replan_started{};
  std::set<std::pair<size_t, size_t>> peered; ///< node pairs connected directly

  // fault tolerance
  replica_holder_actor central_holder;
  std::set<caf::actor_addr> dead_stages; ///< went down (down_msg seen)
  /// The node each stage ever spawned runs on: a recovery that starts while
  /// another is under way must not ask a stage of a node just lost (a
  /// request would wait its whole timeout).
  std::map<caf::actor_addr, uint64_t> stage_node;
  /// +1 per failure: answers (spawns, launches, rounds) of an older
  /// attempt are stale and dropped.
  uint64_t attempt = 0;
  recovery_round_actor round;
  /// The round's decision, and whether the survivors' links were probed
  /// again (or need not be): the recovery plans once it has both.
  std::optional<recovery_decision> decision;
  bool links_probed = true;
  std::chrono::steady_clock::time_point failure_at{};
  std::chrono::steady_clock::time_point recovery_planned_at{};
  uint64_t rollback_from = 0; ///< committed batches when the failure hit
  /// The last recovery's pulls over the network: the bytes each sender (a
  /// node by name, or "central") sends, and the least time its EMULATED
  /// links need for them (the largest bytes / rate over the shaped senders;
  /// 0 when none is shaped).
  std::map<std::string, int64_t> recovery_sent;
  double recovery_link_limit_s = 0;
  /// A resumed job: its first recovery is the resume (logged `resumed`),
  /// onto the persisted plan when every node of it is back.
  bool resuming = false;
  std::optional<stage_plan> resume_plan;
  bool first_commit_logged = false; ///< (the resumed job's first commit)
  int64_t evaluated_epochs = 0;

  /// The async schedule's delay, fixed at the first launch (0: not yet),
  /// and the last batch before which the stages were asked to drain.
  uint32_t async_delay = 0;
  uint64_t drained_before = 0;

  // capacity: profiles, links, corrections (actors/planning/capacity.hpp)
  capacity_model capacity;
  uint64_t last_replan_batch = 0;
  /// Live re-planning (algorithms/replan.hpp): the looks at the best plan,
  /// whether the user chose the plan that runs, and the plan a capacity
  /// re-plan replaced with its measured batch time (to go back to, if the
  /// new one measures slower).
  algorithms::replan_memory replan_looks;
  double last_look_s = -1; ///< when the last look was taken (steady clock, s)
  algorithms::replan_history replan_moves;    ///< capacity re-plans made, for damping
  std::optional<stage_plan> replan_candidate; ///< the plan `replan_looks` names
  /// When something was measured: the commit and the time (remembered
  /// for `measured_plan_memory` commits and `measured_plan_memory_time`).
  struct measured_at {
    uint64_t commit = 0;
    std::chrono::steady_clock::time_point time{};
  };
  /// Plans that ran, by description: measured batch time and when (a
  /// prediction never beats what a plan measured).
  std::map<std::string, std::pair<double, measured_at>> measured_plans;
  /// The last capacity re-plan: its predicted batch time (0 once measured),
  /// and how much slower than that it measured, and when.
  double replan_predicted_s = 0;
  double prediction_error = 1.0;
  measured_at prediction_error_at;
  bool user_plan = false;
  std::optional<stage_plan> replaced_plan;
  double replaced_measured_s = 0;
  std::shared_ptr<const models::dataset> train;
  std::shared_ptr<const models::dataset> test;
  bool stream_poll_pending = false; ///< a dispatch is on its way (starved stream)
  uint64_t evaluated_at = 0; ///< batches committed at the last evaluation

  int64_t batches_per_epoch = 0;
  uint64_t fed = 0;       ///< global batches fed
  uint64_t committed = 0; ///< global batches committed
  std::map<uint64_t, std::vector<batch_stats>> reports;
  std::vector<batch_stats> last_reports; ///< of the last committed batch

  uint64_t eval_round = 0;
  int64_t eval_pending = 0;
  int64_t eval_next = 0; ///< the first test example not yet sent
  int64_t eval_correct = 0;

  std::chrono::steady_clock::time_point epoch_started{};
  std::chrono::steady_clock::time_point last_progress{};
  int64_t epoch_samples = 0;
  /// (commit time, samples) of the last commits, for the recent rate
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent;

  struct checkpoint_request {
    std::string path;
    caf::typed_response_promise<std::string> promise;
  };
  std::vector<checkpoint_request> checkpoints; ///< written at the next flush
};


/// `train` and `test` are shared with the caller (the embedded mode loads
/// them once). The job submits itself to `cluster` and runs on the nodes
/// it admitted.
train_job_actor::behavior_type
train_job(train_job_actor::stateful_pointer<train_job_state> self, job_config cfg,
          cluster_actor cluster, std::shared_ptr<const models::dataset> train,
          std::shared_ptr<const models::dataset> test);

/// The cluster supervisor's settings for a training job's configuration.
cluster_config cluster_config_for(const job_config& cfg);

/// Runs a training job over `nodes` to its end (the CLI, tests, benchmarks).
job_result run_job(caf::actor_system& sys, const job_config& cfg,
                   std::vector<remote_node> nodes,
                   std::shared_ptr<const models::dataset> train,
                   std::shared_ptr<const models::dataset> test,
                   const job_options& opts = {});

} // namespace salamander::actors
