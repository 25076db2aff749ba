// What `salamander federate` and `salamander split` share: one client per
// node, on local nodes of this process (--clients N, each device emulated at
// its share of a core) or on the node processes of a cluster file; the
// supervisor published with --listen; SIGINT and SIGTERM stop the job after
// its last whole round.
#pragma once

#include "actors/job/runner.hpp"
#include "apps/progress.hpp"

#include <caf/all.hpp>

#include <functional>
#include <string>
#include <vector>

namespace salamander::apps {

/// The options every client job takes.
struct client_job_options {
  int clients = 0;           ///< embedded: this many local nodes, one client each
  std::string client_shares; ///< embedded: relative speeds, e.g. 1,1,0.1 (EMULATED)
  std::string cluster;       ///< or the nodes of a cluster file
  std::string secret_file;
  std::string tls;
  std::string listen;
  int threads = 1;
  double hang_timeout_s = 3.0;
  bool fetch_weights = false;
};

/// The client-job options of a command's options (federate, split: the
/// same names).
template <class Cli> client_job_options client_options_of(const Cli& cli) {
  client_job_options o;
  o.clients = cli.clients;
  o.client_shares = cli.client_shares;
  o.cluster = cli.cluster;
  o.secret_file = cli.secret_file;
  o.tls = cli.tls;
  o.listen = cli.listen;
  o.threads = cli.threads;
  o.hang_timeout_s = cli.hang_timeout_s;
  o.fetch_weights = !cli.save.empty();
  return o;
}

/// --checkpoint and --resume: resuming needs an existing file, and a new
/// run never overwrites one. Throws std::invalid_argument saying what to do.
void check_checkpoint_options(const std::string& checkpoint, bool resume);

/// --metrics: "none" off, "" the default path under runs/.
std::string metrics_path_of(const std::string& option);

/// "1,1,0.1" -> {1, 1, 0.1}; throws std::invalid_argument naming the entry.
std::vector<double> parse_shares(const std::string& text);

/// Runs a job over the clients `o` names. `run` starts it (with the cluster
/// secret, the nodes, and the options to pass on); `on_status` sees every
/// status polled. Throws std::invalid_argument for options that do not fit
/// together, before anything starts.
actors::job_result run_client_job(
    const client_job_options& o, const std::string& subsystem,
    const std::function<actors::job_result(caf::actor_system&, const std::string& secret,
                                           std::vector<actors::remote_node>,
                                           const actors::job_options&)>& run,
    const std::function<void(const job_status&, progress_line&)>& on_status);

} // namespace salamander::apps
