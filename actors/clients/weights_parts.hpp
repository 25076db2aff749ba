// Weights between a round job (federated, split) and its clients, in
// bounded parts when they cross to another process.
//
// Why: CAF 0.17's BASP broker counts a peer as seen only when a whole message
// has arrived, and drops it once middleman.connection-timeout (the
// supervisor's --hang-timeout) passes without one (replica_store.hpp,
// snapshot_parts). A federated update of a 50 MB model takes 5 s over a
// 10 MB/s link, so, sent as one message, its client's node was dropped as
// hung in the middle of it.
//
// The protocol: the sender sends the weights as parts,
//   part(transfer, offset, total, bytes)   ... one per part, in order
// and then the message that needs them with its weights empty and its
// `parts` field naming the transfer. CAF keeps the order of one sender's
// messages, so the receiver has every part before the message; it takes the
// weights out of its inbox when the message comes. Inside one process the
// weights go in the message itself (CAF copies nothing there).
#pragma once

#include "actors/replication/replica_store.hpp"
#include "actors/tuning.hpp"
#include "messages/messages.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>

namespace salamander::actors {

/// Weights arriving in parts, by sender and transfer, until the message
/// that needs them takes them.
class weights_inbox {
public:
  /// Adds a part from `from` (the sender, by name). A bad part drops its
  /// transfer and is logged under `subsystem`; the message that needed it
  /// then finds no weights (take returns false).
  void add(const char* subsystem, const std::string& from, uint64_t transfer,
           uint64_t offset, uint64_t total, const torch::Tensor& part);

  /// Moves the weights of transfer `transfer` from `from` into `into`;
  /// false when they did not all arrive.
  bool take(const std::string& from, uint64_t transfer, snapshot_payload& into);

  /// Transfers under way, and whole ones no message has taken yet.
  size_t pending() const { return parts_.pending(); }
  size_t waiting() const { return done_.size(); }

private:
  snapshot_assembler parts_{tuning::round_pending_transfers};
  std::map<std::pair<std::string, uint64_t>, models::weight_snapshot> done_;
  std::deque<std::pair<std::string, uint64_t>> order_; ///< of done_, oldest first
};

/// Sends `atom, msg` to `to`; the weights `msg.*weights`, when not empty and
/// `to` is in another process, go first in parts (`counter` numbers this
/// sender's transfers). With `delay`, the message goes that much later (an
/// emulated device's pace); its parts go now.
template <class Self, class Handle, class Atom, class Msg>
void send_with_weights(Self* self, const Handle& to, Atom atom, Msg msg,
                       snapshot_payload Msg::*weights, uint64_t& counter,
                       std::chrono::microseconds delay = std::chrono::microseconds(0)) {
  auto& w = msg.*weights;
  if (to && to.node() != self->node() && !w.snapshot.layers.empty()) {
    msg.parts = ++counter;
    send_parts(self, to, part_atom_v, msg.parts,
               snapshot_parts(w.snapshot, tuning::snapshot_part_bytes));
    w = snapshot_payload{};
  }
  if (delay.count() > 0) {
    self->delayed_send(to, delay, atom, std::move(msg));
  } else {
    self->send(to, atom, std::move(msg));
  }
}

/// The handler of `part` messages: adds them to `inbox` (which lives as
/// long as the actor), logging under `subsystem`.
template <class Self>
auto part_handler(Self* self, weights_inbox& inbox, const char* subsystem) {
  return [self, &inbox, subsystem](part_atom, uint64_t transfer, uint64_t offset,
                                   uint64_t total, tensor_payload& part) {
    inbox.add(subsystem, caf::to_string(self->current_sender()), transfer, offset, total,
              part.tensor);
  };
}

/// The receiving side: puts the weights of `msg` back from `inbox` when
/// they came in parts. False (and `msg` unchanged) when they did not all
/// arrive.
template <class Msg>
bool take_weights(weights_inbox& inbox, const caf::strong_actor_ptr& from, Msg& msg,
                  snapshot_payload Msg::*weights) {
  if (msg.parts == 0) {
    return true;
  }
  return inbox.take(caf::to_string(from), msg.parts, msg.*weights);
}

} // namespace salamander::actors
