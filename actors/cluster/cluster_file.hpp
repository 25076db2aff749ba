// Finding the nodes of a job: connecting to the nodes a cluster file names
// (read by cluster_toml.hpp), or spawning local nodes for the embedded mode.
// Stage i runs on the i-th node listed.
#pragma once

#include "actors/cluster/cluster_toml.hpp"
#include "actors/node/node.hpp"

#include <caf/expected.hpp>

#include <string>
#include <vector>

namespace salamander::actors {

/// A node the cluster supervisor starts with: connected (or spawned in
/// this process) and named.
struct remote_node {
  std::string name;
  node_actor handle;
  /// Where it listens, for its pipeline neighbours ("" / 0: not reachable
  /// that way, e.g. in the supervisor's process).
  std::string host = "";
  uint16_t port = 0;
};

/// Connects to every node; the error names the first node that could not be
/// reached and its address.
caf::expected<std::vector<remote_node>> connect_nodes(caf::actor_system& sys,
                                                      const std::vector<cluster_node>& nodes);

/// Spawns `n` node actors in this process (the embedded mode). With
/// `emulation` (one per node), each node emulates a device by compute-time
/// dilation (cgroups are per process, so in-process nodes never use them).
std::vector<remote_node> local_nodes(caf::actor_system& sys, int n, int32_t threads,
                                     const std::vector<emulation_config>& emulation = {},
                                     std::vector<std::shared_ptr<cpu_limiter>>* limiters = nullptr);

} // namespace salamander::actors
