// A recovery round: short-lived, one per failure (DESIGN.md, "Recovery",
// steps 3 and 5). The training job freezes the surviving stages and spawns
// a round with every place that may hold a copy of some layer: the central
// holder, the replica holder of every live node, the surviving stages (their
// kept snapshots). The round asks each for its inventory with a bounded
// timeout (a source that does not answer is left out, never waited on
// beyond it), then decides with the pure functions of
// algorithms/recovery.hpp:
//
//   exact: the newest version every layer has somewhere alive; the job
//          rolls back to it and replays the batches after it.
//   fast:  survivors keep their weights, lost layers come back at their
//          newest replica; if some lost layer has no copy at all, the
//          round falls back to exact and says why.
//
// It answers `recover` with the decision as data. A newer failure
// supersedes a round: the job kills it and starts another.
#pragma once

#include "algorithms/recovery.hpp"
#include "messages/interfaces.hpp"

#include <chrono>
#include <vector>

namespace salamander::actors {

struct recovery_request {
  std::vector<recovery_source_info> sources; ///< inventories still empty
  size_t layers = 0;
  uint64_t committed = 0; ///< batches committed when the failure hit
  bool fast = false;      ///< the job's policy is fast (and something was trained)
  std::chrono::milliseconds stage_timeout{2000};
  std::chrono::milliseconds holder_timeout{5000};
};

struct recovery_round_state {
  static inline const char* name = "recovery_round";
  recovery_request request;
  std::vector<recovery_source_info> found;
  size_t pending = 0;
  uint32_t unanswered = 0;
  std::vector<caf::typed_response_promise<recovery_decision>> waiting;
  bool decided = false;
  recovery_decision decision;
};

recovery_round_actor::behavior_type
recovery_round(recovery_round_actor::stateful_pointer<recovery_round_state> self,
               recovery_request request);

/// What was found, as the pure recovery functions take it.
std::vector<algorithms::recovery_source>
as_recovery_sources(const std::vector<recovery_source_info>& found);

/// The pure decision on what was found (exposed for tests).
recovery_decision decide_recovery(const recovery_request& request,
                                  const std::vector<recovery_source_info>& found);

} // namespace salamander::actors
