// The serving job supervisor (EdgePipe / PipeEdge mode): one per serving
// job, a peer of the training job under the cluster supervisor. It owns the
// plan (layer ranges -> nodes), the forward-only stages, and every request
// from acceptance to its one answer.
//
//   starting --> [profiling] --> serving <--> paused
//                                 |   ^  \--> replanning (old pipeline keeps
//                         failure v   |        answering until the new one is up)
//                              recovering --no node left--> waiting --join--> recovering
//   any --> finished | failed
//
// Requests (infer) queue; the job merges queued rows into micro-batches of
// at most `max_batch` rows, waiting at most `batch_delay` for a micro-batch
// to fill (dynamic batching, as Triton does it), and keeps at most
// `in_flight` micro-batches in the pipeline: stage 0 gets eval(mb, 0, x),
// each stage passes its output on, the last one returns it to the job, which
// cuts it back into the requests' rows. A full queue answers `busy`.
//
// Weights never change while serving, so every layer stays on the central
// holder (beside the job) and, for each stage, on the chain holder of the
// next stage's node (FTPipeHD's chain replication). When a stage's node dies
// or hangs, the job re-plans over the survivors; each new stage pulls its
// layers from a stage or holder on its own node if one has them, else from a
// neighbour's, else from the central holder; the micro-batches that were in
// flight are sent again. An answer is taken once per micro-batch (the first
// that comes back); later copies are counted and dropped, so every accepted
// request is answered exactly once. A node that joins is planned in while
// the old pipeline goes on serving: the new stages pull their layers, then
// new micro-batches go to them and the old stages stop once they have
// answered what they hold.
#pragma once

#include "algorithms/serve_phase.hpp"

