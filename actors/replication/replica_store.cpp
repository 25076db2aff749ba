#include "actors/replication/replica_store.hpp"

namespace salamander::actors {

void replica_store::add(const models::weight_snapshot& snap) {
  fingerprint_ = snap.fingerprint;
  model_ = snap.model;
  optimizer_ = snap.optimizer;
  for (auto& l : snap.layers) {
    auto& versions = layers_[l.index];
    versions[snap.version] = l;
    while (versions.size() > keep_) {
      versions.erase(versions.begin());
    }
  }
}

replica_inventory replica_store::inventory() const {
  replica_inventory inv;
  for (auto& [layer, versions] : layers_) {
    for (auto& [version, w] : versions) {
      inv.layers.push_back(layer);
      inv.versions.push_back(version);
    }
  }
  return inv;
}

std::optional<uint64_t> replica_store::newest_complete(size_t layers) const {
  if (layers == 0 || layers_.size() < layers) {
    return std::nullopt;
  }
  auto first = layers_.find(0);
  if (first == layers_.end()) {
    return std::nullopt;
  }
  for (auto v = first->second.rbegin(); v != first->second.rend(); ++v) {
    bool all = true;
    for (uint64_t l = 1; l < layers && all; ++l) {
      auto it = layers_.find(l);
      all = it != layers_.end() && it->second.count(v->first) > 0;
    }
    if (all) {
      return v->first;
    }
  }
  return std::nullopt;
}

replica_store::slice replica_store::get(uint64_t begin, uint64_t end,
                                        uint64_t version) const {
  slice out;
  models::weight_snapshot snap;
  snap.fingerprint = fingerprint_;
  snap.model = model_;
  snap.optimizer = optimizer_;
  snap.version = version;
  for (uint64_t l = begin; l < end; ++l) {
    auto it = layers_.find(l);
    if (it == layers_.end() || it->second.count(version) == 0) {
      out.missing = l;
      return out;
    }
    snap.layers.push_back(it->second.at(version));
  }
  out.snapshot = std::move(snap);
  return out;
}

} // namespace salamander::actors
