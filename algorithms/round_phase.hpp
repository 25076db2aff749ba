// The phases of a job that runs rounds over clients (federated, split
// learning) and the one function that moves between them. The job core
// (actors/job/round_job.hpp) keeps the phase, feeds it events and does
// what the new phase asks; what is allowed where is this table, tested row
// by row in tests/unit/job_phase_test.cpp.
//
//   starting --enlist--> enlisting --settled--> training <--client_back-- waiting
//                        (spawn and profile     |  --no_client-->
//                         every client)         '-- rounds: out -> in -> aggregate
//   (any phase but the ends) --finish--> finished;  --fail--> failed
//
// `enlisting` is what the federated job shows as "profiling" (its clients
// are timed before the first round) and the split job as "spawning".
#pragma once

#include <optional>
#include <string>

namespace salamander::algorithms {

enum class round_phase {
  starting,  ///< checking the configuration, admitting nodes
  enlisting, ///< the first clients are spawned (and profiled)
  training,  ///< rounds run
  waiting,   ///< no client can train now: the next tick tries again
  finished,
  failed,
};

enum class round_event {
  enlist,      ///< the nodes are known: spawn the first clients
  settled,     ///< every first client is ready, failed or gone
  no_client,   ///< a round could not start: no client is available
  client_back, ///< a round started again
  finish,      ///< the last round, the time budget or a stop
  fail,        ///< the job cannot go on
};

/// The phase after `e` in phase `p`; nullopt when `e` does not apply there.
std::optional<round_phase> next_phase(round_phase p, round_event e);

/// How the status shows a phase; `enlisting` is the mode's own word for it
/// ("profiling" for federated, "spawning" for split).
std::string to_string(round_phase p, const char* enlisting = "enlisting");
std::string to_string(round_event e);

/// Finished or failed: nothing moves on from there.
inline bool is_over(round_phase p) {
  return p == round_phase::finished || p == round_phase::failed;
}

/// Rounds may start (training, or waiting for a client to train).
inline bool runs_rounds(round_phase p) {
  return p == round_phase::training || p == round_phase::waiting;
}

} // namespace salamander::algorithms
