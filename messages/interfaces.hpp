// Typed interfaces of every actor role. Neighbour and supervisor handles are
// passed as caf::actor (a typed_actor cannot name itself in its own
// signature); receivers actor_cast them back to these types.
#pragma once

#include "messages/messages.hpp"

namespace salamander {

/// A pipeline stage: a contiguous range of layers and its optimizer state.
///
///   wire(prev, next, supervisor)        neighbours; null at the ends
///   forward(batch, micro, activations)  from prev (or the supervisor)
///   backward(batch, micro, gradient)    from next
///   labels(batch, micro, weight, y)     last stage: labels and loss weight
///   eval(id, micro, x)                  forward only; the last stage sends
///                                       (eval, id, micro, logits) to the supervisor
///   snapshot(holder) -> (version, begin, end)  the weights of the range,
///                           with optimizer state, sent to that replica
///                           holder (in parts from another process) before
///                           the answer: how a job gathers its weights
///   snapshot(begin, end, version) -> weights and optimizer state of those
///                           layers, if the stage is at that version or
///                           kept a snapshot of it (a re-planned or
///                           recovering stage pulls them from here);
///                           version `current_version`: whatever it has now
///   pause                 recovery: stop computing (inputs are kept), so that
///                         what it reports and serves stays as it is
///   reduce(batch, merged) data parallelism through the supervisor: the
///                         members' summed gradients and merged BatchNorm
///                         statistics; the stage steps with them
///   reduce(batch, chunk, partial)  data parallelism along the chain of
///                         members (--dp-reduce chain), from the member before:
///                         a chunk of the contributions of the members
///                         before it (models::dp_chunks); this member folds
///                         its own in and passes it to the member after it
///   summed(batch, chunk, merged)  from the member after: a chunk of the
///                         members' summed gradients and merged BatchNorm
///                         statistics, passed on down; with all of them the
///                         stage steps
///   get -> replica_inventory  the layers and version of the snapshot it
///                           last replicated (recovery may pull from it)
///
/// A stage spawned with sources pulls its state from them first and then
/// sends (ready, index) to the supervisor; until then inputs are buffered.
///
///   replicate(version)    replicate the snapshot at this version to the chain
///                         and global holders: now if the stage is at it,
///                         else right after it steps to it (console)
///   drain(batch)          async: end the row before `batch`, which the job
///                         has not fed, so that every batch before it
///                         finishes (a stop, checkpoint or re-plan waits for
///                         that); the next row starts there, on the versions
///                         the stage kept
///
/// After the last backward of a batch a stage steps its optimizer and sends
/// (done, batch_stats) to the supervisor; on an error it sends
/// (failed, stage index, message) and quits.
using stage_actor = caf::typed_actor<
    caf::reacts_to<wire_atom, caf::actor, caf::actor, caf::actor>,
    caf::reacts_to<forward_atom, uint64_t, uint32_t, tensor_payload>,
    caf::reacts_to<backward_atom, uint64_t, uint32_t, tensor_payload>,
    caf::reacts_to<labels_atom, uint64_t, uint32_t, double, tensor_payload>,
    caf::reacts_to<eval_atom, uint64_t, uint32_t, tensor_payload>,
    caf::reacts_to<replicate_atom, uint64_t>, caf::reacts_to<pause_atom>,
    caf::reacts_to<drain_atom, uint64_t>,
    caf::reacts_to<reduce_atom, uint64_t, tensor_payload>,
    caf::reacts_to<reduce_atom, uint64_t, uint32_t, tensor_payload>,
    caf::reacts_to<summed_atom, uint64_t, uint32_t, tensor_payload>,
    caf::replies_to<snapshot_atom, caf::actor>::with<uint64_t, uint64_t, uint64_t>,
    caf::replies_to<snapshot_atom, uint64_t, uint64_t, uint64_t>::with<snapshot_payload>,
    caf::replies_to<caf::get_atom>::with<replica_inventory>>;

/// In snapshot(begin, end, version): the stage's weights as they are now.
constexpr uint64_t current_version = ~uint64_t{0};

/// Holds replicas of other stages' layers (see actors/replica_holder.hpp).
///   replicate(snapshot)                        store these layers at its version
///   replicate(transfer, offset, total, bytes)  the same, from another process,
///                                              in parts (replica_store.hpp);
///                                              a request answered when taken
///                                              (replica_holder.hpp, courier)
///   snapshot(begin, end, version) -> weights   serve them during recovery
///   get -> replica_inventory                   what it holds
using replica_holder_actor = caf::typed_actor<
    caf::reacts_to<replicate_atom, snapshot_payload>,
    caf::reacts_to<replicate_atom, uint64_t, uint64_t, uint64_t, tensor_payload>,
    caf::replies_to<snapshot_atom, uint64_t, uint64_t, uint64_t>::with<snapshot_payload>,
    caf::replies_to<caf::get_atom>::with<replica_inventory>>;

/// One per node: measures per-layer forward/backward time of a model on this
/// device (warm-up, then the median of several runs) and reports it with the
/// memory and link the device has.
///
///   probe(peer, name) -> link_report   time pings and 256 KB transfers to
///                         the peer profiler (latency, bandwidth; an emulated
///                         link rate is added on top)
///   echo(n) / echo(tensor)             a peer's probe: answer at once
///   capacity(supervisor)               start reporting capacity: every
///                         period a short fixed compute probe (thread CPU
///                         time, scaled by the emulated share); sends
///                         (capacity, node, factor) to the supervisor every
///                         30 s, and at once when the factor drifts by 20%
///   tick                               its own timer for that probe
using profiler_actor = caf::typed_actor<
    caf::replies_to<profile_atom, std::string, uint32_t>::with<device_report>,
    caf::replies_to<probe_atom, caf::actor, std::string>::with<link_report>,
    caf::replies_to<echo_atom, int64_t>::with<int64_t>,
    caf::replies_to<echo_atom, tensor_payload>::with<int64_t>,
    caf::reacts_to<capacity_atom, caf::actor>, caf::reacts_to<tick_atom>>;

/// One per device process. hello(protocol, challenge) checks the protocol
/// and proves the cluster secret (actors/auth.hpp); auth(proof, why) is the
/// supervisor's proof in turn, or (with an empty proof) why it refused the
/// node. Until a supervisor has proved the secret, the node refuses spawn,
/// profile, probe, slow and kill. probe(peer profiler, peer name) measures
/// the link to another node. peer(host, port) connects this node straight to
/// another (its pipeline neighbour), so that tensors between their stages go
/// node to node; false if it could not (they then go through the
/// supervisor's process). spawn starts a stage
/// on this device and returns its handle (spawn(fed_client_spec): a
/// federated client; spawn(split_client_spec): a split-learning client); profile(model, micro-batch size)
/// asks its profiler; slow(factor) makes an emulated device run at that
/// factor of its share from now on (1 restores it); cut(seconds) silences
/// its link for that long (an EMULATED outage: nothing in or out, the
/// connections kept, the process running); kill makes a node
/// process kill itself with SIGKILL (chaos; refused by in-process nodes);
/// leave stops everything.
using node_actor = caf::typed_actor<
    caf::replies_to<hello_atom, uint32_t, std::string>::with<node_info>,
    caf::reacts_to<auth_atom, std::string, std::string>,
    caf::replies_to<spawn_atom, stage_spec>::with<caf::actor>,
    caf::replies_to<spawn_atom, fed_client_spec>::with<caf::actor>,
    caf::replies_to<spawn_atom, split_client_spec>::with<caf::actor>,
    caf::replies_to<profile_atom, std::string, uint32_t>::with<device_report>,
    caf::replies_to<probe_atom, caf::actor, std::string>::with<link_report>,
    caf::replies_to<peer_atom, std::string, uint16_t>::with<bool>,
    caf::replies_to<slow_atom, double>::with<std::string>,
    caf::replies_to<cut_atom, double>::with<std::string>,
    caf::replies_to<kill_atom>::with<std::string>, caf::reacts_to<leave_atom>>;

// ---- the job protocol: what every job supervisor answers, whatever its mode

/// A job supervisor (one per job, one kind per mode), as the cluster
/// supervisor sees it:
///
///   get -> job_status          status, for the console and progress lines
///   events(since) -> lines     the job's events numbered `since` and after
///                              (JSON objects, oldest first): the timeline
///   pause / resume -> text     console: stop starting work (what is in
///                              flight finishes), and carry on
///   checkpoint(path) -> text   console: at the next consistent point, write
///                              the model's weights to a checkpoint file
///   lost(node, why)            one of its nodes is gone (connection lost,
///                              no heartbeat); the job recovers or fails
///   join(node, member) -> text a node joined the cluster; the job plans it
///                              in when it can and says how
///   capacity(node name, f)     a node's profiler: it runs at f of the
///                              capacity it had when the job started
///   event(kind, json)          the cluster's own events for the job's
///                              metrics log (refused, link, profile)
///   leave                      stop the job's workers and quit
using job_actor = caf::typed_actor<
    caf::replies_to<caf::get_atom>::with<job_status>,
    caf::replies_to<events_atom, uint64_t>::with<std::vector<std::string>>,
    caf::replies_to<pause_atom>::with<std::string>,
    caf::replies_to<resume_atom>::with<std::string>,
    caf::replies_to<checkpoint_atom, std::string>::with<std::string>,
    caf::replies_to<stop_atom, std::string>::with<std::string>,
    caf::reacts_to<lost_atom, uint32_t, std::string>,
    caf::replies_to<join_atom, uint32_t, cluster_member>::with<std::string>,
    caf::reacts_to<capacity_atom, std::string, double>,
    caf::reacts_to<event_atom, std::string, std::string>, caf::reacts_to<leave_atom>>;

/// The training job (actors/train/train_job.hpp): the job interface, plus
/// what its stages send it and the training commands of the console.
///
///   done(stats)            a stage finished a batch (all stages: committed)
///   failed(stage, what)    a stage gave up; the job fails with `what`
///   eval(id, micro, y)     logits of an evaluation chunk from the last stage
///   ready(stage)           a re-planned or recovering stage pulled its state
///   reduce(batch, member, n, parts)
///                          a data-parallel stage's gradients (the first n
///                          values) and BatchNorm statistics for a batch, when
///                          they sum through the supervisor; when every
///                          member's are in, each gets reduce(batch, sum)
///   tick                   its own periodic progress check
///   recover(generation)    its own: start the recovery after a failure
///   kill(stage)            chaos: crash stage N (exit reason kill)
///   replan(balance)        re-plan at the next flush; "" lets the planner
///                          decide, "1,1,2" forces layers per stage
///   replicate              console: replicate every stage at the next
///                          version all of them reach
///   snapshot -> weights    every stage's weights merged (after the job)
using train_job_actor = job_actor::extend<
    caf::reacts_to<done_atom, batch_stats>,
    caf::reacts_to<failed_atom, uint32_t, std::string>,
    caf::reacts_to<eval_atom, uint64_t, uint32_t, tensor_payload>,
    caf::reacts_to<ready_atom, uint32_t>,
    caf::reacts_to<reduce_atom, uint64_t, uint32_t, uint64_t, tensor_payload>,
    caf::reacts_to<tick_atom>, caf::reacts_to<recover_atom, uint64_t>,
    caf::reacts_to<dispatch_atom>,
    caf::replies_to<kill_atom, uint32_t>::with<std::string>,
    caf::replies_to<replan_atom, std::string>::with<std::string>,
    caf::replies_to<replicate_atom>::with<std::string>,
    caf::replies_to<snapshot_atom>::with<snapshot_payload>>;

/// The serving job (actors/serve/serve_job.hpp, EdgePipe mode): the job
/// interface, plus requests and what its forward-only stages send it.
///
///   infer(x) -> y          a request: rows of inputs (first dimension) in,
///                          the model's outputs for them out. Queued, merged
///                          with others into micro-batches (dynamic
///                          batching), answered exactly once; an error
///                          `busy` when the queue is full, `bad_config` for
///                          an input of the wrong shape or type
///   eval(mb, 0, y)         the last stage's outputs for micro-batch mb
///   ready(stage)           a stage pulled its layers
///   failed(stage, what)    a stage gave up (its down message follows)
///   done(stats)            a stage's busy time since its last report
///   tick                   its own: stats, timeouts
///   dispatch               its own: a batching deadline came
///   kill(stage)            chaos: crash stage N
///   replan(balance)        re-plan now, without stopping the service
///   snapshot -> weights    every layer's weights (the central holder's)
using serve_job_actor = job_actor::extend<
    caf::replies_to<infer_atom, tensor_payload>::with<tensor_payload>,
    caf::reacts_to<eval_atom, uint64_t, uint32_t, tensor_payload>,
    caf::reacts_to<ready_atom, uint32_t>,
    caf::reacts_to<failed_atom, uint32_t, std::string>,
    caf::reacts_to<done_atom, batch_stats>, caf::reacts_to<tick_atom>,
    caf::reacts_to<dispatch_atom>,
    caf::replies_to<kill_atom, uint32_t>::with<std::string>,
    caf::replies_to<replan_atom, std::string>::with<std::string>,
    caf::replies_to<replicate_atom>::with<std::string>,
    caf::replies_to<snapshot_atom>::with<snapshot_payload>>;

/// A federated client (actors/federated/fed_client.hpp), one per node:
/// holds its shard of the data (computed on its node) and trains whatever
/// sub-model a round asks for.
///
///   profile -> fed_profile   time a few training batches at each kept
///                            fraction of its spec (ELFISH's time model)
///   round(task)              train the task's sub-model for its epochs from
///                            its weights, then send (update, result) to the
///                            sender; a newer task replaces an unfinished one
///   stop                     abandon the task in hand (the round ended)
///   tick(work)               its own: the next few batches of work `work`
///                            (ticks of replaced work are ignored)
///   part(transfer, offset, total, bytes)
///                            a task's weights in parts, before the task
///                            (actors/clients/weights_parts.hpp)
using fed_client_actor =
    caf::typed_actor<caf::replies_to<profile_atom>::with<fed_profile>,
                     caf::reacts_to<round_atom, fed_task>, caf::reacts_to<stop_atom>,
                     caf::reacts_to<tick_atom, uint64_t>,
                     caf::reacts_to<part_atom, uint64_t, uint64_t, uint64_t, tensor_payload>>;

/// The federated job (actors/federated/fed_job.hpp): the job interface,
/// plus what its clients send and its own timers.
///
///   update(result)         a client's trained delta (or its error)
///   part(transfer, offset, total, bytes)
///                          a client's delta in parts, before its update
///   deadline(round)        its own: round `round` waits no longer
///   tick                   its own: status, metrics, rejoining clients
///   kill(client)           chaos: crash client N (it rejoins next round)
///   replan, replicate      refused with why (no pipeline here)
///   snapshot -> weights    the global model
using fed_job_actor = job_actor::extend<
    caf::reacts_to<update_atom, fed_update>, caf::reacts_to<part_atom, uint64_t, uint64_t, uint64_t, tensor_payload>,
    caf::reacts_to<deadline_atom, uint64_t>,
    caf::reacts_to<tick_atom>, caf::replies_to<kill_atom, uint32_t>::with<std::string>,
    caf::replies_to<replan_atom, std::string>::with<std::string>,
    caf::replies_to<replicate_atom>::with<std::string>,
    caf::replies_to<snapshot_atom>::with<snapshot_payload>>;

/// A split-learning client (actors/split/split_client.hpp), one per node:
/// holds the layers before the cut and its shard of the data (computed on
/// its node).
///
///   get -> (samples, labels)  how many examples its shard has and how many
///                          of them carry each label (the personalised
///                          accuracy weighs the test split by them); an
///                          error if it could not start: no data, a bad cut
///   round(task)            train one local epoch from the task's weights
///                          (or its own): forward, activations across the
///                          cut to the task's server, and either its
///                          gradient back (vanilla, splitfed) or the local
///                          loss (adasplit); then (update, result) to the
///                          sender; a newer task replaces an unfinished one
///   stop                   abandon the round in hand
///   tick(work)             its own: the next batch of work `work`
///   part(transfer, offset, total, bytes)
///                          a task's weights in parts, before the task
using split_client_actor = caf::typed_actor<
    caf::replies_to<caf::get_atom>::with<int64_t, std::vector<int64_t>>,
    caf::reacts_to<round_atom, split_task>, caf::reacts_to<stop_atom>,
    caf::reacts_to<tick_atom, uint64_t>,
    caf::reacts_to<part_atom, uint64_t, uint64_t, uint64_t, tensor_payload>>;

/// The split-learning server (actors/split/split_client.hpp), beside the
/// job: the layers after the cut (adasplit: with a sparse mask over them
/// per client).
///
///   forward(smash) -> reply   train on a batch of activations; the
///                             gradient across the cut when asked for
///   snapshot -> weights       its layers (and masks), for checkpoints and
///                             evaluation
using split_server_actor =
    caf::typed_actor<caf::replies_to<forward_atom, split_smash>::with<split_reply>,
                     caf::replies_to<snapshot_atom>::with<snapshot_payload>>;

/// The split-learning job (actors/split/split_job.hpp): the job interface,
/// plus what its clients send and its own timers.
///
///   update(result)         a client's round is done (or failed)
///   part(transfer, offset, total, bytes)
///                          a client's weights in parts, before its result
///   progress(client, round, batches)
///                          a client is alive and this far into its round
///   tick                   its own: status, metrics, stalls, rejoining clients
///   kill(client)           chaos: crash client N (it rejoins later)
///   replan, replicate      refused with why (no pipeline here)
///   snapshot -> weights    the whole model (client side of client 0)
using split_job_actor = job_actor::extend<
    caf::reacts_to<update_atom, split_result>,
    caf::reacts_to<part_atom, uint64_t, uint64_t, uint64_t, tensor_payload>,
    caf::reacts_to<progress_atom, uint32_t, uint64_t, int64_t>, caf::reacts_to<tick_atom>,
    caf::replies_to<kill_atom, uint32_t>::with<std::string>,
    caf::replies_to<replan_atom, std::string>::with<std::string>,
    caf::replies_to<replicate_atom>::with<std::string>,
    caf::replies_to<snapshot_atom>::with<snapshot_payload>>;

// ---- the cluster protocol: the long-lived supervisor on the central device

/// The cluster supervisor (actors/cluster/cluster_supervisor.hpp). It knows
/// nodes, not layers: membership, admission with the cluster secret,
/// heartbeats, profiling rounds and link probes, consoles. It is what
/// `--listen` publishes: consoles and joining nodes talk to it, and it
/// passes a job's commands on to the job.
///
///   submit(job) -> members         a job attaches; answered once every node
///                                  of the cluster file answered hello
///   profile(model, mbs) -> profile every live node profiles the model, then
///                                  their links are measured pair by pair
///   probe(names, budget ms) -> profile   the links among those live nodes
///                                  measured again, pair by pair, no probe
///                                  starting after the budget (no devices)
///   join(node, name) -> text       a node (new, or back) offers itself: the
///                                  same admission as at hello, then the job
///                                  is told
///   kill(node name) / slow(node name, f) / cut(node name, seconds) -> text
///                                  chaos / emulation on one node
///   auth -> challenge; auth(proof) -> "authenticated"
///                                  a console proves the cluster secret; with
///                                  a secret set, every command that changes
///                                  something needs it
///   capacity(node, f)              a profiler's report, passed to the job
///   get, events, pause, resume, checkpoint, kill(stage), replan, replicate,
///   snapshot                       the job's, passed on to it
///   tick                           its own heartbeat round
///   leave                          quit (the job stops its own workers)
using cluster_actor = caf::typed_actor<
    caf::replies_to<submit_atom, caf::actor>::with<std::vector<cluster_member>>,
    caf::replies_to<profile_atom, std::string, uint32_t>::with<cluster_profile>,
    caf::replies_to<probe_atom, std::vector<std::string>,
                    uint32_t>::with<cluster_profile>,
    caf::replies_to<join_atom, caf::actor, std::string>::with<std::string>,
    caf::replies_to<kill_atom, std::string>::with<std::string>,
    caf::replies_to<slow_atom, std::string, double>::with<std::string>,
    caf::replies_to<cut_atom, std::string, double>::with<std::string>,
    caf::replies_to<auth_atom>::with<std::string>,
    caf::replies_to<auth_atom, std::string>::with<std::string>,
    caf::reacts_to<capacity_atom, std::string, double>,
    caf::replies_to<caf::get_atom>::with<job_status>,
    caf::replies_to<events_atom, uint64_t>::with<std::vector<std::string>>,
    caf::replies_to<pause_atom>::with<std::string>,
    caf::replies_to<resume_atom>::with<std::string>,
    caf::replies_to<checkpoint_atom, std::string>::with<std::string>,
    caf::replies_to<stop_atom, std::string>::with<std::string>,
    caf::replies_to<kill_atom, uint32_t>::with<std::string>,
    caf::replies_to<replan_atom, std::string>::with<std::string>,
    caf::replies_to<replicate_atom>::with<std::string>,
    caf::replies_to<snapshot_atom>::with<snapshot_payload>, caf::reacts_to<tick_atom>,
    caf::reacts_to<leave_atom>>;

// ---- short-lived helpers of the training job

/// A recovery round (actors/replication/recovery_round.hpp): asks every
/// source it was given for its inventory, each with a bounded timeout, and
/// answers recover -> the decision (or an error, as data). Killed when a
/// newer failure supersedes it.
using recovery_round_actor =
    caf::typed_actor<caf::replies_to<recover_atom>::with<recovery_decision>>;

/// A launcher (actors/pipeline/launcher.hpp): connects pipeline neighbours,
/// spawns one stage per spec on its node, and answers launch -> the stages
/// (or which one failed and why). It does not wire them: the job does.
using launcher_actor =
    caf::typed_actor<caf::replies_to<launch_atom>::with<launch_result>>;

} // namespace salamander
