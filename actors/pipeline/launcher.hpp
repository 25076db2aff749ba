// A launcher: short-lived, one per plan the training job starts (the first
// plan, a re-plan, a recovery). It
//
//   1. asks each pair of pipeline neighbours on different nodes to connect
//      (the node listed first dials the other), so that tensors between
//      their stages go node to node, not through the supervisor's process;
//      a pair that cannot connect still works, relayed;
//   2. asks every stage's node to spawn it;
//   3. answers `launch` with the stages in plan order and the pairs that
//      connected, or with the stage that could not start and why (the
//      stages it did start are stopped): the job decides what that means.
//
// It does not monitor or wire the stages; the job does, once it has them.
#pragma once

#include "messages/interfaces.hpp"

#include <chrono>
#include <vector>

namespace salamander::actors {

struct launch_dial {
  size_t a = 0, b = 0; ///< node indices (a dials b)
  node_actor from;
  std::string host;
  uint16_t port = 0;
};

struct launch_order {
  std::vector<stage_spec> specs;
  std::vector<node_actor> nodes; ///< per stage: where it runs
  std::vector<std::string> node_names;
  std::vector<launch_dial> dials;
  std::chrono::milliseconds dial_timeout{6000};
  std::chrono::milliseconds spawn_timeout{10000};
};

struct launcher_state {
  static inline const char* name = "launcher";
  launch_order order;
  size_t dials_pending = 0;
  size_t spawns_pending = 0;
  launch_result result;
  bool done = false;
  std::vector<caf::typed_response_promise<launch_result>> waiting;
};

launcher_actor::behavior_type
launcher(launcher_actor::stateful_pointer<launcher_state> self, launch_order order);

} // namespace salamander::actors
