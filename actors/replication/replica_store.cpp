#include "actors/replication/replica_store.hpp"

#include <algorithm>
#include <cstring>

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

std::vector<torch::Tensor> snapshot_parts(const models::weight_snapshot& snap,
                                          size_t part_bytes) {
  auto encoded = std::make_shared<messages::frame>(messages::encode_snapshot(snap));
  auto n = static_cast<int64_t>(encoded->byte_size());
  auto* data = const_cast<char*>(encoded->bytes());
  auto all = torch::from_blob(
      data, {n}, [encoded](void*) {}, torch::TensorOptions().dtype(torch::kUInt8));
  auto step = static_cast<int64_t>(std::max(part_bytes, sizeof(capnp::word)) /
                                   sizeof(capnp::word) * sizeof(capnp::word));
  std::vector<torch::Tensor> parts;
  for (int64_t at = 0; at < n; at += step) {
    parts.push_back(all.narrow(0, at, std::min(step, n - at)));
  }
  return parts;
}

snapshot_encoding::snapshot_encoding(std::vector<torch::Tensor> parts)
    : parts_(std::move(parts)) {
  std::call_once(once_, [] {});
}

const std::vector<torch::Tensor>& snapshot_encoding::parts() const {
  std::call_once(once_, [this] {
    parts_ = snapshot_parts(snap_, part_bytes_);
    snap_ = models::weight_snapshot{};
  });
  return parts_;
}

std::optional<models::weight_snapshot>
snapshot_assembler::add(const std::string& from, uint64_t transfer, uint64_t offset,
                        uint64_t total, const torch::Tensor& part) {
  using messages::codec_error;
  auto key = std::make_pair(from, transfer);
  auto it = pending_.find(key);
  auto drop = [&](const std::string& why) {
    if (it != pending_.end()) {
      pending_.erase(it);
    }
    return codec_error("snapshot transfer " + std::to_string(transfer) + ": " + why);
  };
  if (total == 0 || total % sizeof(capnp::word) != 0 ||
      total > messages::max_frame_bytes) {
    throw drop("a total of " + std::to_string(total) + " bytes is no snapshot frame");
  }
  if (offset == 0 && it == pending_.end()) {
    if (pending_.size() >= max_) {
      auto oldest = pending_.begin();
      for (auto i = pending_.begin(); i != pending_.end(); ++i) {
        if (i->second.started < oldest->second.started) {
          oldest = i;
        }
      }
      pending_.erase(oldest);
    }
    partial p;
    p.storage = messages::acquire_words(total / sizeof(capnp::word));
    p.total = total;
    p.started = started_++;
    p.began = std::chrono::steady_clock::now();
    it = pending_.emplace(key, std::move(p)).first;
  }
  if (it == pending_.end()) {
    throw drop("a part at byte " + std::to_string(offset) + " of a transfer not started");
  }
  auto& p = it->second;
  auto n = static_cast<uint64_t>(part.numel());
  if (part.scalar_type() != torch::kUInt8 || part.dim() != 1) {
    throw drop("a part is not a vector of bytes");
  }
  if (p.total != total || offset != p.received || n == 0 || n > total - offset) {
    throw drop("a part of " + std::to_string(n) + " bytes at byte " +
               std::to_string(offset) + " does not continue " +
               std::to_string(p.received) + " of " + std::to_string(p.total));
  }
  auto bytes = part.contiguous();
  std::memcpy(reinterpret_cast<char*>(p.storage->begin()) + offset, bytes.data_ptr(), n);
  p.received += n;
  ++p.parts;
  if (p.received < p.total) {
    return std::nullopt;
  }
  last_.bytes = p.total;
  last_.parts = p.parts;
  last_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - p.began).count();
  auto storage = std::move(p.storage);
  pending_.erase(it);
  return messages::decode_snapshot(
      messages::frame(std::move(storage), total / sizeof(capnp::word)));
}

} // namespace salamander::actors
