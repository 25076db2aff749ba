#include "actors/replication/replica_holder.hpp"

#include "actors/logging.hpp"
#include "messages/checkpoint.hpp"
#include "messages/errors.hpp"

#include <chrono>

namespace salamander::actors {

namespace {

// Writes each version it is sent to `path` as a checkpoint and answers
// with the version, or with why it could not.
caf::behavior checkpoint_writer(caf::event_based_actor*, std::string path,
                                uint64_t seed) {
  return {
      [=](replicate_atom, snapshot_payload& p) -> caf::result<uint64_t> {
        auto v = p.snapshot.version;
        messages::checkpoint ckpt;
        ckpt.snapshot = std::move(p.snapshot);
        ckpt.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
        ckpt.seed = seed;
        ckpt.note = "central replica holder, version " + std::to_string(v);
        try {
          messages::save_checkpoint(path, ckpt);
        } catch (const std::exception& e) {
          return caf::make_error(errc::io_failed, e.what());
        }
        return v;
      },
  };
}

// The newest complete version, if newer than the one on disk, goes to the
// writer (once the write before it has ended: then the newest again). A
// write that fails is logged and tried again at the next replication: the
// job goes on (only a restart of the supervisor would need the file).
void persist_newest(replica_holder_actor::stateful_pointer<replica_holder_state> self) {
  auto& st = self->state;
  if (st.writing) {
    return;
  }
  auto v = st.store.newest_complete(st.persist.layers);
  if (!v || *v <= st.persisted) {
    return;
  }
  auto got = st.store.get(0, st.persist.layers, *v);
  if (!got.snapshot) {
    return;
  }
  if (!st.writer) {
    st.writer = self->spawn<caf::detached + caf::linked>(
        checkpoint_writer, st.persist.path, st.persist.seed);
  }
  st.writing = true;
  self->request(st.writer, caf::infinite, replicate_atom_v,
                snapshot_payload{std::move(*got.snapshot)})
      .then(
          [=](uint64_t written) {
            auto& s = self->state;
            s.writing = false;
            s.persisted = written;
            subsystem_log("replication")
                ->debug("central holder: version {} on disk ({})", written,
                        s.persist.path);
            persist_newest(self); // a newer one may have come meanwhile
          },
          [=](caf::error& e) {
            auto& s = self->state;
            s.writing = false;
            subsystem_log("replication")
                ->error("central holder: cannot keep a version on disk: {}",
                        self->system().render(e));
          });
}

void keep(replica_holder_actor::stateful_pointer<replica_holder_state> self,
          const models::weight_snapshot& snap) {
  auto& st = self->state;
  st.store.add(snap);
  subsystem_log("replication")
      ->debug("holder on {}: {} layer(s) at version {}", st.node, snap.layers.size(),
              snap.version);
  if (!st.persist.path.empty()) {
    persist_newest(self);
  }
}

replica_holder_actor::behavior_type
holder_behavior(replica_holder_actor::stateful_pointer<replica_holder_state> self) {
  return {
      [=](replicate_atom, snapshot_payload& p) { keep(self, p.snapshot); },
      [=](replicate_atom, uint64_t transfer, uint64_t offset, uint64_t total,
          tensor_payload& part) -> caf::result<void> {
        auto& st = self->state;
        auto from = caf::to_string(self->current_sender());
        try {
          if (auto snap = st.parts.add(from, transfer, offset, total, part.tensor)) {
            auto& t = st.parts.last();
            subsystem_log("replication")
                ->debug("holder on {}: a snapshot of {:.1f} MB from {} in {} part(s) "
                        "over {:.2f} s",
                        st.node, static_cast<double>(t.bytes) / 1e6, from, t.parts,
                        t.seconds);
            keep(self, *snap);
          }
        } catch (const std::exception& e) {
          subsystem_log("replication")
              ->warn("holder on {}: dropped a snapshot from {}: {}", st.node, from,
                     e.what());
          // the courier stops and says so, instead of counting the part taken
          return caf::make_error(errc::bad_transfer, "replica holder on " + st.node +
                                                         " dropped the snapshot: " + e.what());
        }
        return {};
      },
      [=](snapshot_atom, uint64_t begin, uint64_t end,
          uint64_t version) -> caf::result<snapshot_payload> {
        auto& st = self->state;
        auto got = st.store.get(begin, end, version);
        if (!got.snapshot) {
          return caf::make_error(
              errc::node_lost, "replica holder on " + st.node + " has no copy of layer " +
                                   std::to_string(got.missing) + " at version " +
                                   std::to_string(version));
        }
        return answer_on_link(self, st.link, snapshot_payload{std::move(*got.snapshot)},
                              begin, end, version);
      },
      [=](caf::get_atom) { return self->state.store.inventory(); },
  };
}

} // namespace

caf::result<snapshot_payload> answer_on_link(caf::local_actor* self,
                                             const std::shared_ptr<link_shaper>& link,
                                             snapshot_payload payload, uint64_t begin,
                                             uint64_t end, uint64_t version) {
  auto asker = self->current_sender();
  if (!link || !link->active() || !asker || asker->node() == self->node()) {
    return payload;
  }
  auto delay = link->delay_for(static_cast<size_t>(payload.snapshot.bytes()));
  if (delay.count() <= 0) {
    return payload;
  }
  auto held = std::make_shared<snapshot_payload>(std::move(payload));
  auto courier = self->spawn([held, delay](caf::event_based_actor* c) -> caf::behavior {
    return {
        [=](snapshot_atom, uint64_t, uint64_t, uint64_t) {
          auto rp = c->make_response_promise();
          c->delayed_send(c, delay, tick_atom_v);
          c->become([=](tick_atom) mutable {
            rp.deliver(std::move(*held));
            c->quit();
          });
          return rp;
        },
    };
  });
  auto rp = self->make_response_promise();
  rp.delegate(courier, snapshot_atom_v, begin, end, version);
  return rp;
}

replica_holder_actor::behavior_type
replica_holder(replica_holder_actor::stateful_pointer<replica_holder_state> self,
               std::string node, std::shared_ptr<link_shaper> link) {
  self->state.node = std::move(node);
  self->state.link = std::move(link);
  return holder_behavior(self);
}

replica_holder_actor::behavior_type persistent_replica_holder(
    replica_holder_actor::stateful_pointer<replica_holder_state> self, std::string node,
    holder_persistence persist, std::shared_ptr<link_shaper> link) {
  auto& st = self->state;
  st.node = std::move(node);
  st.link = std::move(link);
  st.persist = std::move(persist);
  if (st.persist.initial) {
    st.persisted = st.persist.initial->version; // it is on disk already
    st.store.add(*st.persist.initial);
    st.persist.initial.reset();
  }
  return holder_behavior(self);
}

namespace {

using courier_pointer = caf::stateful_actor<replica_courier_state>*;

// Answers whoever waits for the transfer: the parts taken, or why not all
// were.
void answer_waiting(courier_pointer self, const caf::error& why) {
  auto& st = self->state;
  for (auto& w : st.waiting) {
    if (why) {
      w.deliver(why);
    } else {
      w.deliver(static_cast<uint64_t>(st.taken));
    }
  }
  st.waiting.clear();
}

// Ends the courier, answering whoever waits.
void finish(courier_pointer self, caf::error why = caf::error{}) {
  answer_waiting(self, why);
  self->quit(std::move(why));
}

// Sends parts until the window is full or none is left; each answer sends
// the next. The last answer ends the courier.
void send_window(courier_pointer self, const replica_holder_actor& holder,
                 uint64_t transfer) {
  auto& st = self->state;
  while (st.sent < st.parts->size() && st.sent - st.taken < tuning::snapshot_window_parts) {
    const auto& part = (*st.parts)[st.sent++];
    self->request(holder, tuning::part_ack_timeout, replicate_atom_v, transfer, st.offset,
                  st.total, tensor_payload{part})
        .then(
            [=] {
              auto& s = self->state;
              if (++s.taken == s.parts->size()) {
                finish(self);
              } else {
                send_window(self, holder, transfer);
              }
            },
            [=](caf::error& e) {
              // a holder that went away (a job that ended, a node lost) is
              // no news: its down message says so too
              auto gone = e == caf::sec::request_receiver_down;
              subsystem_log("replication")
                  ->log(gone ? spdlog::level::debug : spdlog::level::warn,
                        "snapshot transfer {} to {}: part {} of {} not taken ({}); "
                        "the rest is dropped",
                        transfer, caf::to_string(holder.node()), self->state.taken + 1,
                        self->state.parts->size(), self->system().render(e));
              finish(self, std::move(e));
            });
    st.offset += static_cast<uint64_t>(part.numel());
  }
}

void start_transfer(courier_pointer self, const replica_holder_actor& holder,
                    uint64_t transfer) {
  auto& st = self->state;
  if (st.started) {
    return;
  }
  st.started = true;
  st.parts = &st.encoding->parts();
  for (const auto& p : *st.parts) {
    st.total += static_cast<uint64_t>(p.numel());
  }
  if (st.parts->empty()) {
    finish(self);
    return;
  }
  send_window(self, holder, transfer);
}

} // namespace

caf::behavior replica_courier(courier_pointer self, replica_holder_actor holder,
                              uint64_t transfer,
                              std::shared_ptr<const snapshot_encoding> parts,
                              caf::actor after) {
  auto& st = self->state;
  st.encoding = std::move(parts);
  // however it ends, whoever waits for the transfer hears why
  self->set_exception_handler([=](std::exception_ptr& e) -> caf::error {
    auto why = caf::make_error(caf::sec::runtime_error, "snapshot courier failed");
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      why = caf::make_error(caf::sec::runtime_error, x.what());
    } catch (...) {
    }
    answer_waiting(self, why);
    return why; // (the courier quits with it)
  });
  self->monitor(holder);
  self->set_down_handler([=](caf::down_msg& m) {
    if (m.source == holder.address()) {
      subsystem_log("replication")
          ->debug("snapshot transfer {}: its holder went away; dropped", transfer);
      finish(self, caf::make_error(caf::sec::request_receiver_down,
                                   "the holder went away: " + self->system().render(m.reason)));
      return;
    }
    start_transfer(self, holder, transfer); // the previous transfer has ended
  });
  if (after) {
    self->monitor(after); // a down message at once if it has already ended
  } else {
    start_transfer(self, holder, transfer);
  }
  return {
      // answered once the holder has taken every part: how many
      [=](done_atom) {
        auto rp = self->make_response_promise();
        self->state.waiting.push_back(rp);
        return rp;
      },
  };
}

} // namespace salamander::actors
