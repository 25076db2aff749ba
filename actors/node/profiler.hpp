// The profiler actor: what this device can do for the current model.
//
// FTPipeHD re-partitions from real-time capacities; the planner needs
// per-layer forward and backward time on every device, its memory and its
// link. The profiler measures the first by running the model layer by layer
// on a random micro-batch, six passes (the first a warm-up), and takes for
// each layer its fastest pass (scaled by the emulated CPU share when
// emulation dilates); it reports the others from the device (MemAvailable)
// or its emulation settings, and the device's type (device_type below). It
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
  std::string device_type; ///< `node --device-type`; "": device_type(emulation)
  // capacity reports
  caf::actor supervisor;
  double baseline_s = 0;   ///< the compute probe at the start
  double last_sent = 1;    ///< the factor last reported
  std::chrono::steady_clock::time_point sent_at{};
  std::chrono::milliseconds period = tuning::capacity_period;
  bool ticking = false;
};

/// Spawn detached: measuring blocks for a while.
profiler_actor::behavior_type
profiler(profiler_actor::stateful_pointer<profiler_state> self, std::string node,
         node_emulation emulation, std::string device_type = {});

/// What makes two devices alike, when the user names no type: the
/// processor's model, the CPUs this process may run on, LibTorch's compute
/// threads and the emulation (its pinned CPUs left out: the same processor
/// on another core is the same device). Nodes of one type are planned from
/// one profile, so identical boards (or emulated devices of one share) get
/// identical plans instead of plans shaped by each one's measuring noise.
std::string device_type(const emulation_config& emulation);

/// Bytes of memory available on this machine (MemAvailable), 0 if unknown.
double memory_available();

} // namespace salamander::actors
