// Every timeout, period and tuning constant of the actors, with its default,
// in one place. The job and cluster configurations (actors/train/train_job.hpp,
// actors/cluster/cluster_supervisor.hpp) start from these; the ones that no
// option changes are used from here directly.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace salamander::actors::tuning {

using std::chrono::milliseconds;
using std::chrono::seconds;
using namespace std::chrono_literals;

// ---- cluster supervisor
/// A node must answer hello (admission) within this.
inline constexpr milliseconds hello_timeout = 10s;
/// Every period each live node is asked how it is (the console's `nodes`).
inline constexpr milliseconds heartbeat_period = 1s;
inline constexpr milliseconds heartbeat_timeout = 900ms;
/// A node that has not answered for this long shows as "late".
inline constexpr double late_after_s = 2.5;
/// A lost node is dialled again after `redial_first`, the wait doubling up
/// to `redial_longest`; one attempt (connect and handshake) may take
/// `redial_timeout`.
inline constexpr milliseconds redial_first = 500ms;
inline constexpr milliseconds redial_longest = 4s;
inline constexpr milliseconds redial_timeout = 5s;
/// A node that takes longer to profile a model fails the profiling round.
inline constexpr milliseconds profile_timeout = 120s;
/// One link probe (pings and 256 KB transfers between two nodes).
inline constexpr milliseconds link_probe_timeout = 30s;
/// The job's status, relayed to a console.
inline constexpr milliseconds status_timeout = 10s;
/// A job in this process that answers no status request for this long is
/// taken for broken. A federated or split job evaluates every client's model
/// on the whole test split between rounds, in its own handler: six CNN
/// evaluations of 10,000 images took over 30 s on a loaded 2-core host.
inline constexpr milliseconds job_silence_limit = 120s;

// ---- training job
/// Requests to nodes and stages (spawn, snapshots).
inline constexpr milliseconds request_timeout = 10s;
/// Neighbours that take longer to connect are relayed instead.
inline constexpr milliseconds peer_timeout = 6s;
/// The job fails when no batch commits for this long while training.
inline constexpr milliseconds progress_timeout = 60s;
/// A job paused for too little capacity that no node rejoins ends after this.
inline constexpr milliseconds pause_timeout = 300s;
/// The job's own progress check.
inline constexpr milliseconds tick_period = 1s;
/// Continual learning: an epoch of a stream, in batches (without
/// --max-batches), and how often a starved job looks for its next batch.
inline constexpr int64_t stream_epoch = 100;
inline constexpr milliseconds stream_poll = 20ms;
/// Failures noticed within this window are recovered from together.
inline constexpr milliseconds failure_window = 30ms;
/// A recovery round waits this long for a surviving stage's inventory, and
/// this long for a replica holder's.
inline constexpr milliseconds stage_inventory_timeout = 2s;
inline constexpr milliseconds holder_inventory_timeout = 5s;
/// While a recovery round asks for inventories, the links among the
/// survivors of a job planned by measure are probed again, no probe
/// starting after this long.
inline constexpr milliseconds recovery_probe_budget = 300ms;
/// Beyond the bounds of its own steps, how long a launcher or a recovery
/// round may take before the job gives up on it.
inline constexpr milliseconds helper_margin = 5s;
/// Commits over which the recent rate (and a plan's measured batch time)
/// is taken.
inline constexpr size_t recent_commits = 20;
/// Test examples per evaluation message.
inline constexpr int64_t eval_chunk = 500;
/// Re-planning: the predicted gain it needs, commits after the last re-plan
/// before the next, wall time between two looks (by time, not commits: a
/// stage slowed 10x commits 10x less often).
inline constexpr double replan_gain = 0.15;
inline constexpr int64_t replan_min_batches = 20;
inline constexpr milliseconds replan_look_every = 500ms;
/// Looks in a row that must each predict a candidate plan faster by the
/// gain before it is taken (algorithms/replan.hpp).
inline constexpr int replan_window = 6;
/// ... over at least this long (a host's load moves between its cores in
/// seconds; replan_stability saw a plan 44% better for 40 commits, 1.2 s,
/// then not).
inline constexpr milliseconds replan_sustain = 3s;
/// Each capacity move raises the gain the next must show; a move weighs
/// half as much this long after it (algorithms/replan.hpp). replan_stability
/// saw equal nodes move 27-32% apart at 61 s and 134 s of a 5-minute run
/// as a busy process changed cores.
inline constexpr milliseconds replan_damping_half_life = 120s;
/// Commits, and wall time, for which a plan's measured batch time bounds
/// its predictions (and the last re-plan's error scales the next): both
/// must pass. A CNN commits 100 batches a second; by commits alone it
/// forgot in 5 s, and a job moved back and forth between single-device
/// plans it had measured (dashboard test on a loaded 2-core host).
inline constexpr uint64_t measured_plan_memory = 500;
inline constexpr seconds measured_plan_memory_time = 60s;
/// What a re-plan is taken to cost before one has been measured.
inline constexpr double replan_pause_estimate_s = 0.25;

