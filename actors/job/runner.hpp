// Running one job to its end from a thread that is not an actor (the CLI,
// tests, benchmarks): spawn the cluster supervisor over the nodes and the
// job supervisor under it, poll the job's status, collect the final
// weights, stop both.
#pragma once

#include "actors/cluster/cluster_supervisor.hpp"

#include <functional>
#include <optional>

namespace salamander::actors {

struct job_result {
  job_status status;
  /// The merged weights of every stage, when asked for and the job finished.
  std::optional<models::weight_snapshot> weights;
};

struct job_options {
  bool fetch_weights = false;
  std::chrono::milliseconds poll{200};
  /// Called with every status polled (progress lines).
  std::function<void(const job_status&)> on_status;
  /// Called once with the cluster supervisor's handle (consoles, chaos,
  /// tests): what `--listen` publishes.
  std::function<void(cluster_actor)> on_start;
};

/// Polls `job` (any mode) until it ends, fetches its weights when asked and
/// the job finished (or was stopped), then stops it and `cluster`. A job that
/// does not answer three polls in a row (each within `timeout`) is reported
/// failed.
job_result run_to_end(caf::actor_system& sys, const caf::actor& job,
                      const cluster_actor& cluster, std::chrono::milliseconds timeout,
                      const job_options& opts);

} // namespace salamander::actors
