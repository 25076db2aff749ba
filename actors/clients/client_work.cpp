#include "actors/clients/client_work.hpp"

#include "algorithms/sampling.hpp"

#include <fmt/format.h>

#include <ctime>
#include <map>
#include <mutex>

namespace salamander::actors {

double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void use_intra_op_threads(int32_t threads) {
  thread_local int32_t applied = -1;
  auto n = std::max<int32_t>(1, threads);
  if (applied != n) {
    at::set_num_threads(n);
    applied = n;
  }
}

std::pair<double, std::chrono::microseconds> device_time(const node_emulation& emulation,
                                                         double wall, double cpu) {
  auto& lim = emulation.limiter;
  bool dilated = lim && lim->method() == "compute-time dilation";
  double device = dilated ? cpu * lim->dilation() : wall;
  auto pause =
      std::chrono::microseconds(static_cast<int64_t>(std::max(0.0, device - wall) * 1e6));
  return {device, pause};
}

client_shard load_shard(const std::string& dataset, const models::model_desc& desc,
                        const std::string& data_dir, const std::string& node_dir,
                        uint32_t client, uint32_t clients, double alpha, uint64_t seed,
                        int64_t max_samples) {
  client_shard out;
  out.data = shared_training_set(dataset, desc, node_dir.empty() ? data_dir : node_dir);
  if (!node_dir.empty()) {
    out.shard = torch::arange(out.data->size(), torch::kInt64);
    out.note = fmt::format("the node's own data in {} ({} examples)", node_dir,
                           out.data->size());
  } else {
    std::vector<int64_t> mine;
    if (alpha > 0) {
      mine = algorithms::partition_dirichlet(seed, out.data->label_vector(),
                                             static_cast<int>(clients), alpha)[client];
      out.note = fmt::format("shard {} of {}, dirichlet({})", client, clients, alpha);
    } else {
      mine = algorithms::partition_iid(seed, out.data->size(),
                                       static_cast<int>(clients))[client];
      out.note = fmt::format("shard {} of {}, iid", client, clients);
    }
    if (max_samples > 0 && static_cast<int64_t>(mine.size()) > max_samples) {
      mine.resize(static_cast<size_t>(max_samples));
    }
    out.shard = torch::tensor(mine, torch::kInt64);
  }
  out.note += fmt::format(", {} examples", out.shard.size(0));
  return out;
}

std::shared_ptr<const models::dataset> shared_training_set(const std::string& name,
                                                           const models::model_desc& desc,
                                                           const std::string& dir) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const models::dataset>> cache;
  std::lock_guard<std::mutex> guard(mutex);
  auto key = name + "|" + dir + "|" + models::to_string(desc.input);
  if (auto hit = cache[key].lock()) {
    return hit;
  }
  auto data = std::make_shared<const models::dataset>(
      models::load_dataset(name, true, desc, dir));
  cache[key] = data;
  return data;
}

} // namespace salamander::actors
