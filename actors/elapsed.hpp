// Seconds since a point of the steady clock: what jobs and clients time
// (rounds, batches, evaluations, pauses).
#pragma once

#include <chrono>

namespace salamander::actors {

inline double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

} // namespace salamander::actors
