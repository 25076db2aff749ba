// A serving job driven from a thread that is not an actor: `salamander infer`
// (a data set through the pipeline), `salamander serve` (the HTTP front end
// asks it), tests and benchmarks. `service` spawns the cluster supervisor
// over the nodes and the serving job under it, and stops both when it goes.
#pragma once

#include "actors/cluster/cluster_supervisor.hpp"
#include "actors/serve/serve_job.hpp"

#include <functional>

namespace salamander::actors {

class service {
public:
  service(caf::actor_system& sys, serve_config cfg, std::vector<remote_node> nodes);
  /// A serving job on a cluster another owner runs (a server's further
  /// models): the cluster outlives this service.
  service(caf::actor_system& sys, serve_config cfg, cluster_actor shared);
  ~service();
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  const cluster_actor& cluster() const { return cluster_; }
  const serve_job_actor& job() const { return job_; }
  caf::actor_system& system() const { return sys_; }
  const serve_config& config() const { return cfg_; }

  /// The job's status (phase "unknown" with the error when it does not answer).
  job_status status() const;
  /// Waits until the job serves (true), or has failed (false: status().error
  /// says why), polling every `poll` and reporting each status.
  bool
  wait_serving(std::chrono::milliseconds limit,
               const std::function<void(const job_status&)>& on_status = {},
               std::chrono::milliseconds poll = std::chrono::milliseconds(100)) const;
  /// Asks the job to stop (answer what it accepted, refuse the rest) and
  /// waits for it to finish, up to `limit`; the final status.
  job_status stop(const std::string& why,
                  std::chrono::milliseconds limit = std::chrono::seconds(60));
  /// One request, blocking (the HTTP handlers): the outputs, or the error.
  caf::expected<torch::Tensor> infer(const torch::Tensor& x) const;

private:
  caf::actor_system& sys_;
  serve_config cfg_;
  cluster_actor cluster_;
  serve_job_actor job_;
  bool owns_cluster_ = true;
  bool stopped_ = false;
};

struct inference_result {
  job_status status;
  torch::Tensor outputs; ///< one row per input row, in order
  double seconds = 0;    ///< first request sent -> last answer
  /// When each answer came (seconds after the first request was sent), in
  /// the order they came, with the rows it carried.
  std::vector<std::pair<double, int64_t>> answers;
  std::string error; ///< "" when every request was answered

  /// Rows per second once the pipeline is full: over the answers after the
  /// first `skip` of them (a fraction), to the last.
  double steady_rate(double skip = 0.2) const;
};

struct inference_options {
  /// Requests in flight at once (each of `request_rows` rows); 0: enough
  /// to keep the pipeline full (4 per stage, at least 8).
  size_t outstanding = 0;
  int64_t request_rows = 0; ///< 0: the job's maximum batch
  /// Called every `poll` with the status and the rows answered so far.
  std::function<void(const job_status&, int64_t rows_done)> on_progress;
  std::chrono::milliseconds poll{500};
};

/// Streams `inputs` (rows first) through the service as requests and
/// gathers the outputs in order. Waits for the service to serve first.
inference_result infer_all(service& s, const torch::Tensor& inputs,
                           const inference_options& opts = {});

} // namespace salamander::actors
