#include "actors/profiler.hpp"

#include "messages/errors.hpp"
#include "models/layered_model.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
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

using clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

device_report measure(const std::string& node, const node_emulation& emu,
                      const std::string& model, uint32_t micro_batch_size) {
  auto desc = models::describe(models::model_spec::parse(model));
  models::layered_model m(desc, 0);
  device_report r;
  r.node = node;
  r.micro_batch_size = micro_batch_size;
  auto shape = desc.input;
  shape.insert(shape.begin(), micro_batch_size);
  auto x = torch::randn(shape);
  // An emulated device is measured in CPU time scaled by 1/share: a cgroup
  // quota throttles in bursts that a few milliseconds of wall time would
  // catch or miss at random. A real device is measured in wall time.
  double cpu_factor = emu.limiter ? emu.limiter->cpu_time_factor() : 0.0;
  auto now = [&] {
    if (cpu_factor > 0) {
      timespec ts{};
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    }
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
  };
  double scale = cpu_factor > 0 ? cpu_factor : 1.0;
  for (size_t l = 0; l < desc.layers.size(); ++l) {
    auto layer = m.layer(l);
    std::vector<double> fwd, bwd;
    torch::Tensor out;
    for (int run = 0; run < 6; ++run) {
      auto in = x.detach().requires_grad_(l > 0);
      double t0 = now();
      out = layer.forward(in);
      double t1 = now();
      out.backward(torch::ones_like(out));
      double t2 = now();
      if (run > 0) { // the first run is the warm-up
        fwd.push_back((t1 - t0) * scale);
        bwd.push_back((t2 - t1) * scale);
      }
    }
    r.forward_s.push_back(median(fwd));
    r.backward_s.push_back(median(bwd));
    x = out.detach();
  }
  r.memory_bytes = emu.config.mem_mb > 0 ? static_cast<double>(emu.config.mem_mb) * 1024 * 1024
                                         : memory_available();
  r.link_bytes_per_s = emu.config.link_mbps > 0 ? emu.config.link_mbps * 1e6 / 8 : 0.0;
  r.cpu_share = emu.limiter ? emu.limiter->share_now() : 1.0;
  r.emulation = emu.config.describe();
  return r;
}

} // namespace

profiler_actor::behavior_type profiler(profiler_actor::stateful_pointer<profiler_state> self,
                                       std::string node, node_emulation emulation) {
  self->state.node = std::move(node);
  self->state.emulation = std::move(emulation);
  return {
      [=](profile_atom, const std::string& model,
          uint32_t micro_batch_size) -> caf::result<device_report> {
        try {
          if (micro_batch_size == 0) {
            throw std::invalid_argument("micro-batch size must be > 0");
          }
          return measure(self->state.node, self->state.emulation, model, micro_batch_size);
        } catch (const std::exception& e) {
          return caf::make_error(errc::bad_config,
                                 "profiler on " + self->state.node + ": " + e.what());
        }
      },
  };
}

} // namespace salamander::actors
