// What every pipelined job (training, serving) keeps of its nodes and plans:
// the cluster's members as the job sees them, and which nodes run which
// layers.
#pragma once

#include "algorithms/schedule.hpp"
#include "messages/interfaces.hpp"

#include <set>
#include <tuple>
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

/// A node as the console's `nodes` shows it, from what the job keeps: name,
/// health (ok, dead, refused), role ("stage i" for the first `staged` of
/// `plan_nodes`, else spare), emulation, CPU share, memory and the link rate
/// it reported. Speeds, measured links and heartbeats are for the caller
/// (and the cluster supervisor) to add.
node_row basic_row(const job_node& node, size_t n, const std::vector<size_t>& plan_nodes,
                   size_t staged);

/// Layers per stage: "1,1,2" -> {1, 1, 2}; "" -> {}. Throws
/// std::invalid_argument.
std::vector<size_t> parse_balance(const std::string& text);

/// The job's view of a cluster member (what submit and join hand it).
job_node node_of(const cluster_member& m);

/// A member that joined at cluster index `n`: one beyond the table is new
/// (appended), one within it is back (its entry replaced, its name taken
/// off `dead_names`); an index further out is unknown (nothing changes).
enum class joined { new_node, back, unknown };
joined take_joined(std::vector<job_node>& nodes, std::vector<std::string>& dead_names,
                   uint32_t n, const cluster_member& m);

/// take_joined for a job's console answer: an unknown index is an error
/// naming it (nothing changes).
caf::expected<joined> accept_joined(std::vector<job_node>& nodes,
                                    std::vector<std::string>& dead_names, uint32_t n,
                                    const cluster_member& m);

/// The node pairs a launcher connected directly (flattened lower, higher)
/// join `peered`; for each pair it was to dial: (from, to, connected).
std::vector<std::tuple<std::string, std::string, bool>>
record_dials(std::set<std::pair<size_t, size_t>>& peered,
             const std::vector<uint64_t>& flat,
             const std::vector<std::pair<size_t, size_t>>& dials,
             const std::vector<job_node>& nodes);

} // namespace salamander::actors
