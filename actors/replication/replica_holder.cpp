#include "actors/replication/replica_holder.hpp"

#include "actors/logging.hpp"
#include "messages/errors.hpp"

namespace salamander::actors {

replica_holder_actor::behavior_type
replica_holder(replica_holder_actor::stateful_pointer<replica_holder_state> self,
               std::string node) {
  self->state.node = std::move(node);
  return {
      [=](replicate_atom, snapshot_payload& p) {
        auto& st = self->state;
        st.store.add(p.snapshot);
        subsystem_log("replication")
            ->debug("holder on {}: {} layer(s) at version {}", st.node,
                    p.snapshot.layers.size(), p.snapshot.version);
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

} // namespace salamander::actors
