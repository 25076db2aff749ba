// Everything that crosses an actor boundary is declared in messages/, by
// protocol, and registered here in the one CAF type-ID block:
//
//   payloads.hpp     tensors and weight snapshots (Cap'n Proto frames)
//   cluster.hpp      nodes, profiles, links, members (cluster supervisor)
//   job.hpp          a job's status (every mode)
//   pipeline.hpp     stage specs and per-batch reports (pipeline training)
//   replication.hpp  replica inventories, recovery decisions
//   federated.hpp    federated clients, their profiles, tasks and updates
//   split.hpp        split-learning clients, their tasks, the cut's traffic
//   interfaces.hpp   the typed actor interfaces, by role
#pragma once

#include "messages/cluster.hpp"
#include "messages/federated.hpp"
#include "messages/job.hpp"
#include "messages/payloads.hpp"
#include "messages/pipeline.hpp"
#include "messages/replication.hpp"
#include "messages/split.hpp"

#include <caf/all.hpp>

#include <cstdint>
#include <vector>

namespace salamander {

/// Bumped whenever a message changes shape; nodes of another protocol are
/// refused at hello time with both numbers in the error.
constexpr uint32_t protocol_version = 22;

} // namespace salamander

CAF_BEGIN_TYPE_ID_BLOCK(salamander, caf::first_custom_type_id)
CAF_ADD_TYPE_ID(salamander, (salamander::tensor_payload))
CAF_ADD_TYPE_ID(salamander, (salamander::snapshot_payload))
CAF_ADD_TYPE_ID(salamander, (salamander::stage_spec))
CAF_ADD_TYPE_ID(salamander, (salamander::batch_stats))
CAF_ADD_TYPE_ID(salamander, (salamander::node_info))
CAF_ADD_TYPE_ID(salamander, (salamander::job_status))
CAF_ADD_TYPE_ID(salamander, (salamander::device_report))
CAF_ADD_TYPE_ID(salamander, (salamander::replica_inventory))
CAF_ADD_TYPE_ID(salamander, (std::vector<salamander::batch_stats>))
CAF_ADD_TYPE_ID(salamander, (salamander::link_report))
CAF_ADD_TYPE_ID(salamander, (salamander::node_row))
CAF_ADD_TYPE_ID(salamander, (salamander::stage_row))
CAF_ADD_TYPE_ID(salamander, (std::vector<salamander::node_row>))
CAF_ADD_TYPE_ID(salamander, (std::vector<salamander::stage_row>))
CAF_ADD_TYPE_ID(salamander, (salamander::cluster_member))
CAF_ADD_TYPE_ID(salamander, (std::vector<salamander::cluster_member>))
CAF_ADD_TYPE_ID(salamander, (salamander::link_entry))
CAF_ADD_TYPE_ID(salamander, (salamander::cluster_profile))
CAF_ADD_TYPE_ID(salamander, (salamander::recovery_source_info))
CAF_ADD_TYPE_ID(salamander, (salamander::recovery_decision))
CAF_ADD_TYPE_ID(salamander, (salamander::launch_result))
CAF_ADD_TYPE_ID(salamander, (salamander::fed_client_spec))
CAF_ADD_TYPE_ID(salamander, (salamander::fed_profile))
CAF_ADD_TYPE_ID(salamander, (salamander::fed_task))
CAF_ADD_TYPE_ID(salamander, (salamander::fed_update))
CAF_ADD_TYPE_ID(salamander, (salamander::split_client_spec))
CAF_ADD_TYPE_ID(salamander, (salamander::split_task))
CAF_ADD_TYPE_ID(salamander, (salamander::split_smash))
CAF_ADD_TYPE_ID(salamander, (salamander::split_reply))
CAF_ADD_TYPE_ID(salamander, (salamander::split_result))
CAF_ADD_TYPE_ID(salamander, (std::vector<int64_t>))
CAF_ADD_ATOM(salamander, salamander, forward_atom, "forward")
CAF_ADD_ATOM(salamander, salamander, backward_atom, "backward")
CAF_ADD_ATOM(salamander, salamander, labels_atom, "labels")
CAF_ADD_ATOM(salamander, salamander, wire_atom, "wire")
CAF_ADD_ATOM(salamander, salamander, done_atom, "done")
CAF_ADD_ATOM(salamander, salamander, eval_atom, "eval")
CAF_ADD_ATOM(salamander, salamander, hello_atom, "hello")
CAF_ADD_ATOM(salamander, salamander, spawn_atom, "spawn")
CAF_ADD_ATOM(salamander, salamander, snapshot_atom, "snapshot")
CAF_ADD_ATOM(salamander, salamander, failed_atom, "failed")
CAF_ADD_ATOM(salamander, salamander, leave_atom, "leave")
CAF_ADD_ATOM(salamander, salamander, echo_atom, "echo")
CAF_ADD_ATOM(salamander, salamander, tick_atom, "tick")
CAF_ADD_ATOM(salamander, salamander, ready_atom, "ready")
CAF_ADD_ATOM(salamander, salamander, replan_atom, "replan")
CAF_ADD_ATOM(salamander, salamander, profile_atom, "profile")
CAF_ADD_ATOM(salamander, salamander, slow_atom, "slow")
CAF_ADD_ATOM(salamander, salamander, cut_atom, "cut")
CAF_ADD_ATOM(salamander, salamander, replicate_atom, "replicate")
CAF_ADD_ATOM(salamander, salamander, recover_atom, "recover")
CAF_ADD_ATOM(salamander, salamander, kill_atom, "kill")
CAF_ADD_ATOM(salamander, salamander, join_atom, "join")
CAF_ADD_ATOM(salamander, salamander, pause_atom, "pause")
CAF_ADD_ATOM(salamander, salamander, resume_atom, "resume")
CAF_ADD_ATOM(salamander, salamander, checkpoint_atom, "checkpoint")
CAF_ADD_ATOM(salamander, salamander, auth_atom, "auth")
CAF_ADD_ATOM(salamander, salamander, probe_atom, "probe")
CAF_ADD_ATOM(salamander, salamander, capacity_atom, "capacity")
CAF_ADD_ATOM(salamander, salamander, peer_atom, "peer")
CAF_ADD_ATOM(salamander, salamander, reduce_atom, "reduce")
CAF_ADD_ATOM(salamander, salamander, submit_atom, "submit")
CAF_ADD_ATOM(salamander, salamander, lost_atom, "lost")
CAF_ADD_ATOM(salamander, salamander, event_atom, "event")
CAF_ADD_ATOM(salamander, salamander, launch_atom, "launch")
CAF_ADD_ATOM(salamander, salamander, stop_atom, "stop")
CAF_ADD_ATOM(salamander, salamander, infer_atom, "infer")
CAF_ADD_ATOM(salamander, salamander, dispatch_atom, "dispatch")
CAF_ADD_ATOM(salamander, salamander, round_atom, "round")
CAF_ADD_ATOM(salamander, salamander, update_atom, "update")
CAF_ADD_ATOM(salamander, salamander, deadline_atom, "deadline")
CAF_ADD_ATOM(salamander, salamander, progress_atom, "progress")
CAF_ADD_ATOM(salamander, salamander, part_atom, "part")
CAF_ADD_ATOM(salamander, salamander, events_atom, "events")
CAF_ADD_ATOM(salamander, salamander, summed_atom, "summed")
CAF_ADD_ATOM(salamander, salamander, drain_atom, "drain")
CAF_END_TYPE_ID_BLOCK(salamander)
