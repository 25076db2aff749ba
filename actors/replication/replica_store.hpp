// What a replica holder keeps, and what a stage keeps of its own last
// replications: layer weights (with optimizer state) by layer and version,
// the last few versions of each. One class for both, so that recovery asks
// either the same question and gets the same answer: the inventory, or the
// layers [begin, end) at one version (or which one is missing).
#pragma once

#include "messages/replication.hpp"
#include "models/weights.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace salamander::actors {

class replica_store {
public:
  explicit replica_store(size_t keep_versions) : keep_(keep_versions) {}

  /// Keeps every layer of `snap` at its version, dropping each layer's
  /// oldest versions beyond the limit.
  void add(const models::weight_snapshot& snap);

  /// Every (layer, version) pair held.
  replica_inventory inventory() const;

  /// Layers [begin, end) at `version`; or, in `missing`, the first layer
  /// not held at that version.
  struct slice {
    std::optional<models::weight_snapshot> snapshot;
    uint64_t missing = 0;
  };
  slice get(uint64_t begin, uint64_t end, uint64_t version) const;

  bool empty() const { return layers_.empty(); }

  /// The newest version held of every layer in [0, layers), if any.
  std::optional<uint64_t> newest_complete(size_t layers) const;

private:
  size_t keep_;
  /// layer index -> version -> weights
  std::map<uint64_t, std::map<uint64_t, models::layer_weights>> layers_;
  std::string fingerprint_;
  std::string model_;
  std::string optimizer_;
};

} // namespace salamander::actors
