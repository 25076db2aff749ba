// One place that builds CAF's configuration for every salamander process:
// message types, the middleman, readable errors, heartbeats, threads.
#pragma once

#include <caf/actor_system_config.hpp>

#include <chrono>

namespace salamander::actors {

struct system_options {
  /// CAF scheduler threads (0: CAF's default of 4).
  size_t scheduler_threads = 2;
  /// Every process sends heartbeats so that a peer configured with a
  /// connection timeout does not declare it dead while idle.
  std::chrono::milliseconds heartbeat{1000};
  /// 0: never drop a silent connection (hung peers are found by the
  /// supervisor's own progress checks).
  std::chrono::milliseconds connection_timeout{0};
  /// Let BASP connect this process straight to peers it learns of through
  /// another. Off everywhere: in CAF 0.17.6 two nodes that learn of each
  /// other at once connect both ways, and a pipeline stalled for good that
  /// way in the process chaos test. Neighbours are connected explicitly
  /// instead, one side dialling (the supervisor's launch, node `peer`). CAF's helper for it is also a
  /// detached actor that waits up to 10 minutes for a peer that never
  /// answers, holding up the actor_system's destructor (run_node exits
  /// without it for that reason).
  bool automatic_connections = false;
  /// CAF's work-sharing scheduler instead of its default work stealing.
  /// A work-stealing worker polls its queue every 50 us for 25 ms after each
  /// job, which costs CPU that a weak device, or a CPU quota, needs for
  /// compute; letting it sleep at once instead (no polling) leaves a job
  /// that one worker queues for another actor waiting up to 10 ms for a
  /// steal while that worker computes. Work sharing has neither: one queue,
  /// every enqueue wakes an idle worker, idle workers sleep. Its one lock is
  /// no cost at the two to four threads a device runs. Off: CAF's default.
  bool calm_workers = true;
  /// Deterministic tests: CAF's test coordinator runs every actor on the
  /// test's thread, one message at a time, and time moves only when the
  /// test triggers a timeout. No middleman (nothing leaves the process).
  bool deterministic = false;
};

/// Fills `cfg`; call before constructing the actor_system.
void configure(caf::actor_system_config& cfg, const system_options& opts = {});

} // namespace salamander::actors
