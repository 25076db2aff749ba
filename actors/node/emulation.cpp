#include "actors/node/emulation.hpp"

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sched.h>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace salamander::actors {

namespace {

// Groups left by node processes that were killed (SIGKILL runs no
// destructor): salamander-PID with no such process and no member left.
void remove_stale_groups() {
  for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/cpu"}) {
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator(root, ec)) {
      auto name = e.path().filename().string();
      if (name.rfind("salamander-", 0) != 0) {
        continue;
      }
      long pid = std::strtol(name.c_str() + 11, nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
        ::rmdir(e.path().c_str()); // fails, harmlessly, if a process is still in it
      }
    }
  }
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  if (!f) {
    return false;
  }
  f << text;
  f.flush();
  return static_cast<bool>(f);
}

// A short period keeps throttling smooth: with the default 100 ms a 0.1 share
// runs 10 ms at full speed and then stalls for 90 ms, which makes a pipeline
// stage's latency bursty and short measurements meaningless.
constexpr long period_us = 10000;

} // namespace

std::string emulation_config::describe() const {
  if (!any()) {
    return "none";
  }
  std::ostringstream out;
  out << "emulated:";
  if (cpu_share < 1.0) {
    out << " cpu-share " << cpu_share;
  }
  if (mem_mb > 0) {
    out << " mem " << mem_mb << " MB";
  }
  if (link_mbps > 0) {
    out << " link " << link_mbps << " Mbit/s";
  }
  if (!cpus.empty()) {
    out << " cpus";
    for (size_t i = 0; i < cpus.size(); ++i) {
      out << (i ? "," : " ") << cpus[i];
    }
  }
  if (count_cpu_time) {
    out << " cpu-time";
  }
  if (!trace.empty()) {
    out << " trace";
    for (auto& [t, f] : trace) {
      out << " " << t << "s:" << f;
    }
  }
  return out.str();
}

std::vector<std::pair<double, double>> parse_trace(const std::string& text) {
  std::vector<std::pair<double, double>> out;
  if (text.empty()) {
    return out;
  }
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto colon = item.find(':');
    try {
      if (colon == std::string::npos) {
        throw std::invalid_argument(item);
      }
      double at = std::stod(item.substr(0, colon));
      double factor = std::stod(item.substr(colon + 1));
      if (at < 0 || !(factor > 0) || factor > 1 || (!out.empty() && at <= out.back().first)) {
        throw std::invalid_argument(item);
      }
      out.emplace_back(at, factor);
    } catch (const std::exception&) {
      throw std::invalid_argument("capacity trace '" + text + "': '" + item +
                                  "' is not SECONDS:FACTOR with increasing seconds and 0 < "
                                  "FACTOR <= 1");
    }
  }
  return out;
}

std::vector<int> parse_cpus(const std::string& text) {
  std::vector<int> out;
  if (text.empty()) {
    return out;
  }
  long have = ::sysconf(_SC_NPROCESSORS_ONLN);
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int cpu = -1;
    try {
      cpu = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || cpu < 0) {
      throw std::invalid_argument("'" + item + "' in --cpus '" + text + "' is not a CPU number");
    }
    if (cpu >= have) {
      throw std::invalid_argument("--cpus names CPU " + std::to_string(cpu) + " but this host has " +
                                  std::to_string(have) + " (0.." + std::to_string(have - 1) + ")");
    }
    out.push_back(cpu);
  }
  return out;
}

void pin_to_cpus(const std::vector<int>& cpus) {
  if (cpus.empty()) {
    return;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    CPU_SET(c, &set);
  }
  if (::sched_setaffinity(0, sizeof set, &set) != 0) {
    throw std::runtime_error(std::string("cannot pin to the given CPUs: ") + std::strerror(errno));
  }
}

cpu_limiter::cpu_limiter(emulation_config cfg)
    : cfg_(std::move(cfg)), start_(std::chrono::steady_clock::now()) {
  if (!(cfg_.cpu_share > 0) || cfg_.cpu_share > 1) {
    throw std::invalid_argument("cpu share must be in (0, 1], got " + std::to_string(cfg_.cpu_share));
  }
  bool limited = cfg_.cpu_share < 1.0 || !cfg_.trace.empty() || cfg_.count_cpu_time;
  if (!limited) {
    return;
  }
  std::string name = "salamander-" + std::to_string(::getpid());
  if (!cfg_.force_dilation && !cfg_.count_cpu_time) {
    remove_stale_groups();
    // cgroup v2: a unified hierarchy with the cpu controller
    std::string v2 = "/sys/fs/cgroup/" + name;
    if (::access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 && ::mkdir(v2.c_str(), 0755) == 0) {
      if (write_file(v2 + "/cpu.max", "max " + std::to_string(period_us)) &&
          write_file(v2 + "/cgroup.procs", std::to_string(::getpid()))) {
        cgroup_dir_ = v2;
        cgroup_version_ = 2;
        method_ = by_cgroup_v2;
      } else {
        ::rmdir(v2.c_str());
      }
    }
    std::string v1 = "/sys/fs/cgroup/cpu/" + name;
    if (cgroup_version_ == 0 && ::access("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", F_OK) == 0 &&
        ::mkdir(v1.c_str(), 0755) == 0) {
      if (write_file(v1 + "/cpu.cfs_period_us", std::to_string(period_us)) &&
          write_file(v1 + "/cgroup.procs", std::to_string(::getpid()))) {
        cgroup_dir_ = v1;
        cgroup_version_ = 1;
        method_ = by_cgroup_v1;
      } else {
        ::rmdir(v1.c_str());
      }
    }
  }
  if (cgroup_version_ == 0) {
    method_ = by_dilation;
  } else {
    apply_quota(share_now());
    if (!cfg_.trace.empty()) {
      trace_thread_ = std::thread([this] { trace_loop(); });
    }
  }
}

