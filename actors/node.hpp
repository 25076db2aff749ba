// The node actor: one per device process (`salamander node`), or several in
// one process for the embedded mode.
//
// It answers hello with who it is (name, protocol, threads), checks every
// stage it is asked to run against its own build of the model zoo (a node
// built from other sources describes the model differently and is refused
// by fingerprint), spawns the stage locally and hands back its handle.
// leave stops every stage it runs: SIGTERM on a node process ends in leave.
#pragma once

#include "messages/interfaces.hpp"

#include <string>
#include <vector>

namespace salamander::actors {

struct node_config {
  std::string name;
  std::string host;
  int32_t threads = 1;
};

struct node_state {
  static inline const char* name = "node";
  node_config config;
  std::vector<caf::actor> stages;
};

/// Why `spec` cannot run here, or "" when it can.
std::string check_stage_spec(const stage_spec& spec);

node_actor::behavior_type node(node_actor::stateful_pointer<node_state> self, node_config cfg);

} // namespace salamander::actors
