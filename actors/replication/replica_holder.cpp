#include "actors/replication/replica_holder.hpp"

#include "actors/logging.hpp"
#include "messages/checkpoint.hpp"
#include "messages/errors.hpp"

#include <chrono>

namespace salamander::actors {

namespace {

// The newest complete version, if newer than the one on disk, replaces it.
// A write that fails is logged and tried again at the next replication: the
// job goes on (only a restart of the supervisor would need the file).
void persist_newest(replica_holder_actor::stateful_pointer<replica_holder_state> self) {
  auto& st = self->state;
  auto v = st.store.newest_complete(st.persist.layers);
  if (!v || *v <= st.persisted) {
    return;
  }
  auto got = st.store.get(0, st.persist.layers, *v);
  if (!got.snapshot) {
    return;
  }
  messages::checkpoint ckpt;
  ckpt.snapshot = std::move(*got.snapshot);
  ckpt.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  ckpt.seed = st.persist.seed;
  ckpt.note = "central replica holder, version " + std::to_string(*v);
  try {
    messages::save_checkpoint(st.persist.path, ckpt);
    st.persisted = *v;
    subsystem_log("replication")
        ->debug("central holder: version {} on disk ({})", *v, st.persist.path);
  } catch (const std::exception& e) {
    subsystem_log("replication")
        ->error("central holder: cannot keep version {} on disk: {}", *v, e.what());
  }
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
          tensor_payload& part) {
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
        }
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
        return snapshot_payload{std::move(*got.snapshot)};
      },
      [=](caf::get_atom) { return self->state.store.inventory(); },
  };
}

} // namespace

replica_holder_actor::behavior_type
replica_holder(replica_holder_actor::stateful_pointer<replica_holder_state> self,
               std::string node) {
  self->state.node = std::move(node);
  return holder_behavior(self);
}

replica_holder_actor::behavior_type
persistent_replica_holder(replica_holder_actor::stateful_pointer<replica_holder_state> self,
                          std::string node, holder_persistence persist) {
  auto& st = self->state;
  st.node = std::move(node);
  st.persist = std::move(persist);
  if (st.persist.initial) {
    st.persisted = st.persist.initial->version; // it is on disk already
    st.store.add(*st.persist.initial);
    st.persist.initial.reset();
  }
  return holder_behavior(self);
}

} // namespace salamander::actors
