// The profiler actor: what this device can do for the current model.
//
// FTPipeHD re-partitions from real-time capacities; the planner needs
// per-layer forward and backward time on every device, its memory and its
// link. The profiler measures the first by running each layer of the model
// on a random micro-batch (one warm-up, then the median of five runs, each
// dilated by the emulated CPU share when emulation dilates), and reports the
// others from the device (MemAvailable) or its emulation settings. It
// measures the link to other nodes on request (probe: pings and 256 KB
// transfers to their profilers). While a job runs it samples a short fixed
// compute probe every period and tells the supervisor how its capacity
// compares with the start: every 30 s, and at once on a 20% drift. That
// probe counts thread CPU time (scaled by the emulated share), so it sees
// throttling and emulated slow-downs, not other processes competing for the
// cores: those show in the stages' measured times, which the supervisor
// tracks as well.
#pragma once

#include "actors/tuning.hpp"
#include "actors/node/emulation.hpp"
#include "messages/interfaces.hpp"

#include <chrono>

namespace salamander::actors {

struct profiler_state {
  static inline const char* name = "profiler";
  std::string node;
  node_emulation emulation;
  // capacity reports
  caf::actor supervisor;
  double baseline_s = 0;   ///< the compute probe at the start
  double last_sent = 1;    ///< the factor last reported
  std::chrono::steady_clock::time_point sent_at{};
  std::chrono::milliseconds period = tuning::capacity_period;
  bool ticking = false;
};

/// Spawn detached: measuring blocks for a while.
profiler_actor::behavior_type profiler(profiler_actor::stateful_pointer<profiler_state> self,
                                       std::string node, node_emulation emulation);

/// Bytes of memory available on this machine (MemAvailable), 0 if unknown.
double memory_available();

} // namespace salamander::actors
