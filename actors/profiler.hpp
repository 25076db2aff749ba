// The profiler actor: what this device can do for the current model.
//
// FTPipeHD re-partitions from real-time capacities; the planner needs
// per-layer forward and backward time on every device, its memory and its
// link. The profiler measures the first by running each layer of the model
// on a random micro-batch (one warm-up, then the median of five runs, each
// dilated by the emulated CPU share when emulation dilates), and reports the
// others from the device (MemAvailable) or its emulation settings. Capacity
// that drifts while training (throttling, other apps) is tracked by the
// supervisor from the stages' measured times against this profile.
#pragma once

#include "actors/emulation.hpp"
#include "messages/interfaces.hpp"

namespace salamander::actors {

struct profiler_state {
  static inline const char* name = "profiler";
  std::string node;
  node_emulation emulation;
};

/// Spawn detached: measuring blocks for a while.
profiler_actor::behavior_type profiler(profiler_actor::stateful_pointer<profiler_state> self,
                                       std::string node, node_emulation emulation);

/// Bytes of memory available on this machine (MemAvailable), 0 if unknown.
double memory_available();

} // namespace salamander::actors
