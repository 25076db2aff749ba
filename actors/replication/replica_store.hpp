// What a replica holder keeps, and what a stage keeps of its own last
// replications: layer weights (with optimizer state) by layer and version,
// the last few versions of each. One class for both, so that recovery asks
// either the same question and gets the same answer: the inventory, or the
// layers [begin, end) at one version (or which one is missing).
#pragma once

#include "messages/payloads.hpp"
#include "messages/replication.hpp"
#include "messages/tensor_codec.hpp"
#include "models/weights.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

/// A snapshot for a holder in another process, as parts of at most
/// `part_bytes` bytes (rounded down to whole 8-byte words): byte views into
/// the snapshot encoded once.
///
/// Why parts: CAF 0.17's BASP broker counts a peer as seen only when a whole
/// message has arrived (basp_broker.cpp, set_context), and drops it once
/// middleman.connection-timeout passes without one. The supervisor's is
/// --hang-timeout (3 s by default), so a snapshot that took longer than that
/// to cross the link as one message (6 MB at 16 Mbit/s) had the sending node
/// dropped as hung in the middle of it.
std::vector<torch::Tensor> snapshot_parts(const models::weight_snapshot& snap,
                                          size_t part_bytes);

/// A snapshot's parts (snapshot_parts), encoded at most once, by the first
/// courier that takes them (any thread): the stage that took the snapshot
/// goes on computing meanwhile. The encoding copies every tensor; for a
/// stage of nine ViT-Tiny blocks (4M parameters with Adam's moments and one
/// stashed version, 64 MB) that was 0.2-0.3 s of CPU time on the stage's
/// own thread, twice the copy that takes the snapshot, which stays
/// synchronous (the weights change at the next step).
class snapshot_encoding {
public:
  snapshot_encoding(models::weight_snapshot snap, size_t part_bytes)
      : snap_(std::move(snap)), part_bytes_(part_bytes) {}
  /// Parts encoded already (a sender that has them at hand).
  explicit snapshot_encoding(std::vector<torch::Tensor> parts);

  /// The parts; the first call encodes them (and drops the snapshot).
  const std::vector<torch::Tensor>& parts() const;

private:
  mutable std::once_flag once_;
  mutable models::weight_snapshot snap_;
  size_t part_bytes_ = 0;
  mutable std::vector<torch::Tensor> parts_;
};

/// Sends `parts` (snapshot_parts) to `to` as this sender's transfer
/// `transfer`: one (atom, transfer, offset, total, bytes) message per part,
/// in order, which snapshot_assembler::add takes.
template <class Self, class Handle, class Atom>
void send_parts(Self* self, const Handle& to, Atom atom, uint64_t transfer,
                const std::vector<torch::Tensor>& parts) {
  uint64_t total = 0;
  for (auto& p : parts) {
    total += static_cast<uint64_t>(p.numel());
  }
  uint64_t offset = 0;
  for (auto& p : parts) {
    self->send(to, atom, transfer, offset, total, tensor_payload{p});
    offset += static_cast<uint64_t>(p.numel());
  }
}

/// Puts snapshots sent in parts (snapshot_parts) back together: one transfer
/// at a time per sender, several senders at once. A part that does not
/// continue its transfer drops it (CAF keeps the order of one sender's
/// messages, so that only happens when a sender died and another took its
/// address, or to a broken peer).
class snapshot_assembler {
public:
  explicit snapshot_assembler(size_t max_pending) : max_(max_pending) {}

  /// Adds the `part` of transfer `transfer` from `from` (the sender, by
  /// name) that starts at byte `offset` of `total`; the snapshot once its
  /// last part is in. Throws
  /// messages::codec_error for a bad part (its transfer is dropped). Past
  /// `max_pending` unfinished transfers, starting one drops the oldest.
  std::optional<models::weight_snapshot> add(const std::string& from, uint64_t transfer,
                                             uint64_t offset, uint64_t total,
                                             const torch::Tensor& part);

  /// Transfers started and not finished.
  size_t pending() const { return pending_.size(); }

  /// The last transfer finished: its bytes, parts and seconds from its first
  /// part to its last.
  struct finished {
    uint64_t bytes = 0;
    size_t parts = 0;
    double seconds = 0;
  };
  const finished& last() const { return last_; }

private:
  struct partial {
    std::shared_ptr<kj::Array<capnp::word>> storage;
    uint64_t total = 0;
    uint64_t received = 0;
    uint64_t started = 0; ///< order of its first part
    size_t parts = 0;
    std::chrono::steady_clock::time_point began;
  };
  finished last_;
  size_t max_;
  uint64_t started_ = 0;
  std::map<std::pair<std::string, uint64_t>, partial> pending_;
};

} // namespace salamander::actors
