#include "actors/replication/replica_holder.hpp"

#include "actors/logging.hpp"
#include "messages/errors.hpp"

namespace salamander::actors {

replica_holder_actor::behavior_type
replica_holder(replica_holder_actor::stateful_pointer<replica_holder_state> self, std::string node) {
  self->state.node = std::move(node);
  return {
      [=](replicate_atom, snapshot_payload& p) {
        auto& st = self->state;
        auto& snap = p.snapshot;
        st.fingerprint = snap.fingerprint;
        st.model = snap.model;
        st.optimizer = snap.optimizer;
        subsystem_log("replication")
            ->debug("holder on {}: {} layer(s) at version {}", st.node, snap.layers.size(),
                    snap.version);
        for (auto& l : snap.layers) {
          auto& versions = st.layers[l.index];
          versions[snap.version] = std::move(l);
          while (versions.size() > st.keep_versions) {
            versions.erase(versions.begin());
          }
        }
      },
      [=](snapshot_atom, uint64_t begin, uint64_t end,
          uint64_t version) -> caf::result<snapshot_payload> {
        auto& st = self->state;
        snapshot_payload out;
        out.snapshot.fingerprint = st.fingerprint;
        out.snapshot.model = st.model;
        out.snapshot.optimizer = st.optimizer;
        out.snapshot.version = version;
        for (uint64_t l = begin; l < end; ++l) {
          auto it = st.layers.find(l);
          if (it == st.layers.end() || it->second.count(version) == 0) {
            return caf::make_error(errc::node_lost, "replica holder on " + st.node +
                                                        " has no copy of layer " +
                                                        std::to_string(l) + " at version " +
                                                        std::to_string(version));
          }
          out.snapshot.layers.push_back(it->second.at(version));
        }
        return out;
      },
      [=](caf::get_atom) {
        replica_inventory inv;
        for (auto& [layer, versions] : self->state.layers) {
          for (auto& [version, w] : versions) {
            inv.layers.push_back(layer);
            inv.versions.push_back(version);
          }
        }
        return inv;
      },
  };
}

} // namespace salamander::actors