cpu_limiter::~cpu_limiter() { release(); }

void cpu_limiter::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (trace_thread_.joinable()) {
    trace_thread_.join();
  }
  if (cgroup_version_ != 0) {
    // move back to the parent group so that ours can be removed
    auto parent = cgroup_dir_.substr(0, cgroup_dir_.rfind('/'));
    write_file(parent + "/cgroup.procs", std::to_string(::getpid()));
    ::rmdir(cgroup_dir_.c_str());
    cgroup_version_ = 0;
  }
}

void cpu_limiter::set_factor(double factor) {
  if (!(factor > 0) || factor > 1) {
    throw std::invalid_argument("slow-down factor must be in (0, 1], got " +
                                std::to_string(factor));
  }
  override_ = factor;
  if (cgroup_version_ != 0) {
    apply_quota(cfg_.cpu_share * factor);
  } else if (method_ == by_none) {
    method_ = by_dilation;
  }
}

double cpu_limiter::share_now() const {
  if (double o = override_; o > 0) {
    return cfg_.cpu_share * o;
  }
  double factor = 1.0;
  double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  for (auto& [at, f] : cfg_.trace) {
    if (t >= at) {
      factor = f;
    }
  }
  return cfg_.cpu_share * factor;
}

void cpu_limiter::apply_quota(double share) {
  // the kernel's smallest quota is 1 ms: very small shares get a longer period
  long period = std::max(period_us, static_cast<long>(std::ceil(1000.0 / share)));
  long quota = std::max(1000L, static_cast<long>(std::lround(share * static_cast<double>(period))));
  if (cgroup_version_ == 2) {
    write_file(cgroup_dir_ + "/cpu.max", share >= 1.0 ? "max " + std::to_string(period_us)
                                                      : std::to_string(quota) + " " +
                                                            std::to_string(period));
  } else if (cgroup_version_ == 1) {
    // lower the quota before changing the period so that quota <= period holds
    write_file(cgroup_dir_ + "/cpu.cfs_quota_us", "-1");
    write_file(cgroup_dir_ + "/cpu.cfs_period_us", std::to_string(period));
    write_file(cgroup_dir_ + "/cpu.cfs_quota_us", share >= 1.0 ? "-1" : std::to_string(quota));
  }
}

void cpu_limiter::trace_loop() {
  for (auto& [at, f] : cfg_.trace) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stop_cv_.wait_until(lock, start_ + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::duration<double>(at)),
                            [this] { return stop_; })) {
      return;
    }
    if (override_ == 0.0) {
      apply_quota(cfg_.cpu_share * f);
    }
  }
}

const std::string& cpu_limiter::method() const {
  static const std::string names[] = {"none", "cgroup v2 cpu.max", "cgroup v1 cfs quota",
                                      "compute-time dilation"};
  return names[method_.load()];
}

double cpu_limiter::dilation() const {
  return method_ == by_dilation ? 1.0 / share_now() : 1.0;
}

double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::pair<double, std::chrono::microseconds>
device_time(const node_emulation& emulation, double wall, double cpu, double speed) {
  auto& lim = emulation.limiter;
  bool dilated = lim && lim->dilating();
  double device = (dilated ? cpu * lim->dilation() : wall) / speed;
  auto pause =
      std::chrono::microseconds(static_cast<int64_t>(std::max(0.0, device - wall) * 1e6));
  return {device, pause};
}

std::chrono::microseconds link_shaper::delay_for(size_t bytes) {
  if (!active()) {
    return std::chrono::microseconds(0);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto now = std::chrono::steady_clock::now();
  auto start = std::max(now, busy_until_);
  auto cost = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(static_cast<double>(bytes) / bytes_per_s_));
  busy_until_ = start + cost;
  return std::chrono::duration_cast<std::chrono::microseconds>(busy_until_ - now);
}

} // namespace salamander::actors
