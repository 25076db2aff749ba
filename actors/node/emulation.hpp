// Device emulation on one host, for tests, benchmarks and trying a cluster
// on a laptop. Every figure produced under emulation says so; real
// deployments set none of this.
//
//   --cpu-share 0.25     a device a quarter as fast as one core of this host:
//                        a cgroup CPU quota where the host lets us write one
//                        (v2 cpu.max, or v1 cpu.cfs_quota_us), otherwise
//                        compute-time dilation (an operation that took c of
//                        CPU ends no sooner than c / share after it began:
//                        `device_time`)
//   --dilate             dilation even where a cgroup could be written, and
//                        at a share of 1 too (the device's time is its CPU
//                        time: the host's other load is not the device's)
//   --mem-mb 512         memory cap: the planner plans with it and the node
//                        refuses stages that would not fit
//   --link-mbps 100      link rate: sends are delayed by bytes / rate
//   --cpus 1             pin the device to host CPU 1 (devices emulated on one
//                        host then do not take each other's cores)
//   --capacity-trace 30:0.2,60:1
//                        at 30 s run at 0.2 of the share, at 60 s at 1 again
//                        (thermal throttling, another app)
//   console `cut node NAME SECONDS`
//                        a link outage: the node's network loop stalls, so
//                        nothing goes in or out while its connections stay
//                        open and its process runs on (node.cpp, on_cut)
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace salamander::actors {

struct emulation_config {
  double cpu_share = 1.0;
  int64_t mem_mb = 0;      ///< 0: no cap
  double link_mbps = 0;    ///< 0: no shaping
  std::vector<std::pair<double, double>> trace; ///< (seconds since start, factor)
  bool force_dilation = false; ///< do not try cgroups (tests)
  /// Count the device's CPU time even at a share of 1 (`--dilate`): a
  /// device emulated on a loaded host takes its CPU time, not the wall time
  /// the host's other work stretched (a full-core device beside slower ones
  /// would otherwise alone pay for that load). Implies force_dilation.
  bool count_cpu_time = false;
  std::vector<int> cpus;       ///< pin to these host CPUs (empty: any)

  bool any() const {
    return cpu_share < 1.0 || mem_mb > 0 || link_mbps > 0 || !trace.empty() ||
           !cpus.empty() || count_cpu_time;
  }
  std::string describe() const;
};

/// "1,2" -> {1, 2}; throws std::invalid_argument naming the bad entry or a
/// CPU this host does not have.
std::vector<int> parse_cpus(const std::string& text);

/// Pins this process (the calling thread and every thread it starts later)
/// to `cpus`; throws std::runtime_error when the kernel refuses.
void pin_to_cpus(const std::vector<int>& cpus);

/// "30:0.2,60:1" -> {(30, 0.2), (60, 1)}; throws std::invalid_argument.
std::vector<std::pair<double, double>> parse_trace(const std::string& text);

/// Slows this process down to a share of a core. One per node process.
class cpu_limiter {
public:
  explicit cpu_limiter(emulation_config cfg);
  ~cpu_limiter();
  /// Ends the emulation now: stops the trace, moves the process out of its
  /// cgroup and removes the group. Idempotent; the destructor calls it.
  void release();
  cpu_limiter(const cpu_limiter&) = delete;
  cpu_limiter& operator=(const cpu_limiter&) = delete;

  /// The share in force now (base share x trace factor).
  double share_now() const;
  /// "cgroup v2 cpu.max", "cgroup v1 cfs quota", "compute-time dilation", "none"
  const std::string& method() const;
  /// Multiplier from measured to emulated compute time (1 with a cgroup,
  /// whose throttling is already in the measurement).
  double dilation() const;
  /// For profiling: emulated seconds per second of CPU time (1/share when
  /// emulating, whatever the method), or 0 on a real device (use wall time).
  double cpu_time_factor() const { return limited() ? 1.0 / share_now() : 0.0; }
  bool limited() const {
    return method_ != by_none && (share_now() < 1.0 || cfg_.count_cpu_time);
  }
  /// Emulating by compute-time dilation (device time = CPU time / share).
  bool dilating() const { return method_ == by_dilation; }
  /// Slows the device to `factor` of its share from now on, overriding the
  /// trace (the console's `slow node NAME FACTOR`, tests). 1 restores it.
  void set_factor(double factor);

private:
  void apply_quota(double share);
  void trace_loop();

  emulation_config cfg_;
  std::chrono::steady_clock::time_point start_;
  /// Read by every stage and client on each compute step while `slow` may
  /// switch it (none -> dilation) on the node's thread: an atomic index.
  enum method_kind : int { by_none, by_cgroup_v2, by_cgroup_v1, by_dilation };
  std::atomic<int> method_{by_none};
  std::string cgroup_dir_;
  int cgroup_version_ = 0;
  std::thread trace_thread_;
  std::atomic<double> override_{0.0}; ///< 0: none
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
};

/// Emulated link: spaces sends so that bytes leave at the configured rate.
/// One per node, shared by everything the node sends on it (activations,
/// gradients, the layers its stages and replica holder serve to a
/// recovering stage), from any thread: as one network card, a transfer
/// queues behind the ones already on the wire. Only sends are shaped.
class link_shaper {
public:
  explicit link_shaper(double mbps = 0) : bytes_per_s_(mbps * 1e6 / 8) {}
  /// How long to hold a message of `bytes` before handing it to CAF.
  std::chrono::microseconds delay_for(size_t bytes);
  bool active() const { return bytes_per_s_ > 0; }
  double bytes_per_s() const { return bytes_per_s_; }

private:
  double bytes_per_s_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point busy_until_{};
};

/// What a node's stages share: the limiter and the link.
struct node_emulation {
  emulation_config config;
  std::shared_ptr<cpu_limiter> limiter;
  std::shared_ptr<link_shaper> link; ///< none: sends unshaped
};

/// This thread's CPU time, in seconds.
double thread_cpu();

/// Work that took `wall` seconds and `cpu` of CPU on an (emulated) device:
/// what the device took, and how long to wait before the next piece so that
/// the device's pace holds. Under compute-time dilation the emulated
/// device's time is its CPU time over its share (what the host's other load
/// adds to the wall time is not the device's); a real device, or one under a
/// cgroup quota, takes the wall time. A client of `speed` below 1 (a
/// straggler among its node's virtual clients, EMULATED) takes 1/speed of
/// that.
std::pair<double, std::chrono::microseconds>
device_time(const node_emulation& emulation, double wall, double cpu, double speed = 1.0);

} // namespace salamander::actors
