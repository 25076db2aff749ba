// The node actor: one per device process (`salamander node`), or several in
// one process for the embedded mode.
//
// It answers hello with who it is (name, protocol, threads), checks every
// stage it is asked to run against its own build of the model zoo (a node
// built from other sources describes the model differently and is refused
// by fingerprint), spawns the stage locally and hands back its handle.
// leave stops every stage it runs: SIGTERM on a node process ends in leave.
// Until a supervisor proves the cluster secret (auth), it refuses to spawn,
// profile, slow down or kill itself.
//
// When its supervisor goes away (its process died or was cut off), the node
// keeps its stages and replicas for `supervisor_grace`: the same supervisor
// back from an outage, or a restarted one (`supervisor --resume`), gets the
// node back. After the grace it drops the job (stops the stages, empties
// its replica holder, gives the memory back to the system) and goes back to
// idle, or leaves (`leave_without_supervisor`). A supervisor that ends its
// job (it quits, and the node hears so before the connection closes) is not
// waited for: the node drops the job at once. A supervisor other than the
// last one (a new job, a restarted supervisor) is given a fresh, empty
// replica holder: replicas of an earlier job must never be mistaken for the
// new one's (same model, same version numbers) nor keep its memory.
//
//   idle --auth--> serving --supervisor down--> orphaned --grace over--> idle
//                     ^                            |                 (or leave)
//                     '------------auth------------'
#pragma once

#include "actors/node/emulation.hpp"
#include "messages/interfaces.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace salamander::actors {

struct node_config {
  std::string name;
  std::string host;
  int32_t threads = 1;
  node_emulation emulation;
  /// The device's type, whose nodes are planned from one profile (`node
  /// --device-type`; "": the profiler's device_type()).
  std::string device_type;
  /// The cluster secret ("" : none, an open cluster; see actors/auth.hpp).
  std::string secret;
  /// The port it listens on, once published (hello reports it).
  std::shared_ptr<std::atomic<uint16_t>> port;
  /// The profiler runs on its own thread, so that its measurements do not
  /// wait behind stages. Deterministic tests (CAF's test coordinator, one
  /// thread for every actor) turn it off.
  bool detached_profiler = true;
  /// `node --data DIR`: federated clients here train on this node's own
  /// data (the training split in DIR) instead of a shard of the experiment's.
  std::string data_dir;
  /// How long a node whose supervisor went away keeps its stages and
  /// replicas (0: drops them at once).
  std::chrono::milliseconds supervisor_grace{120000};
  /// Called (from the node's thread) when the grace ran out, to end the
  /// process cleanly (`node --leave-without-supervisor`); empty: stay idle.
  std::function<void()> leave;
};

struct node_state {
  static inline const char* name = "node";
  node_config config;
  std::vector<caf::actor> stages; ///< and federated clients
  profiler_actor profiler;
  replica_holder_actor holder;
  /// A supervisor proved the cluster secret (in-process nodes: always).
  bool authenticated = false;
  std::string challenge; ///< the last one this node gave a supervisor
  /// The supervisor that authenticated this node last (monitored), and the
  /// one whose admission hello was answered with `fresh_holder`.
  caf::actor_addr supervisor;
  caf::actor_addr admitting;
  replica_holder_actor fresh_holder; ///< handed to a new supervisor at hello
  /// While orphaned: the actor whose end (after the grace) drops the job.
  caf::actor grace_timer;
};

/// Why `spec` cannot run here, or "" when it can. `memory_cap` (bytes, 0:
/// none) is the node's emulated memory.
std::string check_stage_spec(const stage_spec& spec, double memory_cap = 0);

/// How glibc keeps freed memory. While the node computes (`computing`):
/// 64 MB free at the top of each arena and blocks of up to 32 MB taken from
/// the arenas, so a tensor does not fault its pages in again after every
/// free. When its job is gone: little at the tops and blocks of 256 KB and
/// more in their own mappings, so the frees of the job's tensors give the
/// memory back. A node process sets it at start, on every stage or client
/// spawn, and drops it before a job's stages go.
void keep_freed_memory(bool computing);

/// CAF 0.17 keeps each connection's buffers at the largest size they ever
/// reached (caf::io::network::stream): its two write buffers (the one being
/// written and the one filling, swapped) and its receive buffer (as large
/// as the largest message: a micro-batch's activations, measured 13 MB on a
/// ViT-Small node after its job). Frees, in the network loop that owns
/// them, the filling write buffer of every idle connection and every
/// connection's receive buffer beyond the bytes of the read under way
/// (the next message's header, when idle); once a heartbeat has been
/// written since, the other write buffer is the filling one, so a second
/// call frees it too. `done`, when given, gets the bytes freed, on the
/// network thread (nothing when the system has no middleman).
void release_connection_buffers(caf::actor_system& sys,
                                std::function<void(size_t)> done = {});

node_actor::behavior_type node(node_actor::stateful_pointer<node_state> self, node_config cfg);

} // namespace salamander::actors
