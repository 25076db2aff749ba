// The served model as both protocol fronts see it (HTTP: http_front, gRPC:
// grpc_front): its names and shapes, one inference from a request already
// read, the 404 for a name or version it is not, and the counters every
// request goes into whichever front it came through (Triton's statistics,
// the salamander_* series). No LibTorch and no transport in this header: the
// gRPC front includes it and stays out of the LibTorch translation units.
#pragma once

#include "apps/infer_request.hpp"
#include "apps/triton_reports.hpp"
#include "messages/job.hpp"

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace at {
class Tensor;
} // namespace at

namespace salamander::actors {
class service;
} // namespace salamander::actors

namespace salamander::models {
struct model_desc;
} // namespace salamander::models

namespace salamander::apps {

/// The latency histogram's bounds (seconds).
constexpr std::array<double, 14> latency_buckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

/// An inference's outcome: the outputs, or an HTTP status and why (each
/// front maps the status to its own: gRPC's INVALID_ARGUMENT for 400, ...).
struct infer_outcome {
  int status = 200;
  std::string error;
  std::vector<int64_t> shape;
  std::vector<float> values;
  /// The version that answered ("": this endpoint's; another when a
  /// reload replaced it while the request was on its way).
  std::string version;
};

/// Every request the model was asked, through any front.
struct request_counters {
  front_counters triton;
  int64_t answered = 0;
  std::map<int, int64_t> errors; ///< by HTTP status
  std::array<int64_t, latency_buckets.size()> buckets{};
  int64_t latency_count = 0;
  double latency_sum = 0;
};

class model_endpoint {
public:
  using clock = std::chrono::steady_clock;

  model_endpoint(const actors::service& svc, const models::model_desc& desc,
                 std::string name);
  /// One of a server's models: the endpoint keeps its service alive for as
  /// long as a request holds the endpoint (an unloaded model's last answers).
  model_endpoint(std::shared_ptr<actors::service> svc, const models::model_desc& desc,
                 std::string name, std::string version);
  ~model_endpoint();
  model_endpoint(const model_endpoint&) = delete;
  model_endpoint& operator=(const model_endpoint&) = delete;

  const served_model& model() const { return model_; }
  const model_io& io() const { return io_; }
  std::vector<int64_t> output_shape() const; ///< -1 first

  /// The 404's message when `name` (and `version`, if not empty) is not
  /// what this endpoint serves; nullopt when it is.
  std::optional<std::string> unknown(const std::string& name,
                                     const std::string& version) const;

  /// A request arrived (counted as pending until `finished`).
  void arrived();
  /// Runs a request read at `start` through the pipeline (blocking). Its
  /// values are taken over; the rest of it (id, binary output) stays for
  /// the answer.
  infer_outcome infer(infer_request& request, clock::time_point start);
  /// The request that arrived at `start` was answered with `status`; with
  /// outputs, writing its answer began at `output_start`.
  void finished(int status, clock::time_point start,
                std::optional<clock::time_point> output_start = std::nullopt);
  /// Counts an answer that never reached `arrived` (the transport refused it).
  void refused(int status);

  job_status status() const;
  bool ready() const;
  /// Waits until the model's job serves (true), or has failed or is not
  /// serving after `limit` (false; status() says why).
  bool wait_serving(std::chrono::milliseconds limit) const;
  /// Stops the model's serving job once it answered what it accepted (an
  /// endpoint that owns its service); its last status.
  job_status stop(const std::string& why);
  /// A reload replaced this endpoint with `next`: a request that reached
  /// this one as its job stopped is answered by `next` instead of refused.
  void replaced_by(std::shared_ptr<model_endpoint> next);
  request_counters counters() const;
  nlohmann::json stats() const;
  nlohmann::json config() const;
  /// Triton's series, with the serving job's part of `s` (one status a scrape).
  std::string triton_metrics(const job_status& s) const;

private:
  struct answer;
  /// The outputs of `x` from this endpoint's job, or from its successor's
  /// when this one stopped meanwhile.
  answer run(const at::Tensor& x) const;

  std::shared_ptr<actors::service> owned_;
  std::shared_ptr<model_endpoint> successor_; ///< guarded by mutex_
  const actors::service& svc_;
  served_model model_;
  model_io io_;
  std::vector<int64_t> output_shape_;
  mutable std::mutex mutex_;
  request_counters counters_;
};

} // namespace salamander::apps
