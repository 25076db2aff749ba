#include "actors/clients/client_work.hpp"
#include "actors/clients/weights_parts.hpp"
#include "actors/logging.hpp"

#include "algorithms/sampling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <mutex>

namespace salamander::actors {

void use_intra_op_threads(int32_t threads) {
  thread_local int32_t applied = -1;
  auto n = std::max<int32_t>(1, threads);
  if (applied != n) {
    at::set_num_threads(n);
    applied = n;
  }
}

client_shard load_shard(const std::string& dataset, const models::model_desc& desc,
                        const std::string& data_dir, const std::string& node_dir,
                        uint32_t client, uint32_t clients, double alpha,
                        uint32_t classes_apart, uint64_t seed, int64_t max_samples) {
  client_shard out;
  out.data = shared_training_set(dataset, desc, node_dir.empty() ? data_dir : node_dir);
  if (!node_dir.empty()) {
    out.shard = torch::arange(out.data->size(), torch::kInt64);
    out.note = fmt::format("the node's own data in {} ({} examples)", node_dir,
                           out.data->size());
  } else {
    std::vector<int64_t> mine;
    auto n = static_cast<int>(clients);
    if (classes_apart > 0) {
      mine = algorithms::partition_apart(seed, out.data->label_vector(), n,
                                         static_cast<int>(classes_apart), alpha)[client];
    } else if (alpha > 0) {
      mine = algorithms::partition_dirichlet(seed, out.data->label_vector(), n,
                                             alpha)[client];
    } else {
      mine = algorithms::partition_iid(seed, out.data->size(), n)[client];
    }
    out.note = fmt::format(
        "shard {} of {}, {}{}", client, clients,
        classes_apart > 0
            ? fmt::format("the last {} clients' classes apart, ", classes_apart)
            : std::string(),
        alpha > 0 ? fmt::format("dirichlet({})", alpha) : "iid");
    if (max_samples > 0 && static_cast<int64_t>(mine.size()) > max_samples) {
      mine.resize(static_cast<size_t>(max_samples));
    }
    out.shard = torch::tensor(mine, torch::kInt64);
  }
  out.note += fmt::format(", {} examples", out.shard.size(0));
  return out;
}

std::vector<int64_t> label_counts(const models::dataset& data,
                                  const torch::Tensor& shard) {
  if (!shard.defined() || shard.numel() == 0) {
    return {};
  }
  auto counts = torch::bincount(data.labels.index_select(0, shard)).contiguous();
  auto* p = counts.data_ptr<int64_t>();
  return {p, p + counts.numel()};
}

torch::Tensor restricted_softmax_scale(const std::vector<int64_t>& counts,
                                       int64_t classes, double alpha) {
  auto scale = torch::full({classes}, static_cast<float>(alpha));
  for (int64_t c = 0; c < classes && c < static_cast<int64_t>(counts.size()); ++c) {
    if (counts[static_cast<size_t>(c)] > 0) {
      scale[c] = 1.0f;
    }
  }
  return scale;
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

void weights_inbox::add(const char* subsystem, const std::string& from,
                        uint64_t transfer, uint64_t offset, uint64_t total,
                        const torch::Tensor& part) {
  try {
    auto snap = parts_.add(from, transfer, offset, total, part);
    if (!snap) {
      return;
    }
    auto key = std::make_pair(from, transfer);
    if (done_.size() >= tuning::round_pending_transfers && !order_.empty()) {
      done_.erase(order_.front()); // a message that never came (its sender died)
      order_.pop_front();
    }
    done_[key] = std::move(*snap);
    order_.push_back(key);
    auto& t = parts_.last();
    subsystem_log(subsystem)->debug("weights of {:.1f} MB from {} in {} part(s) over {:.2f} s",
                                    static_cast<double>(t.bytes) / 1e6, from, t.parts,
                                    t.seconds);
  } catch (const std::exception& e) {
    subsystem_log(subsystem)->warn("dropped weights in parts from {}: {}", from, e.what());
  }
}

bool weights_inbox::take(const std::string& from, uint64_t transfer, snapshot_payload& into) {
  auto key = std::make_pair(from, transfer);
  auto it = done_.find(key);
  if (it == done_.end()) {
    return false;
  }
  into.snapshot = std::move(it->second);
  done_.erase(it);
  order_.erase(std::find(order_.begin(), order_.end(), key));
  return true;
}

} // namespace salamander::actors
