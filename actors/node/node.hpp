// The node actor: one per device process (`salamander node`), or several in
// one process for the embedded mode.
//
// It answers hello with who it is (name, protocol, threads), checks every
// stage it is asked to run against its own build of the model zoo (a node
// built from other sources describes the model differently and is refused
// by fingerprint), spawns the stage locally and hands back its handle.
// leave stops every stage it runs: SIGTERM on a node process ends in leave.
// Until a supervisor proves the cluster secret (auth), it refuses to spawn,
// profile, slow down or kill itself.
#pragma once

#include "actors/node/emulation.hpp"
#include "messages/interfaces.hpp"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace salamander::actors {

struct node_config {
  std::string name;
  std::string host;
  int32_t threads = 1;
  node_emulation emulation;
  /// The cluster secret ("" : none, an open cluster; see actors/auth.hpp).
  std::string secret;
  /// The port it listens on, once published (hello reports it).
  std::shared_ptr<std::atomic<uint16_t>> port;
  /// The profiler runs on its own thread, so that its measurements do not
  /// wait behind stages. Deterministic tests (CAF's test coordinator, one
  /// thread for every actor) turn it off.
  bool detached_profiler = true;
  /// `node --data DIR`: federated clients here train on this node's own
  /// data (the training split in DIR) instead of a shard of the experiment's.
  std::string data_dir;
};

struct node_state {
  static inline const char* name = "node";
  node_config config;
  std::vector<caf::actor> stages; ///< and federated clients
  profiler_actor profiler;
  replica_holder_actor holder;
  /// A supervisor proved the cluster secret (in-process nodes: always).
  bool authenticated = false;
  std::string challenge; ///< the last one this node gave a supervisor
};

/// Why `spec` cannot run here, or "" when it can. `memory_cap` (bytes, 0:
/// none) is the node's emulated memory.
std::string check_stage_spec(const stage_spec& spec, double memory_cap = 0);

node_actor::behavior_type node(node_actor::stateful_pointer<node_state> self, node_config cfg);

} // namespace salamander::actors
