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
  /// An idle CAF worker sleeps on a condition variable at once instead of
  /// polling its queue every 50 us for a while first (CAF's "moderate"
  /// polling). The polling costs CPU that a weak device, or a CPU quota,
  /// needs for compute; messages from the network wake a sleeping worker
  /// straight away. Off: CAF's defaults.
  bool calm_workers = true;
};

/// Fills `cfg`; call before constructing the actor_system.
void configure(caf::actor_system_config& cfg, const system_options& opts = {});

} // namespace salamander::actors
