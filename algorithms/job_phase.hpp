// The phases of a training job and the one function that moves between
// them. The job supervisor (actors/train/train_job.hpp) keeps a phase, feeds
// it events, and does what the new phase asks; what is allowed where is
// this table, tested line by line in tests/unit/job_phase_test.cpp.
//
//   starting --profile--> profiling --launched--> training <--resume-- paused
//      |                                             |  ^  --pause-->
//      '----------------launched---------------------'  |
//   training --epoch_end--> evaluating --evaluated--> training
//   training --replan--> replanning --replanned--> training
//   training --checkpoint--> checkpointing --checkpointed--> training
//   (any running phase) --failure--> recovering --recovered--> training
//   recovering --no_capacity--> waiting --joined--> recovering
//   (any running phase) --finish--> finished;  (any but the ends) --fail--> failed
//
// A console pause is an intent, not only a phase: after an evaluation, a
// re-plan, a checkpoint or a recovery the job goes back to `training` and,
// if the user had paused it, on to `paused` (train_job applies both).
#pragma once

#include <optional>
#include <string>

namespace salamander::algorithms {

enum class job_phase {
  starting,      ///< admitting nodes, choosing the first plan
  profiling,     ///< profilers measure the model on every node
  training,      ///< feeding batches
  paused,        ///< the console paused it: in-flight batches finish, none start
  evaluating,    ///< the test set streams through the stages
  replanning,    ///< at a flush: new stages pull their layers, old ones stop
  checkpointing, ///< at a flush: every stage hands its weights over
  recovering,    ///< a stage or node was lost: rollback, re-plan, pull, resume
  waiting,       ///< too little capacity survived: keeps replicas, waits for a node
  finished,
  failed,
};

enum class job_event {
  profile,      ///< the plan needs profiles first
  launched,     ///< the first plan's stages are up
  epoch_end,    ///< an epoch's last batch committed, evaluation follows
  evaluated,    ///< the evaluation's last chunk came back
  replan,       ///< at a flush, a re-plan starts
  replanned,    ///< the new plan's stages pulled their state
  checkpoint,   ///< at a flush, a checkpoint starts
  checkpointed, ///< the checkpoint was written (or failed: the job goes on)
  pause,        ///< console
  resume,       ///< console
  failure,      ///< a stage or node of the job was lost
  recovered,    ///< the recovery plan's stages pulled their state
  no_capacity,  ///< the survivors cannot hold the model
  joined,       ///< a node joined while waiting: recover onto it
  finish,       ///< the last epoch is done
  fail,         ///< the job cannot go on
};

/// The phase after `e` in phase `p`; nullopt when `e` does not apply there
/// (the job ignores it, e.g. a late evaluation chunk after a failure).
std::optional<job_phase> next_phase(job_phase p, job_event e);

/// How the status shows a phase: `waiting` is "paused" (the console and
/// progress line have always said so), `checkpointing` is "training".
std::string to_string(job_phase p);
std::string to_string(job_event e);

/// The phase a status text names (what to_string wrote: "paused" reads back
/// as paused, "training" as training); nullopt for any other text.
std::optional<job_phase> job_phase_from_text(const std::string& text);

/// Finished or failed: nothing moves on from there.
inline bool is_over(job_phase p) {
  return p == job_phase::finished || p == job_phase::failed;
}

/// Stages run and may fail: a failure starts a recovery (before, it fails
/// the job, which names the node).
bool is_running(job_phase p);

} // namespace salamander::algorithms
