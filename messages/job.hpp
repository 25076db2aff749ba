// The job protocol's data: what every job supervisor answers to a status
// request (console, progress line, tests), whatever its mode.
#pragma once

#include "messages/cluster.hpp"
#include "messages/pipeline.hpp"

#include <caf/all.hpp>

#include <cstdint>
#include <iterator>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace salamander {

/// Where a job is, whatever its mode: the union of the modes' phases
/// (algorithms/job_phase.hpp, serve_phase.hpp, round_phase.hpp). Consoles,
/// logs and JSON show its text (to_string), the words they always showed.
enum class status_phase : uint8_t {
  unknown, ///< no status could be had
  starting,
  profiling,
  spawning,
  training,
  paused,
  evaluating,
  replanning,
  recovering,
  serving,
  waiting,
  finished,
  failed,
};

/// The mode a job runs in; its text is the command that starts it.
enum class job_mode : uint8_t { train, serve, federate, split };

inline std::string to_string(status_phase p) {
  static constexpr const char* names[] = {
      "unknown",    "starting",   "profiling", "spawning", "training", "paused",  "evaluating",
      "replanning", "recovering", "serving",   "waiting",  "finished", "failed"};
  auto i = static_cast<size_t>(p);
  return i < std::size(names) ? names[i] : "unknown";
}

/// The phase a text names (a mode's phase as algorithms' to_string writes
/// it); unknown for any other text.
inline status_phase status_phase_from_text(std::string_view text) {
  for (uint8_t i = 0; i <= static_cast<uint8_t>(status_phase::failed); ++i) {
    if (to_string(static_cast<status_phase>(i)) == text) {
      return static_cast<status_phase>(i);
    }
  }
  return status_phase::unknown;
}

/// AdaSplit's phase of a round (split learning's other methods have none):
/// clients train on their local loss alone, or with the server.
enum class adasplit_phase : uint8_t { none, local, global };

inline std::string to_string(adasplit_phase p) {
  return p == adasplit_phase::local ? "local" : p == adasplit_phase::global ? "global" : "";
}

inline std::string to_string(job_mode m) {
  static constexpr const char* names[] = {"train", "serve", "federate", "split"};
  auto i = static_cast<size_t>(m);
  return i < std::size(names) ? names[i] : "train";
}

inline std::ostream& operator<<(std::ostream& out, status_phase p) {
  return out << to_string(p);
}

inline std::ostream& operator<<(std::ostream& out, job_mode m) {
  return out << to_string(m);
}

/// What pipelines (training and serving) add to a status: the plan's
/// history, recoveries, and the stages' time under the current plan.
struct pipeline_status {
  int64_t plan_version = 0; ///< 1 for the first plan, +1 per re-plan
  int64_t replans = 0;
  double last_replan_s = 0;            ///< pause of the last re-plan, drain to resume
  int64_t last_replan_moved_bytes = 0; ///< snapshot bytes that changed node
  int64_t recoveries = 0;
  int64_t rollback_version = -1; ///< of the last recovery
  double last_recovery_s = 0;    ///< failure noticed -> training (serving) resumed
  /// Per stage of the current plan, summed over the `plan_batches` batches
  /// committed under it: compute, waiting, sending (serving: busy time).
  int64_t plan_batches = 0;
  std::vector<double> stage_compute_s;
  std::vector<double> stage_wait_s;
  std::vector<double> stage_send_s;
  /// Training: the schedule in words ("1f1b", "async, delay 1, segments of
  /// 10 batches"); empty for serving.
  std::string schedule;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pipeline_status& x) {
  return f(caf::meta::type_name("pipeline_status"), x.plan_version, x.replans,
           x.last_replan_s, x.last_replan_moved_bytes, x.recoveries, x.rollback_version,
           x.last_recovery_s, x.plan_batches, x.stage_compute_s, x.stage_wait_s,
           x.stage_send_s, x.schedule);
}

/// What a training job adds: epochs and batches, the rate, the lineage.
struct training_status {
  int64_t epoch = 0;
  int64_t epochs = 0;
  int64_t batch = 0; ///< batches committed in this epoch
  int64_t batches = 0;
  int64_t committed = 0; ///< batches committed in the whole job
  double samples_per_s = 0;
  double recent_samples_per_s = 0; ///< over the last few seconds of batches
  int64_t redone_batches = 0;      ///< committed work rolled back, summed
  /// The batch ids in the lineage of the current weights, in order.
  std::vector<uint64_t> lineage;
  int64_t replicated_version = -1; ///< newest version forced by `replicate`
  /// False once a fast-policy recovery kept survivors' newer weights: the
  /// lineage then holds for the surviving layers only.
  bool exact = true;
  int64_t missed_layer_updates = 0; ///< fast policy: (layer, batch) updates lost
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, training_status& x) {
  return f(caf::meta::type_name("training_status"), x.epoch, x.epochs, x.batch, x.batches,
           x.committed, x.samples_per_s, x.recent_samples_per_s, x.redone_batches,
           x.lineage, x.replicated_version, x.exact, x.missed_layer_updates);
}

