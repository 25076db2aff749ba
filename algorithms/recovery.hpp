// Recovery and re-planning decisions as pure functions (DESIGN.md,
// "Recovery"): which version to roll back to, where each layer comes back
// from, what a new plan moves, where replicas go, which member of a
// data-parallel plan runs a micro-batch, which neighbours connect.
//
// The actors gather the inputs (inventories, plans) and act on the answers;
// nothing here knows of actors, clocks or logs. The exact rule follows
// FTPipeHD (Chen et al. 2021): every layer must come back at one version, so
// the newest version that every layer has on a live holder wins and the
// batches after it are replayed; the fast rule is FTPipeHD's own (survivors
// keep their weights, lost layers come back at their newest replica).
#pragma once

#include "algorithms/schedule.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace salamander::algorithms {

/// A version tag meaning "the weights as they are now" (fast policy).
constexpr uint64_t version_now = ~uint64_t{0};

/// Something recovery can pull layers from: a replica holder (on a node, or
/// the central one) or a surviving stage of the failed plan.
struct recovery_source {
  size_t node = 0;      ///< the node it lives on
  bool central = false; ///< the central (global) holder beside the supervisor
  bool stage = false;   ///< a surviving stage (its kept snapshots)
  /// A stage of the failed plan: the layers it ran (empty: none, e.g. a
  /// stage of an older plan, which serves only its kept snapshots).
  uint64_t begin = 0, end = 0;
  /// (layer, version) pairs it holds.
  std::vector<std::pair<uint64_t, uint64_t>> held;
};

/// Exact policy: the newest version at or below `committed` for which every
/// one of `layers` layers is held by some source; 0 (the seed, which needs
/// no copy) when there is none.
uint64_t rollback_version(const std::vector<recovery_source>& sources, size_t layers,
                          uint64_t committed);

/// Where one layer comes from: a source index and the version to pull
/// (`version_now`: the source's current weights).
struct layer_pick {
  size_t source = 0;
  uint64_t version = 0;
  bool operator==(const layer_pick& o) const {
    return source == o.source && version == o.version;
  }
};

/// Fast policy: per layer, a surviving stage that ran it (its current
/// weights), else the newest replica of it. `missing` names the first layer
/// with no copy at all (then only the exact policy can recover).
struct fast_choice {
  std::vector<layer_pick> picks;
  std::optional<uint64_t> missing;
};
fast_choice fast_sources(const std::vector<recovery_source>& sources, size_t layers);

/// Fast policy: (layer, batch) updates the lost layers miss, given what was
/// committed when the failure hit. A replica newer than `committed` (its
/// stage ran ahead) misses nothing.
int64_t missed_updates(const std::vector<layer_pick>& picks, uint64_t committed);

/// Exact policy: which source serves `layer` at `version` to a stage on
/// `node`: one on that node first (no bytes on the wire), then any other
/// node's holder or stage, then the central holder; the lowest index within
/// each rank. nullopt when none holds it.
std::optional<size_t> pick_source(const std::vector<recovery_source>& sources,
                                  uint64_t layer, uint64_t version, size_t node);

/// Exact policy, knowing the links: where each of layers [begin, end) comes
/// from, at `version`, for a stage on `node`, so that its pulls, which run
/// at once (one request per run of layers from a source), end soonest. A
/// copy on the stage's own node costs nothing and is always taken. Every
/// other layer goes, in order, to the source whose pulls would end soonest
/// with it: the bytes it serves so far plus the layer's (`layer_bytes[l]`),
/// over the rate of its link to `node` (`rate[source]`, bytes/s; a source
/// at 0 is used only when nothing else holds the layer). So the nearest
/// replica serves most, and a second one takes a share when that ends the
/// transfer sooner (list scheduling on machines of different speeds).
/// nullopt when a layer has no source.
std::optional<std::vector<layer_pick>>
spread_pulls(const std::vector<recovery_source>& sources, uint64_t begin, uint64_t end,
             uint64_t version, size_t node, const std::vector<int64_t>& layer_bytes,
             const std::vector<double>& rate);

/// A stage's pulls: consecutive layers from one source at one version.
struct pull {
  size_t source = 0;
  uint64_t begin = 0, end = 0;
  uint64_t version = 0;
  bool operator==(const pull& o) const {
    return source == o.source && begin == o.begin && end == o.end && version == o.version;
  }
};
/// `picks[i]` is where layer `begin + i` comes from.
std::vector<pull> merge_pulls(const std::vector<layer_pick>& picks, uint64_t begin);

/// One pull cut into the parts a stage asks for one at a time: runs of
/// whole layers whose weights (`layer_bytes[l]`) add up to at most
/// `part_bytes`; a layer larger than that is a part alone. In layer order,
/// covering [p.begin, p.end) exactly. Throws std::invalid_argument when
/// `layer_bytes` does not cover the pull or `part_bytes` is 0.
std::vector<pull> split_pull(const pull& p, const std::vector<int64_t>& layer_bytes,
                             int64_t part_bytes);

/// Bytes of weights and optimizer state whose node changes between two
/// plans: `param_bytes[l]` per layer times `state_factor` (1 + optimizer
/// slots: 3 for Adam, 2 for SGD with momentum).
int64_t moved_bytes(const layer_ranges& before, const std::vector<size_t>& before_nodes,
                    const layer_ranges& after, const std::vector<size_t>& after_nodes,
                    const std::vector<int64_t>& param_bytes, int state_factor);

/// Replica placement (FTPipeHD's chain): stage i's chain replica lives on
/// the next stage's node; the last stage's (and a single stage's) on
/// `central`. In a data-parallel plan the members hold the same layers and
/// the first member's replica goes to the second member's node.
size_t chain_holder_node(size_t stage, const std::vector<size_t>& on_nodes,
                         bool data_parallel, size_t central);

/// Data parallelism: member k runs the block of `split[k]` consecutive
/// micro-batches after those of members 0..k-1. Which member runs `micro`;
/// the last member for micro-batches past the split.
size_t member_of_micro(const std::vector<int>& split, size_t micro);

/// Neighbours to connect directly before a plan starts: each pair of
/// adjacent stages (of a pipeline, or data-parallel members that sum their
/// gradients along their chain) on different nodes, as (lower, higher)
/// node index, once, unless already connected; the lower one dials, so it
/// must be able to (`can_dial`: a node process, not one inside the
/// supervisor's), and the higher one must have an address to be dialled at
/// (`dialable`).
std::vector<std::pair<size_t, size_t>>
pairs_to_dial(const std::vector<size_t>& on_nodes,
              const std::set<std::pair<size_t, size_t>>& peered,
              const std::vector<bool>& can_dial, const std::vector<bool>& dialable);

} // namespace salamander::algorithms
