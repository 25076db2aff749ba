// What every pipelined job (training, serving) keeps of its nodes and plans:
// the cluster's members as the job sees them, and which nodes run which
// layers.
#pragma once

#include "algorithms/schedule.hpp"
#include "messages/interfaces.hpp"

#include <vector>

namespace salamander::actors {

/// One node as the job sees it (indices are the cluster's).
struct job_node {
  std::string name;
  node_actor handle;
  std::string host;
  uint16_t port = 0;
  node_info info;
  replica_holder_actor holder;
  bool dead = false;
  bool refused = false; ///< failed the cluster's admission: never used
};

/// Which nodes run which layers: one plan.
struct stage_plan {
  algorithms::layer_ranges ranges;
  std::vector<size_t> nodes; ///< node index of each stage
  /// Data parallelism: stage i runs split[i] micro-batches of each batch
  /// (every stage holds every layer); empty for a pipeline.
  std::vector<int> split;
  bool operator==(const stage_plan& o) const {
    return ranges == o.ranges && nodes == o.nodes && split == o.split;
  }
};

/// Layers per stage: "1,1,2" -> {1, 1, 2}; "" -> {}. Throws
/// std::invalid_argument.
std::vector<size_t> parse_balance(const std::string& text);

/// The job's view of a cluster member (what submit and join hand it).
job_node node_of(const cluster_member& m);

} // namespace salamander::actors
