// What the serving benchmarks share: serving a model on EMULATED devices
// (node processes with CPU quotas) and measuring its steady rate.
#pragma once

#include "actors/node/node_process.hpp"
#include "actors/serve/inference.hpp"
#include "bench/benches.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace salamander::bench {

struct measured {
  double rate = 0; ///< rows per second
  std::string plan;
  std::string error;
};

// Serves `inputs` on node processes with these CPU shares: a warm-up of
// `warm` rows, then enough rows for about `seconds` at the warm-up's rate.
inline measured serve_rate(caf::actor_system& sys, const std::vector<double>& shares,
                           actors::serve_config sc, const torch::Tensor& inputs,
                           int64_t warm, double seconds, const std::string& prefix) {
  measured m;
  actors::process_cluster procs(static_cast<int>(shares.size()), prefix, quotas(shares));
  auto nodes = connected_nodes(sys, procs.nodes());
  actors::service svc(sys, sc, nodes);
  actors::inference_options o;
  o.request_rows = sc.max_batch;
  auto w = actors::infer_all(svc, inputs.narrow(0, 0, warm), o);
  if (!w.error.empty()) {
    m.error = w.error;
    return m;
  }
  double warm_rate = static_cast<double>(warm) / std::max(w.seconds, 1e-6);
  // at least eight windows' worth of micro-batches: the steady state must
  // outlast the fill and the drain
  auto window = sc.in_flight > 0 ? sc.in_flight : static_cast<int>(2 * shares.size());
  int64_t windows = shares.size() > 1 ? 8 : 4; // one device has no fill to outlast
  auto rows = std::max(static_cast<int64_t>(warm_rate * seconds),
                       windows * static_cast<int64_t>(window) * sc.max_batch);
  rows = std::min<int64_t>(rows, inputs.size(0));
  auto r = actors::infer_all(svc, inputs.narrow(0, 0, rows), o);
  if (!r.error.empty()) {
    m.error = r.error;
    return m;
  }
  m.rate = r.steady_rate();
  m.plan = r.status.plan;
  svc.stop("benchmark");
  std::fprintf(stderr, "  %-40s %8.2f rows/s  %s\n", prefix.c_str(), m.rate,
               m.plan.c_str());
  return m;
}

// A service kept up on its own node processes, to be measured in rounds
// alternating with another (side by side on a noisy host): each round
// streams `rows` and takes the steady rate.
// CPU seconds a process has used so far: its threads' run time
// (/proc/PID/task/*/schedstat, nanoseconds; threads that have ended are not
// counted).
inline double process_cpu_s(pid_t pid) {
  double total = 0;
  std::error_code ec;
  auto dir = "/proc/" + std::to_string(pid) + "/task";
  for (auto& t : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream in(t.path() / "schedstat");
    double ns = 0;
    if (in >> ns) {
      total += ns * 1e-9;
    }
  }
  return total;
}

class served {
public:
  /// `dilate`: EMULATE the shares by compute-time dilation, not quotas
  /// (bench/benches.hpp, emulated_shares).
  served(caf::actor_system& sys, const std::vector<double>& shares,
         actors::serve_config sc, const std::string& prefix, bool dilate = false)
      : prefix_(prefix),
        procs_(static_cast<int>(shares.size()), prefix, emulated_shares(shares, dilate)),
        svc_(std::make_unique<actors::service>(sys, sc,
                                               connected_nodes(sys, procs_.nodes()))) {}
  served(const served&) = delete;
  served& operator=(const served&) = delete;
  ~served() { svc_->stop("benchmark"); }

  /// The steady rate of streaming these rows, rows/s (0 and error() on a
  /// failure); logs it with the plan.
  double rate(const torch::Tensor& rows) {
    actors::inference_options o;
    o.request_rows = svc_->config().max_batch;
    // twice the pipeline's micro-batches in flight waiting at the job, so
    // that the pipeline never waits for the client
    o.outstanding = static_cast<size_t>(std::max(8, 2 * svc_->config().in_flight));
    double cpu0 = cpu_s();
    auto r = actors::infer_all(*svc_, rows, o);
    if (!r.error.empty()) {
      error_ = r.error;
      return 0;
    }
    double cpu = cpu_s() - cpu0;
    plan_ = r.status.plan;
    auto rate = r.steady_rate();
    // what the nodes used: a quota that throttles at the kernel's tick can
    // give a process more or less than its share, and the per-row CPU
    // shows what each row cost them
    double used_share =
        cpu / std::max(r.seconds, 1e-9) / static_cast<double>(procs_.nodes().size());
    std::fprintf(
        stderr,
        "  %-16s %8.2f rows/s over %lld rows; nodes used %.3f core each, %.1f ms "
        "CPU a row  %s\n",
        prefix_.c_str(), rate, static_cast<long long>(rows.size(0)), used_share,
        1e3 * cpu / static_cast<double>(rows.size(0)), plan_.c_str());
    return rate;
  }
  const std::string& plan() const { return plan_; }
  const std::string& error() const { return error_; }

private:
  /// The nodes' CPU seconds so far, summed.
  double cpu_s() {
    double total = 0;
    for (size_t i = 0; i < procs_.nodes().size(); ++i) {
      total += process_cpu_s(procs_[i].pid());
    }
    return total;
  }

  std::string prefix_;
  actors::process_cluster procs_;
  std::unique_ptr<actors::service> svc_;
  std::string plan_, error_;
};

} // namespace salamander::bench