/// What a serving job adds: requests, the queue, latencies.
/// Micro-batches of one size answered, and their time in the pipeline
/// (Triton's batch statistics).
struct batch_size_stat {
  int64_t rows = 0;
  int64_t count = 0;
  int64_t infer_ns = 0; ///< put together -> answered, summed
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, batch_size_stat& x) {
  return f(caf::meta::type_name("batch_size_stat"), x.rows, x.count, x.infer_ns);
}

struct serving_status {
  int64_t requests = 0;        ///< answered
  int64_t failed_requests = 0; ///< answered with an error (timeout, bad input)
  int64_t rejected = 0;        ///< refused: the queue was full
  double requests_per_s = 0;   ///< answered over the last few seconds
  int64_t queue_depth = 0;     ///< requests accepted and not yet sent on
  int64_t in_flight = 0;       ///< micro-batches in the pipeline
  double latency_p50_s = 0;    ///< accepted -> answered, recent requests
  double latency_p95_s = 0;
  double latency_p99_s = 0;
  int64_t resent = 0;     ///< micro-batches sent again after a failure
  int64_t duplicates = 0; ///< answers dropped: that micro-batch was answered
  // Cumulative, for Triton's statistics: what `requests` took.
  int64_t rows = 0;       ///< rows answered (Triton's inference_count)
  int64_t executions = 0; ///< micro-batches answered (Triton's execution_count)
  int64_t queue_ns = 0;   ///< accepted -> first rows in a micro-batch, summed
  int64_t infer_ns = 0;   ///< first rows in a micro-batch -> answered, summed
  int64_t last_answer_ms = 0; ///< when the last request was answered (Unix ms; 0: none)
  std::vector<batch_size_stat> batches; ///< by rows, ascending
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, serving_status& x) {
  return f(caf::meta::type_name("serving_status"), x.requests, x.failed_requests,
           x.rejected, x.requests_per_s, x.queue_depth, x.in_flight, x.latency_p50_s,
           x.latency_p95_s, x.latency_p99_s, x.resent, x.duplicates, x.rows, x.executions,
           x.queue_ns, x.infer_ns, x.last_answer_ms, x.batches);
}

/// What a round job (federated, split) adds: rounds and clients, and for
/// split learning what crossed the cut.
struct round_status {
  std::string strategy;        ///< federated: the strategy; split: the method
  int64_t round = 0;           ///< rounds aggregated (fedbuff: server steps)
  int64_t total = 0;           ///< rounds to run
  int64_t clients = 0;         ///< clients alive
  int64_t contributed = 0;     ///< clients whose update the last round took
  int64_t dropped_updates = 0; ///< late or failed updates, summed
  double round_s = 0;          ///< the last round's wall time
  double pace_s = 0;           ///< the round time the strategy aims at
  /// split: activations, labels, gradients, client-side weights so far
  int64_t bytes_up = 0;
  int64_t bytes_down = 0;
  double client_flops = 0;
  double server_flops = 0;
  adasplit_phase split_phase = adasplit_phase::none;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, round_status& x) {
  return f(caf::meta::type_name("round_status"), x.strategy, x.round, x.total, x.clients,
           x.contributed, x.dropped_updates, x.round_s, x.pace_s, x.bytes_up,
           x.bytes_down, x.client_flops, x.server_flops, x.split_phase);
}

/// A job supervisor's answer to a status request (console, progress line,
/// HTTP health, tests): the part every mode fills the same way, which
/// consoles, metrics and plots read alike, then the part of its mode
/// (`mode` says which; the others stay at their defaults).
struct job_status {
  status_phase phase = status_phase::starting;
  job_mode mode = job_mode::train;
  double elapsed_s = 0;
  /// Wall time spent training (no start-up, no evaluation); serving: 0.
  double train_s = 0;
  double loss = 0;
  double test_accuracy = -1; ///< after the last evaluation (round), -1 before
  /// What runs where: "node1[0,2) node2[2,4)"; round jobs: who took part.
  std::string plan;
  std::string error;
  bool paused_by_user = false; ///< console `pause`; `resume` ends it
  std::string health = "ok";   ///< ok, or what is wrong (for progress lines)
  std::string metrics_path;    ///< the JSON-lines log, "" if none
  /// Why the job was stopped before its last batch (SIGINT, SIGTERM, the
  /// console, "the pause timeout"), "" if it was not. A stopped job ends
  /// `finished` at a flush; one that gave up waiting for nodes ends
  /// `failed`, with the newest complete weights it kept to fetch.
  std::string stopped;
  std::vector<std::string> dead_nodes;
  std::vector<node_row> nodes;
  std::vector<stage_row> stages;
  // ---- the mode's part
  pipeline_status pipeline; ///< train and serve
  training_status training; ///< train
  serving_status serving;   ///< serve
  round_status rounds;      ///< federate and split
  bool finished() const {
    return phase == status_phase::finished || phase == status_phase::failed;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_status& x) {
  return f(caf::meta::type_name("job_status"), x.phase, x.mode, x.elapsed_s, x.train_s,
           x.loss, x.test_accuracy, x.plan, x.error, x.paused_by_user, x.health,
           x.metrics_path, x.stopped, x.dead_nodes, x.nodes, x.stages, x.pipeline,
           x.training, x.serving, x.rounds);
}

} // namespace salamander
