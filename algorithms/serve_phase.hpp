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

} // namespace salamander::algorithms