// ---- stages
/// Replicated snapshots a stage keeps of its own layers (recovery asks for
/// them when the holder of its chain replica died); the planner counts them.
inline constexpr size_t stage_kept_snapshots = 2;
/// Gradient values per chunk of the data-parallel chain reduce (1 MB of
/// float32): a member passes a chunk on while the next one arrives, so the
/// chain's links carry the sum at once; smaller chunks cost a message each.
inline constexpr int64_t dp_chunk_values = 256 * 1024;
/// The async schedule's longest row of batches (a drain and fill at its
/// end, no change of weight versions); rows end at epochs too, and where
/// the job asks for a drain (a stop, checkpoint, re-plan or pause).
inline constexpr uint32_t async_row_batches = 500;
/// The async schedule's default slack (job_config::async_slack): 2, as
/// bench bubble measured against FTPipeHD's 1.
inline constexpr uint32_t async_slack = 2;
/// A re-planned or recovering stage pulls its layers from each source in
/// parts of whole layers of about this many weight bytes (a layer larger
/// than it is one part; its optimizer state comes with it), at most
/// pull_window_parts asked of one source at a time, each part within
/// pull_timeout.
inline constexpr size_t pull_part_bytes = 4 * 1024 * 1024;
inline constexpr size_t pull_window_parts = 2;
inline constexpr milliseconds pull_timeout = 30s;

// ---- replication (actors/replication/replica_store.hpp, snapshot_parts)
/// A snapshot for a holder in another process goes in parts of this size:
/// each must arrive within the receiver's connection timeout (at the
/// supervisor --hang-timeout, 3 s by default, at least 1.5 s). 256 KiB take
/// 0.5 s at 4 Mbit/s.
inline constexpr size_t snapshot_part_bytes = 256 * 1024;
/// A snapshot's parts a courier has sent and the holder not yet taken
/// (replica_holder.hpp, replica_courier): what one node-to-node connection
/// holds of it at most. CAF 0.17's connection keeps its write buffer at the
/// largest size it ever reached, so sending all parts at once left a node
/// holding a whole snapshot (122 MiB for ViT-Small) after the job.
inline constexpr size_t snapshot_window_parts = 8;
/// A courier gives up on a holder that takes none of its parts for this
/// long (a holder that died is noticed at once, by its down message).
inline constexpr milliseconds part_ack_timeout = 60s;
/// Unfinished transfers in parts a holder keeps (one per courier under way;
/// a courier that gave up leaves its part-filled buffer until this many
/// newer ones push it out).
inline constexpr size_t holder_pending_transfers = 32;
/// Weights in parts a round job, or a client, keeps under way or arrived
/// and not yet taken (actors/clients/weights_parts.hpp): one per sending
/// client and round; past it the oldest are dropped.
inline constexpr size_t round_pending_transfers = 64;

// ---- serving (actors/serve/serve_job.hpp)
/// A serving stage reports its busy time at most this often.
inline constexpr milliseconds serve_stage_report = 500ms;
/// Rows merged into one micro-batch (dynamic batching's maximum batch), and
/// how long the oldest waiting request may wait for others to join it.
inline constexpr int64_t serve_max_batch = 16;
inline constexpr milliseconds serve_batch_delay = 5ms;
/// Requests accepted and not yet answered; beyond this the job answers busy.
inline constexpr size_t serve_max_queue = 256;
/// A request not answered within this fails (the caller sees a timeout).
inline constexpr milliseconds serve_request_timeout = 30s;
/// The job's own period: stats lines, request timeouts, stalled launches.
inline constexpr milliseconds serve_tick = 100ms;
/// Latencies kept for the percentiles (the most recent ones).
inline constexpr size_t serve_latency_window = 2000;
/// A re-plan's old pipeline may take this long to answer what it holds
/// before it is stopped and the rest is sent again.
inline constexpr milliseconds serve_drain_timeout = 5s;

// ---- nodes and profilers
/// A node connecting to its pipeline neighbour (node `peer`).
inline constexpr milliseconds connect_timeout = 5s;
/// A node answers `kill` before it SIGKILLs itself (and `cut` before its
/// link goes silent).
inline constexpr milliseconds kill_delay = 50ms;
/// The longest EMULATED link cut a console may ask for (`cut node`).
inline constexpr seconds cut_longest = 600s;
/// Link probes: one ping round trip, one 256 KB transfer.
inline constexpr milliseconds ping_timeout = 10s;
inline constexpr milliseconds transfer_timeout = 30s;
/// Capacity probes: one every period; reported every `report_every`, and at
/// once when the capacity drifts by more than `drift`.
inline constexpr milliseconds capacity_period = 2s;
inline constexpr milliseconds capacity_report_every = 30s;
inline constexpr double capacity_drift = 0.2;

} // namespace salamander::actors::tuning
