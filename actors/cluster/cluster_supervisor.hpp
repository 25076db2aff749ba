// The cluster supervisor: long-lived, on the central device, one per
// cluster. It knows nodes, not layers, batches or rounds.
//
//   admitting --(every node answered hello)--> admitted
//       |                                          |
//       |  hello: protocol check, both sides       |  heartbeats every second
//       |  prove the cluster secret                |  node down_msg -> job: lost(n, why)
//       '------------------------------------------'  join: the same admission -> job:
//       join                                          join(n)
//
// A lost node that listens somewhere is dialled again, with a growing wait
// between attempts, for as long as the cluster runs: the same process after
// an outage of its link or a SIGSTOP/SIGCONT, or a new process on its port,
// goes through the same admission (the secret, both ways) and is handed to
// the job as a join; the job plans it in at its next flush, or resumes onto
// it when it was paused for capacity. Admission tells the node to stop any
// stage it still runs from before: the job recovered without them. A node
// handed over without a handle (a resumed job's that did not answer) is
// lost from the start, and dialled again like any other.
//
// Jobs attach with submit(job) and get the admitted members once admission
// is done. Several jobs may share the cluster (a server's models, each its
// own serving job): every one hears of each loss, join and cluster event;
// the first attached is the one consoles command and read; a job asks it for profiling
// rounds (every live node profiles the model, then their links are measured pair by
// pair). Consoles prove the secret here (auth); the node commands (kill node, slow node)
// are its own, the job commands are passed on to the job once the console is allowed to
// give them.
//
// Why a separate actor: every mode (training, serving, federated, split)
// needs membership, admission, heartbeats, profiling and the console; the
// job supervisors that use them are peers, each with only its own protocol.
#pragma once

#include "actors/cluster/cluster_file.hpp"
#include "actors/tuning.hpp"
#include "messages/interfaces.hpp"

#include <chrono>
#include <map>
#include <set>
#include <vector>

namespace salamander::actors {

/// Timeouts and periods of the cluster supervisor, with their defaults.
struct cluster_config {
  /// The cluster secret nodes and consoles must prove ("": an open cluster).
  std::string secret;
  std::chrono::milliseconds hello_timeout = tuning::hello_timeout;
  /// A node that takes longer to profile a model fails the round.
  std::chrono::milliseconds profile_timeout = tuning::profile_timeout;
  /// One link probe (pings and 256 KB transfers between two nodes).
  std::chrono::milliseconds probe_timeout = tuning::link_probe_timeout;
  /// Every period each live node is asked how it is (the console's `nodes`
  /// shows when it last answered); detection itself is CAF's (connection
  /// loss, connection timeout).
  std::chrono::milliseconds heartbeat_period = tuning::heartbeat_period;
  std::chrono::milliseconds heartbeat_timeout = tuning::heartbeat_timeout;
  /// A node that has not answered for this long shows as "late".
  double late_after_s = tuning::late_after_s;
  /// A lost node is dialled again after this, doubling up to the longest
  /// wait; one attempt may take the timeout.
  std::chrono::milliseconds redial_first = tuning::redial_first;
  std::chrono::milliseconds redial_longest = tuning::redial_longest;
  std::chrono::milliseconds redial_timeout = tuning::redial_timeout;
};

/// The cluster supervisor's settings for a job whose configuration names
/// its `secret`, a `node_timeout` (hello) and a `profile_timeout` (the
/// serving and federated jobs; training has its own, in job/runner.hpp).
template <class JobConfig> cluster_config cluster_config_for(const JobConfig& job) {
  cluster_config c;
  c.secret = job.secret;
  c.hello_timeout = job.node_timeout;
  c.profile_timeout = job.profile_timeout;
  return c;
}

struct cluster_entry {
  std::string name;
  node_actor handle;
  std::string host;
  uint16_t port = 0;
  node_info info;
  bool answered = false; ///< hello came back (admitted or refused)
  bool refused = false;  ///< failed admission: never part of a job
  bool lost = false;     ///< went away (down_msg)
  std::string why;
  std::chrono::steady_clock::time_point last_seen{};
  /// A lost node that listens somewhere is dialled again until it answers
  /// (the same process after an outage or SIGCONT, or a new one on its
  /// port), then admitted like a joining node.
  bool redialling = false;
  int redials = 0; ///< failed in a row (the wait between them doubles)
  std::chrono::steady_clock::time_point next_redial{};
};

struct cluster_state {
  static inline const char* name = "cluster_supervisor";
  cluster_config cfg;
  std::vector<cluster_entry> nodes;
  size_t hello_pending = 0;
  bool admitted = false;
  /// A problem that ends every job (another protocol, no answer to hello).
  std::string fatal;
  /// The jobs attached, in the order they came: each hears of every loss
  /// and join; the first is the one consoles talk to (status, commands).
  std::vector<caf::actor> jobs;
  std::vector<caf::typed_response_promise<std::vector<cluster_member>>> submits;
  /// consoles that proved the cluster secret, and challenges handed out
  std::set<caf::actor_addr> consoles;
  std::map<caf::strong_actor_ptr, std::string> console_challenges;
};

/// `nodes` are connected (or in this process) and named already.
cluster_actor::behavior_type
cluster_supervisor(cluster_actor::stateful_pointer<cluster_state> self,
                   cluster_config cfg, std::vector<remote_node> nodes);

} // namespace salamander::actors
