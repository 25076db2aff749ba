// The behaviour of a job that has ended, the same in every mode. A job that
// finishes or fails switches to it with `become` (as CAF's
// distributed_calculator example switches between connected and
// unconnected), so no handler of a running job asks whether the job has
// ended:
//
//   get                     the status as the job ended
//   events                  the timeline up to the end
//   snapshot                the final weights (the mode's)
//   leave                   the mode stops its workers, and the job quits
//   pause, resume, stop, checkpoint, join, kill, replan, replicate
//                           refused: errc::job_ended, naming the job
//   lost, capacity, event, tick
//                           dropped: nothing is left to recover or plan
//   the mode's own messages (its workers', its timers')
//                           dropped, or answered as the mode says (`extra`)
//
// Answers to requests sent while the job ran still arrive (CAF keeps them
// beside the behaviour): the callbacks that handle them check `over()`.
#pragma once

#include "actors/job/event_ring.hpp"
#include "messages/errors.hpp"
#include "messages/interfaces.hpp"

#include <caf/all.hpp>

#include <functional>
#include <memory>
#include <string>

namespace salamander::actors {

/// What a mode says of itself once it has ended.
struct ended_job {
  /// "the job", "the serving job": in every refusal.
  std::string what;
  /// The hint a refused `checkpoint` adds ("" for none).
  std::string checkpoint_hint;
  std::function<job_status()> status;
  std::function<caf::result<snapshot_payload>()> snapshot;
  /// Stops the mode's workers (the behaviour quits the job after).
  std::function<void()> leave;
  /// The job core's timeline (null: none kept).
  std::shared_ptr<const event_ring> events;
};

/// A handler that drops a message of the types `Ts` (a worker's report, a
/// timer's tick that came after the end).
template <class... Ts> auto drop() {
  return [](const Ts&...) {};
}

/// The ended behaviour of a job whose actor is `self`: the job interface
/// and the console's commands every job takes, then the mode's own
/// messages (`extra`, usually `drop<...>()`).
template <class Self, class... Extra>
typename Self::behavior_type ended_behavior(Self* self, ended_job job, Extra... extra) {
  auto refused = [what = job.what] {
    return caf::make_error(errc::job_ended, what + " has ended");
  };
  auto checkpoint_refused = [what = job.what, hint = job.checkpoint_hint] {
    return caf::make_error(errc::job_ended,
                           what + " has ended" + (hint.empty() ? "" : "; " + hint));
  };
  return {
      [status = job.status](caf::get_atom) { return status(); },
      [events = job.events](events_atom, uint64_t since) {
        return events ? events->since(since) : std::vector<std::string>{};
      },
      [snapshot = job.snapshot](snapshot_atom) { return snapshot(); },
      [self, leave = job.leave](leave_atom) {
        leave();
        self->quit();
      },
      [refused](pause_atom) -> caf::result<std::string> { return refused(); },
      [refused](resume_atom) -> caf::result<std::string> { return refused(); },
      [refused](stop_atom, const std::string&) -> caf::result<std::string> {
        return refused();
      },
      [checkpoint_refused](checkpoint_atom, const std::string&) -> caf::result<std::string> {
        return checkpoint_refused();
      },
      [refused](join_atom, uint32_t, const cluster_member&) -> caf::result<std::string> {
        return refused();
      },
      [refused](kill_atom, uint32_t) -> caf::result<std::string> { return refused(); },
      [refused](replan_atom, const std::string&) -> caf::result<std::string> {
        return refused();
      },
      [refused](replicate_atom) -> caf::result<std::string> { return refused(); },
      drop<lost_atom, uint32_t, std::string>(),
      drop<capacity_atom, std::string, double>(),
      drop<event_atom, std::string, std::string>(),
      drop<tick_atom>(),
      std::move(extra)...,
  };
}

} // namespace salamander::actors
