// The replication protocol's data: what a replica holder (or a stage's kept
// snapshots) holds, and what a recovery round found and decided.
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace salamander {

/// What a replica holder holds: (layer, version) pairs.
struct replica_inventory {
  std::vector<uint64_t> layers;
  std::vector<uint64_t> versions;
};

/// One place a recovery round asked (actors/replication/recovery_round.hpp)
/// and what it answered: a replica holder, or a surviving stage.
struct recovery_source_info {
  caf::actor handle;
  uint64_t node = ~uint64_t{0}; ///< node index; ~0: not known (an older plan's stage)
  bool central = false;         ///< the central holder beside the supervisor
  bool stage = false;           ///< a surviving stage
  uint64_t begin = 0, end = 0;  ///< a stage of the failed plan: the layers it ran
  replica_inventory inventory;  ///< empty when it did not answer in time
};

/// What a recovery round decided, as data: the policy used, the rollback
/// version (exact) or the source of every layer (fast), and the sources
/// that answered, which the job assigns to the new stages.
struct recovery_decision {
  bool fast = false;
  std::string fallback; ///< why the fast policy fell back to exact ("" : it did not)
  uint64_t version = 0; ///< exact: roll back to this version (0: the seed)
  std::vector<recovery_source_info> sources;
  /// fast: layer l comes from sources[pick_source[l]] at pick_version[l]
  /// (current_version: its weights as they are now)
  std::vector<uint64_t> pick_source;
  std::vector<uint64_t> pick_version;
  /// Sources that did not answer in time (a stage or holder of a node
  /// already known dead is never asked).
  uint32_t unanswered = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_inventory& x) {
  return f(caf::meta::type_name("replica_inventory"), x.layers, x.versions);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recovery_source_info& x) {
  return f(caf::meta::type_name("recovery_source_info"), x.handle, x.node, x.central,
           x.stage, x.begin, x.end, x.inventory);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recovery_decision& x) {
  return f(caf::meta::type_name("recovery_decision"), x.fast, x.fallback, x.version,
           x.sources, x.pick_source, x.pick_version, x.unanswered);
}

} // namespace salamander