#include "actors/job/job_core.hpp"
#include "actors/job/job_nodes.hpp"
#include "actors/planning/capacity.hpp"
#include "actors/tuning.hpp"
#include "messages/interfaces.hpp"
#include "models/model_desc.hpp"
#include "models/weights.hpp"

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace salamander::actors {

class metrics_log;
class served_load;

/// A serving job's description: what `salamander infer` / `serve` and the
/// tests set. The defaults are the ones the README documents.
struct serve_config {
  std::string model = "cnn";
  uint64_t seed = 1;
  /// The weights to serve (a checkpoint); null: the model's seed weights.
  std::shared_ptr<const models::weight_snapshot> weights;
  /// Rows in one micro-batch at most (dynamic batching's maximum batch).
  int64_t max_batch = tuning::serve_max_batch;
  /// How long the oldest queued request may wait for others to fill its
  /// micro-batch (0: send whatever is queued at once).
  std::chrono::milliseconds batch_delay = tuning::serve_batch_delay;
  /// false: every request is its own micro-batch (split when larger than
  /// max_batch), never merged with another.
  bool batching = true;
  /// Micro-batches in the pipeline at once; 0: two per stage. Each stage's
  /// memory is planned for this many inputs.
  int in_flight = 0;
  /// Profile every node and plan with the partitioner (inference mode);
  /// else an even split over the nodes (or `balance`).
  bool auto_plan = true;
  std::vector<size_t> balance;
  /// At most this many stages. An even split makes this many (fewer when
  /// fewer nodes are live); the planner, which plans inference by its
  /// bottleneck alone, may use fewer, leaving out a node that would only
  /// slow the pipeline. 0: every live node (even split), or the fastest
  /// count (planner).
  size_t stages = 0;
  int32_t threads = 1;
  /// Requests accepted and not yet answered, at most.
  size_t max_queue = tuning::serve_max_queue;
  /// A request not answered within this is answered with a timeout error.
  std::chrono::milliseconds request_timeout = tuning::serve_request_timeout;
  std::chrono::milliseconds node_timeout = tuning::request_timeout;
  std::chrono::milliseconds peer_timeout = tuning::peer_timeout;
  std::chrono::milliseconds profile_timeout = tuning::profile_timeout;
  /// A new pipeline that is not up within this is launched again.
  std::chrono::milliseconds launch_timeout = tuning::progress_timeout;
  /// A serving pipeline whose oldest micro-batch in flight is this old
  /// (its nodes beat, but nothing comes back) is replaced like a broken one.
  std::chrono::milliseconds stall_timeout = tuning::serve_request_timeout;
  /// A serve line (rate, latency, queue) in the metrics log this often.
  std::chrono::milliseconds stats_period = std::chrono::seconds(1);
  double default_link_bytes_per_s = 1e9;
  /// Each stage's layers also on the next stage's node holder (FTPipeHD's
  /// chain replication). Off when several serving jobs share the cluster:
  /// a node's holder keeps layers by index, not by model, so two models'
  /// copies would overwrite each other; recovery then pulls from live
  /// stages and the job's central holder.
  bool chain_copies = true;
  /// Shared by the serving jobs of one server: each plans around the work
  /// the other models placed on the nodes (actors/serve/served_load.hpp).
  /// Null: this job is planned alone.
  std::shared_ptr<served_load> shared_load;
  /// The name the model is served under (its URLs'): jobs of one name are
  /// versions of one model and do not plan around each other.
  std::string served_name;
  std::string secret;
  std::string metrics_path;
};

/// One pipeline of the job: the stages of one plan.
struct serve_pipeline {
  uint64_t generation = 0;
  stage_plan plan;
  std::vector<stage_actor> stages;
  size_t ready_pending = 0;
  bool launched = false; ///< the launcher answered: stages are up and wired
  bool broken = false;   ///< lost a stage: kept only as a source of layers
  std::chrono::steady_clock::time_point since{}; ///< launched, or draining since
  std::string reason;                            ///< why it was planned
};

struct serve_request {
  torch::Tensor x;
  torch::Tensor y; ///< allocated at the first answered rows
  int64_t rows = 0;
  int64_t answered_rows = 0;
  caf::typed_response_promise<tensor_payload> promise;
  std::chrono::steady_clock::time_point accepted{};
  std::chrono::steady_clock::time_point scheduled{}; ///< its first rows in a micro-batch
};

/// Rows [begin, end) of one request inside a micro-batch.
struct serve_segment {
  uint64_t request = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

struct serve_micro {
  std::vector<serve_segment> segments;
  torch::Tensor x;
  uint64_t generation = 0; ///< the pipeline it was sent to; 0: waits to be sent
  std::chrono::steady_clock::time_point built{};
  std::chrono::steady_clock::time_point sent{};
};

/// The serving job's state: the job core (actors/job/job_core.hpp: the
/// cluster, the nodes, pause and stop, the status, the metrics log), and
/// what serving adds.
struct serve_job_state : job_core {
  static inline const char* name = "serve_job";

  serve_config cfg;
  models::model_desc desc;
  size_t layers() const { return desc.layers.size(); }
  algorithms::serve_phase phase = algorithms::serve_phase::starting;
  std::string waiting_for; ///< why no pipeline runs (phase waiting)

  std::optional<serve_pipeline> current; ///< serving
  std::optional<serve_pipeline> next;    ///< launched, pulling its layers
  /// Replaced pipelines: answering what they hold (a re-plan), or broken
  /// and kept as sources until the pipeline after them is up.
  std::vector<serve_pipeline> old;
  uint64_t generations = 0;
  replica_holder_actor central_holder;
  /// Layers each node's holder has (chain copies the job asked for).
  std::map<size_t, std::set<size_t>> chain_copies;
  /// After a recovery, the micro-batches sent again: the new pipeline makes
  /// its chain copies once these are answered, so that encoding and sending
  /// its layers does not delay the first answers after a failure (one that
  /// hangs trips the stall timeout, which breaks the pipeline and clears
  /// this). A second failure before then pulls from the central holder.
  std::set<uint64_t> replicate_after;
  size_t replicate_waited = 0; ///< how many that was (the metrics log's)
  int64_t executions_at_ready = 0; ///< micro-batches answered before it served
  std::set<caf::actor_addr> dead_stages;
  std::set<std::pair<size_t, size_t>> peered; ///< node pairs connected directly
  capacity_model capacity;
  std::string replan_balance;
  /// Without a pipeline (waiting): when to plan again, and the wait after
  /// that (doubling from half a second to 8 s while no plan starts).
  std::chrono::steady_clock::time_point retry_at{};
  std::chrono::milliseconds retry_wait{500};

  uint64_t next_request = 1;
  uint64_t next_micro = 1;
  std::map<uint64_t, serve_request> requests;
  /// Requests with rows not yet in a micro-batch: (request, first such row).
  std::deque<std::pair<uint64_t, int64_t>> waiting;
  int64_t waiting_rows = 0;
  /// Built and not answered: in flight (generation set) or to be sent again.
  std::map<uint64_t, serve_micro> micros;
  std::deque<uint64_t> resend;
  size_t sent_unanswered = 0;
  bool dispatch_scheduled = false;

  /// The last failure: when it was noticed (0: none pending); the longest
  /// time without an answer around it is measured from the last answer.
  std::chrono::steady_clock::time_point failure_at{};
  std::deque<double> latencies;
  std::deque<std::chrono::steady_clock::time_point> answered_at;
  std::vector<double> stage_busy_s; ///< of the current pipeline

  std::chrono::steady_clock::time_point last_stats{};
};

serve_job_actor::behavior_type
serve_job(serve_job_actor::stateful_pointer<serve_job_state> self, serve_config cfg,
          cluster_actor cluster);

} // namespace salamander::actors
