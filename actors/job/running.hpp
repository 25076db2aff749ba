// The behaviour of a job that runs, the part that is the same in every mode:
// the job interface the console and the cluster supervisor talk to, written
// once. The mode supplies what differs as hooks (the way Flower's server
// drives a strategy) and adds its own workers' and timers' messages:
//
//   the lifecycle (here)                  the mode's hooks (job_hooks)
//   ----------------------------------    ------------------------------------
//   get                                   status()
//   events since N: the core's timeline   -
//   pause: the core takes the console's   paused(): what pausing does, its
//     pause, or says "already paused"       answer
//   resume: the core lifts it, or says    resumed(); not_paused() (a mode may
//     it was not paused                     say more than "not paused")
//   stop: the core keeps the first        stopping(): how the job ends
//     reason, or says it is stopping
//   checkpoint PATH: refused without      checkpoint(path)
//     a path
//   lost / join of a node                 node_lost(n, why) / node_joined(n, m)
//   capacity of a node                    capacity(name, factor), or ignored
//   event (a worker's, the cluster's):    -
//     into the metrics log
//   leave: the job quits                  leave(): stops the workers first
//
// A job switches between this behaviour (with the mode's messages for each
// phase group, e.g. training's `running` and `recovering`) and the ended one
// (actors/job/ended.hpp) with `become`.
#pragma once

#include "actors/job/job_core.hpp"
#include "messages/errors.hpp"
#include "messages/interfaces.hpp"

#include <caf/all.hpp>

#include <functional>
#include <string>

namespace salamander::actors {

/// What a mode does at each word of the job interface while its job runs.
struct job_hooks {
  std::function<job_status()> status;
  /// The console paused the job (the core took it): what that does, and
  /// the answer.
  std::function<caf::result<std::string>()> paused;
  /// The console resumed a job it had paused.
  std::function<caf::result<std::string>()> resumed;
  /// The answer to a resume when the console had not paused the job (null:
  /// "not paused").
  std::function<std::string()> not_paused;
  /// The console, SIGINT or SIGTERM asked the job to stop (the core kept
  /// the reason in `stop_requested`): how it ends, and the answer.
  std::function<caf::result<std::string>()> stopping;
  /// Save a checkpoint at `path` (never empty: the lifecycle refused that).
  std::function<caf::result<std::string>(const std::string& path)> checkpoint;
  std::function<void(uint32_t node, const std::string& why)> node_lost;
  std::function<caf::result<std::string>(uint32_t node, const cluster_member& m)>
      node_joined;
  /// A profiler's capacity report (null: the mode's own timings decide).
  std::function<void(const std::string& name, double factor)> capacity;
  /// Stops the mode's workers (the job quits after).
  std::function<void()> leave;
};

/// The hooks as free functions of a job's self pointer (`Self`): how the
/// training and serving jobs, whose handlers take `self`, name theirs.
template <class Self> struct hook_functions {
  job_status (*status)(Self);
  caf::result<std::string> (*paused)(Self);
  caf::result<std::string> (*resumed)(Self);
  caf::result<std::string> (*stopping)(Self);
  caf::result<std::string> (*checkpoint)(Self, const std::string&);
  void (*node_lost)(Self, uint32_t, const std::string&);
  caf::result<std::string> (*node_joined)(Self, uint32_t, const cluster_member&);
  void (*capacity)(Self, const std::string&, double);
  void (*leave)(Self);
};

/// `f`'s functions bound to `self` (not_paused stays null: "not paused").
template <class Self> job_hooks bind_hooks(Self self, const hook_functions<Self>& f) {
  job_hooks h;
  h.status = [self, g = f.status] { return g(self); };
  h.paused = [self, g = f.paused] { return g(self); };
  h.resumed = [self, g = f.resumed] { return g(self); };
  h.stopping = [self, g = f.stopping] { return g(self); };
  h.checkpoint = [self, g = f.checkpoint](const std::string& path) { return g(self, path); };
  h.node_lost = [self, g = f.node_lost](uint32_t n, const std::string& why) {
    g(self, n, why);
  };
  h.node_joined = [self, g = f.node_joined](uint32_t n, const cluster_member& m) {
    return g(self, n, m);
  };
  h.capacity = [self, g = f.capacity](const std::string& name, double factor) {
    g(self, name, factor);
  };
  h.leave = [self, g = f.leave] { g(self); };
  return h;
}

/// The console's words as every mode takes them: the core's part (the
/// pause, the stop's reason, a path), then the mode's hook. The running
/// behaviour calls these; tests of a core call them too.
namespace lifecycle {
caf::result<std::string> pause(job_core& core, const job_hooks& hooks);
caf::result<std::string> resume(job_core& core, const job_hooks& hooks);
caf::result<std::string> stop(job_core& core, const job_hooks& hooks, const std::string& why);
caf::result<std::string> checkpoint(const job_hooks& hooks, const std::string& path);
} // namespace lifecycle

/// The running behaviour of a job whose actor is `self` and whose state
/// derives from (or holds) `core`: the job interface through `hooks`, then
/// the mode's own messages (`extra`).
template <class Self, class... Extra>
typename Self::behavior_type running_behavior(Self* self, job_core& core, job_hooks hooks,
                                              Extra... extra) {
  auto h = std::make_shared<const job_hooks>(std::move(hooks));
  return {
      [h](caf::get_atom) { return h->status(); },
      [events = core.events](events_atom, uint64_t since) { return events->since(since); },
      [h, &core](pause_atom) { return lifecycle::pause(core, *h); },
      [h, &core](resume_atom) { return lifecycle::resume(core, *h); },
      [h, &core](stop_atom, const std::string& why) {
        return lifecycle::stop(core, *h, why);
      },
      [h](checkpoint_atom, const std::string& path) {
        return lifecycle::checkpoint(*h, path);
      },
      [h](lost_atom, uint32_t node, const std::string& why) { h->node_lost(node, why); },
      [h](join_atom, uint32_t node, const cluster_member& m) {
        return h->node_joined(node, m);
      },
      [h](capacity_atom, const std::string& name, double factor) {
        if (h->capacity) {
          h->capacity(name, factor);
        }
      },
      [&core](event_atom, const std::string& kind, const std::string& fields) {
        core.log_event(kind, nlohmann::json::parse(fields, nullptr, false));
      },
      [self, h](leave_atom) {
        h->leave();
        self->quit();
      },
      std::move(extra)...,
  };
}

} // namespace salamander::actors
