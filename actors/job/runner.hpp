// Running one job to its end from a thread that is not an actor (the CLI,
// tests, benchmarks): spawn the supervisor, poll its status, collect the
// final weights.
#pragma once

#include "actors/supervisor.hpp"

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
  /// Called once with the supervisor's handle (consoles, chaos, tests).
  std::function<void(supervisor_actor)> on_start;
};

job_result run_job(caf::actor_system& sys, const job_config& cfg, std::vector<remote_node> nodes,
                   std::shared_ptr<const models::dataset> train,
                   std::shared_ptr<const models::dataset> test, const job_options& opts = {});

} // namespace salamander::actors
