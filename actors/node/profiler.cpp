#include "actors/node/profiler.hpp"

#include "messages/errors.hpp"
#include "models/layered_model.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sched.h>
#include <time.h>

namespace salamander::actors {

double memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") {
      return kb * 1024;
    }
  }
  return 0;
}

namespace {

// The processor's name as the kernel gives it: x86's "model name", else
// ARM's "Hardware", "Model" or "CPU part" (the first found); "" if none.
std::string processor_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::map<std::string, std::string> found;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) {
      continue;
    }
    auto key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    auto value = line.substr(std::min(line.size(), colon + 2));
    found.emplace(key, value); // the first of each key
  }
  for (auto key : {"model name", "Hardware", "Model", "CPU part"}) {
    if (auto it = found.find(key); it != found.end() && !it->second.empty()) {
      return it->second;
    }
  }
  return "";
}

} // namespace

std::string device_type(const emulation_config& emulation) {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  auto emu = emulation;
  emu.cpus.clear();
  auto name = processor_name();
  return (name.empty() ? std::string("unknown processor") : name) + ", " +
         std::to_string(cpus) + " CPUs, " + std::to_string(torch::get_num_threads()) +
         " threads, " + emu.describe();
}

namespace {

using clock = std::chrono::steady_clock;

// Random inputs from a private generator: LibTorch's default one is
// process-wide, and a stage being built in this process seeds and draws
// from it (under a mutex the profiler does not hold).
torch::Tensor private_randn(at::IntArrayRef shape, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return torch::randn(shape, gen);
}

// Seconds on one of the kernel's clocks (process or thread CPU time).
double clock_seconds(clockid_t which) {
  timespec ts{};
  clock_gettime(which, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

device_report measure(const std::string& node, const node_emulation& emu,
                      const std::string& type, const std::string& model,
                      uint32_t micro_batch_size) {
  auto desc = models::describe(models::model_spec::parse(model));
  models::layered_model m(desc, 0);
  device_report r;
  r.node = node;
  r.micro_batch_size = micro_batch_size;
  auto shape = desc.input;
  shape.insert(shape.begin(), micro_batch_size);
  auto x = private_randn(shape, 0x9f0f11e);
  // An emulated device is measured in CPU time scaled by 1/share: a cgroup
  // quota throttles in bursts that a few milliseconds of wall time would
  // catch or miss at random. A real device is measured in wall time.
  double cpu_factor = emu.limiter ? emu.limiter->cpu_time_factor() : 0.0;
  clockid_t timer = cpu_factor > 0 ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
  auto now = [timer] { return clock_seconds(timer); };
  double scale = cpu_factor > 0 ? cpu_factor : 1.0;
  bool quota = emu.limiter && !emu.limiter->dilating();
  if (cpu_factor > 0 && quota) {
    // (dilation slows compute by exactly 1/share; there wall time per CPU
    // second would only measure the host's other load)
    // A throttled process runs slower than its quota says: it waits out
    // whole periods and comes back to cold caches, and its other threads
    // spend the same quota. Over a longer run of the model's own work (tens
    // of periods) wall time per CPU second is the real slowdown; the
    // profile uses it when it is worse than 1/share (at most 3x worse).
    auto thread_cpu = [] { return clock_seconds(CLOCK_THREAD_CPUTIME_ID); };
    auto wall = [] { return clock_seconds(CLOCK_MONOTONIC); };
    auto net = m.all();
    std::vector<double> ratios;
    for (int rep = 0; rep < 3; ++rep) {
      double w0 = wall(), c0 = thread_cpu();
      do {
        net->forward(x.detach()).sum().backward();
      } while (thread_cpu() - c0 < 0.03);
      ratios.push_back((wall() - w0) / (thread_cpu() - c0));
    }
    r.slowdown = median(ratios);
    scale = std::clamp(r.slowdown, cpu_factor, 3 * cpu_factor);
  }
  // Passes over the whole model, each layer once a pass, rather than each
  // layer's runs back to back: a spell of contention (a busy sibling
  // hyperthread, another process's burst) lasts longer than a layer's runs,
  // and timed back to back it raised every run of the few layers it fell
  // on by up to 40% (16 devices of one share on this host, at 64 rows), so
  // that identical devices looked unlike and the planner gave one of them
  // a third more layers. Spread over the passes it costs a layer one pass.
  const size_t layers = desc.layers.size();
  std::vector<std::vector<double>> fwd(layers), bwd(layers);
  for (int pass = 0; pass < 6; ++pass) {
    auto h = x;
    for (size_t l = 0; l < layers; ++l) {
      auto layer = m.layer(l);
      auto in = h.detach().requires_grad_(l > 0);
      double t0 = now();
      auto out = layer.forward(in);
      double t1 = now();
      out.backward(torch::ones_like(out));
      double t2 = now();
      if (pass > 0) { // the first pass is the warm-up
        fwd[l].push_back((t1 - t0) * scale);
        bwd[l].push_back((t2 - t1) * scale);
      }
      h = out.detach();
    }
  }
  // each layer's fastest pass: contention from other work only ever adds
  // time
  for (size_t l = 0; l < layers; ++l) {
    r.forward_s.push_back(*std::min_element(fwd[l].begin(), fwd[l].end()));
    r.backward_s.push_back(*std::min_element(bwd[l].begin(), bwd[l].end()));
  }
  r.memory_bytes = emu.config.mem_mb > 0
                       ? static_cast<double>(emu.config.mem_mb) * 1024 * 1024
                       : memory_available();
  r.link_bytes_per_s = emu.config.link_mbps > 0 ? emu.config.link_mbps * 1e6 / 8 : 0.0;
  r.cpu_share = emu.limiter ? emu.limiter->share_now() : 1.0;
  r.emulation = emu.config.describe();
  r.device_type = type.empty() ? device_type(emu.config) : type;
  return r;
}

// A fixed piece of compute (a few ms on a board): thread CPU time, scaled
// like the profile by the emulated share.
double compute_probe(const node_emulation& emu) {
  static const auto a = private_randn({128, 128}, 0xca9a);
  double t0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
  auto x = a;
  for (int i = 0; i < 10; ++i) {
    x = torch::tanh(torch::mm(x, a) * 0.01);
  }
  (void)x.sum().item<float>();
  double t = clock_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
  double share = emu.limiter ? emu.limiter->share_now() : 1.0;
  return t / std::max(share, 1e-3);
}

// The fastest of n probes. Contention (a busy sibling hyperthread, a
// frequency change, cache pressure from other work) only ever adds time, so
// the minimum is the steadiest estimate of what the device can do; a median
// still moves when most of the probes land on a loaded moment.
double capacity_sample(const node_emulation& emu, int n = 5) {
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) {
    best = std::min(best, compute_probe(emu));
  }
  return best;
}

// Times pings and 256 KB transfers to a peer profiler: the link's latency
// and rate (an emulated rate is added on top of the measured one).
caf::result<link_report> probe_link(profiler_actor::stateful_pointer<profiler_state> self,
                                    caf::actor peer, const std::string& peer_name) {
  auto rp = self->make_response_promise<link_report>();
  auto target = caf::actor_cast<profiler_actor>(peer);
  auto rtts = std::make_shared<std::vector<double>>();
  auto transfers = std::make_shared<std::vector<double>>();
  auto payload = private_randn({64 * 1024}, 0x11c); // 256 KB
  auto step = std::make_shared<std::function<void(int)>>();
  auto fail = [=](caf::error& err) mutable {
    rp.deliver(caf::make_error(errc::unreachable, "link probe " + self->state.node +
                                                      " -> " + peer_name + ": " +
                                                      self->system().render(err)));
    *step = nullptr; // break the cycle
  };
  // rounds 0-4: pings; 5-7: transfers; then the report
  *step = [=](int round) mutable {
    auto t0 = clock::now();
    auto elapsed = [t0] {
      return std::chrono::duration<double>(clock::now() - t0).count();
    };
    if (round < 5) {
      self->request(target, tuning::ping_timeout, echo_atom_v, int64_t{round})
          .then(
              [=](int64_t) {
                rtts->push_back(elapsed());
                (*step)(round + 1);
              },
              fail);
    } else if (round < 8) {
      self->request(target, tuning::transfer_timeout, echo_atom_v,
                    tensor_payload{payload})
          .then(
              [=](int64_t) {
                transfers->push_back(elapsed());
                (*step)(round + 1);
              },
              fail);
    } else {
      link_report r;
      r.from = self->state.node;
      r.to = peer_name;
      r.latency_s = median(*rtts) / 2;
      double bytes = static_cast<double>(payload.nbytes());
      double t = std::max(median(*transfers) - median(*rtts), 1e-6);
      r.bytes_per_s = bytes / t;
      r.method = "measured";
      auto& emu = self->state.emulation.config;
      if (emu.link_mbps > 0) {
        // the emulated link on top of the real one
        r.bytes_per_s = 1.0 / (1.0 / r.bytes_per_s + 8.0 / (emu.link_mbps * 1e6));
        r.method = "measured + EMULATED rate";
      }
      rp.deliver(r);
      *step = nullptr;
    }
  };
  (*step)(0);
  return rp;
}

} // namespace

profiler_actor::behavior_type
profiler(profiler_actor::stateful_pointer<profiler_state> self, std::string node,
         node_emulation emulation, std::string device_type) {
  self->state.node = std::move(node);
  self->state.emulation = std::move(emulation);
  self->state.device_type = std::move(device_type);
  // the supervisor gone, reports stop (and the timer with them: a profiler
  // that ticks for ever would keep its actor system from shutting down)
  self->set_down_handler([=](caf::down_msg& dm) {
    if (self->state.supervisor && dm.source == self->state.supervisor.address()) {
      self->state.supervisor = nullptr;
    }
  });
  return {
      [=](profile_atom, const std::string& model,
          uint32_t micro_batch_size) -> caf::result<device_report> {
        try {
          if (micro_batch_size == 0) {
            throw std::invalid_argument("micro-batch size must be > 0");
          }
          return measure(self->state.node, self->state.emulation, self->state.device_type,
                         model, micro_batch_size);
        } catch (const std::exception& e) {
          return caf::make_error(errc::bad_config,
                                 "profiler on " + self->state.node + ": " + e.what());
        }
      },
      [=](echo_atom, int64_t n) { return n; },
      [=](echo_atom, const tensor_payload& t) {
        return static_cast<int64_t>(t.tensor.numel());
      },
      [=](probe_atom, caf::actor peer, const std::string& peer_name) {
        return probe_link(self, std::move(peer), peer_name);
      },
      [=](capacity_atom, caf::actor supervisor) {
        auto& st = self->state;
        if (st.supervisor) {
          self->demonitor(st.supervisor.address());
        }
        st.supervisor = std::move(supervisor);
        self->monitor(st.supervisor);
        st.baseline_s = capacity_sample(st.emulation, 7);
        st.last_sent = 1;
        st.sent_at = clock::now();
        if (!st.ticking) {
          st.ticking = true;
          self->delayed_send(self, st.period, tick_atom_v);
        }
      },
      [=](tick_atom) {
        auto& st = self->state;
        if (!st.supervisor) {
          st.ticking = false;
          return;
        }
        double factor = st.baseline_s / capacity_sample(st.emulation);
        bool drifted = std::abs(factor / st.last_sent - 1.0) > tuning::capacity_drift;
        if (drifted || clock::now() - st.sent_at > tuning::capacity_report_every) {
          self->send(caf::actor_cast<cluster_actor>(st.supervisor), capacity_atom_v,
                     st.node, factor);
          st.last_sent = factor;
          st.sent_at = clock::now();
        }
        self->delayed_send(self, st.period, tick_atom_v);
      },
  };
}

} // namespace salamander::actors
