// The replica holder: one per node, plus the central one beside the
// supervisor. Stages send it snapshots of their layers every K batches
// (FTPipeHD's chain replication: stage k's go to stage k+1's node, the last
// stage's to the central node; and global replication: every stage's to the
// central node). During recovery it serves any layer range at any version
// it holds.
//
// It keeps the last few versions of each layer, so that the supervisor can
// pick one version that every layer has somewhere alive.
#pragma once

#include "actors/replication/replica_store.hpp"
#include "messages/interfaces.hpp"

#include <map>

namespace salamander::actors {

struct replica_holder_state {
  static inline const char* name = "replica_holder";
  std::string node;
  /// the last three versions of every layer it was sent
  replica_store store{3};
};

replica_holder_actor::behavior_type
replica_holder(replica_holder_actor::stateful_pointer<replica_holder_state> self,
               std::string node);

} // namespace salamander::actors
