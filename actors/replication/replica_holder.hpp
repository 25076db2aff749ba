// The replica holder: one per node, plus the central one beside the
// supervisor. Stages send it snapshots of their layers every K batches
// (FTPipeHD's chain replication: stage k's go to stage k+1's node, the last
// stage's to the central node; and global replication: every stage's to the
// central node). During recovery it serves any layer range at any version
// it holds.
//
// It keeps the last few versions of each layer, so that the supervisor can
// pick one version that every layer has somewhere alive.
//
// The central holder of a training job can also keep its newest complete
// version (every layer at one version) on disk, written atomically each time
// a newer one is complete: what a restarted supervisor resumes from
// (`supervisor --resume`), as the holder dies with the supervisor's process.
#pragma once

#include "actors/node/emulation.hpp"
#include "actors/replication/replica_store.hpp"
#include "actors/tuning.hpp"
#include "messages/interfaces.hpp"

#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace salamander::actors {

/// Where the central holder keeps its newest complete version on disk.
struct holder_persistence {
  std::string path;  ///< a checkpoint file ("": nothing is written)
  size_t layers = 0; ///< the model's layers: a version is complete with all
  uint64_t seed = 0; ///< recorded in the checkpoint
  /// What a restarted supervisor read back from `path`: held from the start.
  std::optional<models::weight_snapshot> initial;
};

struct replica_holder_state {
  static inline const char* name = "replica_holder";
  std::string node;
  /// the last three versions of every layer it was sent
  replica_store store{3};
  /// snapshots arriving in parts from stages in other processes
  snapshot_assembler parts{tuning::holder_pending_transfers};
  holder_persistence persist;
  uint64_t persisted = 0; ///< the version on disk (0: none yet)
  /// Writes `persist.path` on a thread of its own (a write ends with an
  /// fsync, which would hold one of the scheduler's threads), one version
  /// at a time: `writing` while one is under way.
  caf::actor writer;
  bool writing = false;
  std::shared_ptr<link_shaper> link; ///< its node's EMULATED link, if any
};

replica_holder_actor::behavior_type
replica_holder(replica_holder_actor::stateful_pointer<replica_holder_state> self,
               std::string node, std::shared_ptr<link_shaper> link);

/// The answer to a request for layers, `snapshot(begin, end, version)`,
/// sent as a node with the EMULATED link `link` would send it: once the
/// link is free and the payload's bytes have had time to leave. The request
/// is delegated to a helper that holds the answer until then, so `self`
/// takes other messages meanwhile. At once without a link, or to an asker
/// on the same node (nothing crosses the wire).
caf::result<snapshot_payload> answer_on_link(caf::local_actor* self,
                                             const std::shared_ptr<link_shaper>& link,
                                             snapshot_payload payload, uint64_t begin,
                                             uint64_t end, uint64_t version);

/// The central holder of a job that can be resumed: as replica_holder, and
/// every newer complete version goes to `persist.path`.
replica_holder_actor::behavior_type persistent_replica_holder(
    replica_holder_actor::stateful_pointer<replica_holder_state> self, std::string node,
    holder_persistence persist, std::shared_ptr<link_shaper> link);

/// Takes one snapshot's parts (snapshot_parts; encoded when its transfer
/// begins, off the sender's thread) to a holder in another process, at most
/// tuning::snapshot_window_parts of them unanswered at a time: each part is a request,
/// the holder's answer lets the next one go. Its transfer begins once `after` (the
/// courier of the sender's previous transfer to the same holder, or none) has ended, so a
/// holder gets one sender's snapshots whole and in order. It ends when the holder has
/// taken the last part, when the holder goes down, or when the holder leaves a part
/// unanswered for tuning::part_ack_timeout.
///   done -> uint64_t   answered at the end: the parts the holder took, or
///                      why it did not take them all
///
/// Why not the stage itself: a stage takes messages only between compute
/// steps, so answers would wait behind them. Why a window at all: CAF 0.17's
/// connection keeps the largest write buffer it ever needed, so parts sent
/// all at once left a node holding the whole snapshot after the job ended.
struct replica_courier_state {
  static inline const char* name = "replica_courier";
  std::shared_ptr<const snapshot_encoding> encoding;
  const std::vector<torch::Tensor>* parts = nullptr; ///< once started
  uint64_t total = 0;  ///< bytes of all parts
  uint64_t offset = 0; ///< of the next part to send
  size_t sent = 0;
  size_t taken = 0;
  bool started = false;
  std::vector<caf::response_promise> waiting; ///< done requests
};

caf::behavior replica_courier(caf::stateful_actor<replica_courier_state>* self,
                              replica_holder_actor holder, uint64_t transfer,
                              std::shared_ptr<const snapshot_encoding> parts,
                              caf::actor after);

} // namespace salamander::actors
