// The phases of a serving job (EdgePipe mode) and the one function that
// moves between them. The serving job (actors/serve/serve_job.hpp) keeps
// the phase, feeds it events and does what the new phase asks; the table is
// tested row by row in tests/unit/job_phase_test.cpp.
//
//   starting --profile--> profiling --launched--> serving
//      '--------------launched-----------------------^  |  ^
//                                          failure |  | launched
//                                                  v  |
//                                   recovering --no_plan--> waiting
//   (a pipeline that cannot be planned or launched waits for a node)
//   (any phase but the ends) --finish--> finished;  --fail--> failed
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace salamander::algorithms {

enum class serve_phase {
  starting,   ///< admitting nodes
  profiling,  ///< profilers measure the model on every node for the first plan
  serving,    ///< a pipeline answers requests
  recovering, ///< the pipeline broke: re-planning over the survivors, re-sending
  waiting,    ///< no pipeline can run now: requests queue, a join is awaited
  finished,
  failed,
};

enum class serve_event {
  profile,  ///< the first plan needs profiles
  launched, ///< a pipeline's stages are up: it serves
  failure,  ///< a stage or node of the serving pipeline was lost
  no_plan,  ///< no pipeline can be planned or launched now
  finish,   ///< stopped
  fail,     ///< the service cannot go on
};

/// The phase after `e` in phase `p`; nullopt when `e` does not apply there.
std::optional<serve_phase> next_phase(serve_phase p, serve_event e);

std::string to_string(serve_phase p);
std::string to_string(serve_event e);

inline bool is_over(serve_phase p) {
  return p == serve_phase::finished || p == serve_phase::failed;
}

/// What dynamic batching looks at when the queue holds rows that do not fill
/// a micro-batch.
struct batching_view {
  bool batching = true;         ///< off: every request is its own micro-batch
  int64_t waiting_rows = 0;     ///< rows queued, not yet in a micro-batch
  int64_t max_batch = 1;        ///< rows per micro-batch at most
  bool before_deadline = false; ///< the oldest request may still wait (batch delay)
  bool stopping = false;        ///< the service is stopping: send what there is
  size_t in_flight = 0;         ///< micro-batches in the pipeline
};

/// Adaptive batching: the queued rows wait for more only while the pipeline
/// is busy (a micro-batch in flight), the batch is not full and the oldest
/// request's delay has not run out. A request that finds the pipeline idle
/// goes at once: waiting would cost it the delay and gain nothing, since
/// nothing else would go meanwhile.
inline bool hold_for_more_rows(const batching_view& v) {
  return v.batching && v.waiting_rows < v.max_batch && v.before_deadline && !v.stopping &&
         v.in_flight > 0;
}

} // namespace salamander::algorithms
