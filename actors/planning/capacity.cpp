#include "actors/planning/capacity.hpp"

#include <algorithm>

namespace salamander::actors {

algorithms::plan_request make_plan_request(const models::model_desc& desc,
                                           const std::string& schedule,
                                           int64_t micro_batch_size, int micro_batches,
                                           const std::string& optimizer) {
  algorithms::plan_request req;
  req.mode = algorithms::plan_mode::training;
  req.schedule = schedule == "gpipe"   ? algorithms::plan_schedule::gpipe
                 : schedule == "async" ? algorithms::plan_schedule::async
                                       : algorithms::plan_schedule::one_f_one_b;
  req.micro_batch_size = micro_batch_size;
  req.micro_batches = micro_batches;
  req.optimizer_state_factor = optimizer == "adam" ? 2.0 : 1.0;
  for (auto& l : desc.layers) {
    req.layers.push_back({l.name, static_cast<double>(l.param_bytes),
                          static_cast<double>(l.activation_bytes),
                          static_cast<double>(l.output_bytes)});
  }
  return req;
}

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

} // namespace

void merge_device_types(std::vector<device_report>& reports) {
  // a type is its name and the share its nodes ran at while profiled: a
  // node slowed at that moment (`slow`, a capacity trace) is not its type's
  std::map<std::pair<std::string, double>, std::vector<size_t>> types;
  for (size_t n = 0; n < reports.size(); ++n) {
    auto& r = reports[n];
    if (!r.device_type.empty() && !r.forward_s.empty()) {
      types[{r.device_type, r.cpu_share}].push_back(n);
    }
  }
  for (auto& [type, members] : types) {
    auto& first = reports[members.front()];
    bool alike = std::all_of(members.begin(), members.end(), [&](size_t n) {
      return reports[n].forward_s.size() == first.forward_s.size() &&
             reports[n].backward_s.size() == first.backward_s.size() &&
             reports[n].micro_batch_size == first.micro_batch_size;
    });
    if (members.size() < 2 || !alike) {
      continue;
    }
    auto merged = [&](std::vector<double> device_report::*times) {
      std::vector<double> out;
      for (size_t l = 0; l < (first.*times).size(); ++l) {
        std::vector<double> v;
        for (auto n : members) {
          v.push_back((reports[n].*times)[l]);
        }
        out.push_back(median_of(std::move(v)));
      }
      return out;
    };
    auto forward = merged(&device_report::forward_s);
    auto backward = merged(&device_report::backward_s);
    for (auto n : members) {
      reports[n].forward_s = forward;
      reports[n].backward_s = backward;
    }
  }
}

void capacity_model::set_profiles(const cluster_profile& round) {
  profiles_ = round.devices;
  merge_device_types(profiles_);
  scale_.assign(profiles_.size(), 1.0);
  capacity_.assign(profiles_.size(), 1.0);
  measured_.assign(profiles_.size(), false);
  links_.clear();
  for (auto& l : round.links) {
    links_[{l.from, l.to}] = l.report;
  }
}

void capacity_model::update_links(const std::vector<link_entry>& links) {
  for (auto& l : links) {
    links_[{l.from, l.to}] = l.report;
  }
}

void capacity_model::add_node() {
  if (profiles_.empty()) {
    return;
  }
  profiles_.push_back(profiles_.front());
  scale_.push_back(1.0);
  capacity_.push_back(1.0);
  measured_.push_back(false);
}

std::pair<double, double>
capacity_model::measured_link(size_t node, const std::vector<bool>& dead) const {
  // the planner gives each device one link rate; the median keeps one odd
  // pair from dominating
  std::vector<double> rates, latencies;
  for (auto& [pair, r] : links_) {
    if (pair.first == node && pair.second < dead.size() && !dead[pair.second]) {
      rates.push_back(r.bytes_per_s);
      latencies.push_back(r.latency_s);
    }
  }
  if (rates.empty()) {
    return {0, 0};
  }
  std::sort(rates.begin(), rates.end());
  std::sort(latencies.begin(), latencies.end());
  return {rates[rates.size() / 2], latencies[latencies.size() / 2]};
}

double capacity_model::link_rate(size_t from, size_t to) const {
  auto it = links_.find({from, to});
  return it == links_.end() ? 0.0 : it->second.bytes_per_s;
}

algorithms::plan_request capacity_model::request(algorithms::plan_request req,
                                                 const std::vector<size_t>& live,
                                                 const std::vector<bool>& dead,
                                                 const std::vector<std::string>& names,
                                                 double default_link_bytes_per_s) const {
  for (size_t n : live) {
    if (n >= profiles_.size()) {
      break; // no profiles (an even-split job): the caller adds devices
    }
    auto& p = profiles_[n];
    algorithms::device_profile d;
    d.name = n < names.size() ? names[n] : p.node;
    double scale = this->scale(n);
    for (size_t l = 0; l < p.forward_s.size(); ++l) {
      d.forward_s.push_back(p.forward_s[l] * scale);
      d.backward_s.push_back(p.backward_s[l] * scale);
    }
    d.memory_bytes = p.memory_bytes;
    auto [rate, latency] = measured_link(n, dead);
    d.link_bytes_per_s = rate > 0                 ? rate
                         : p.link_bytes_per_s > 0 ? p.link_bytes_per_s
                                                  : default_link_bytes_per_s;
    d.link_latency_s = latency > 0 ? latency : 1e-4;
    req.devices.push_back(std::move(d));
  }
  return req;
}

double capacity_model::predicted_s(size_t node, size_t begin, size_t end,
                                   double runs) const {
  if (node >= profiles_.size()) {
    return 0;
  }
  auto& p = profiles_[node];
  double s = 0;
  for (size_t l = begin; l < end && l < p.forward_s.size(); ++l) {
    s += (p.forward_s[l] + p.backward_s[l]) * runs;
  }
  return s;
}

void capacity_model::correct(const std::vector<batch_stats>& reports,
                             const algorithms::layer_ranges& ranges,
                             const std::vector<size_t>& stage_nodes,
                             const std::vector<int>& split, int micro_batches) {
  for (auto& r : reports) {
    if (r.stage >= ranges.size() || r.stage >= stage_nodes.size()) {
      continue;
    }
    size_t n = stage_nodes[r.stage];
    double runs = split.empty() ? micro_batches : split.at(r.stage);
    double predicted =
        predicted_s(n, ranges[r.stage].first, ranges[r.stage].second, runs);
    if (predicted > 0 && r.compute_s > 0 && n < scale_.size()) {
      // the first measurement starts from the node's own probe, not from
      // the floor its unmeasured speed was given
      scale_[n] = (1 - correction_weight) * scale_[n] +
                  correction_weight * (r.compute_s / predicted);
      measured_[n] = true;
    }
  }
}

void capacity_model::set_kind_ratio(int kind, double ratio) {
  kind_ratio_[kind] = std::clamp(ratio, min_kind_ratio, max_kind_ratio);
  kind_measured_[kind] = true;
}

double capacity_model::kind_ratio(int kind) const {
  if (kind_measured_[kind]) {
    return kind_ratio_[kind];
  }
  double worst = 1.0;
  for (int k = 0; k < 3; ++k) {
    if (kind_measured_[k]) {
      worst = std::max(worst, kind_ratio_[k]);
    }
  }
  return worst;
}

void capacity_model::report_capacity(size_t node, double factor, bool staged) {
  if (!(factor > 0)) {
    return;
  }
  if (capacity_.size() <= node) {
    capacity_.resize(node + 1, 1.0);
  }
  // A spare node moves by what its probe says changed since the last one:
  // the correction its stages measured while it ran (a host whose other
  // load an idle probe does not see) is kept, not reset to the probe, so a
  // plan that measured slower is not predicted fast again the moment its
  // nodes are idle. A node that never ran a stage starts at 1, so this is
  // 1 / factor for it.
  if (!staged && node < scale_.size()) {
    scale_[node] *= capacity_[node] / factor;
  }
  capacity_[node] = factor;
}

double capacity_model::scale(size_t node) const {
  if (node >= scale_.size()) {
    return 1.0;
  }
  if (measured_[node]) {
    return scale_[node];
  }
  // An idle node's profile and probes were taken with nothing else of the
  // job on it; every node measured so far ran slower than that by at least
  // the smallest residual. Without this, an idle node looks faster than a
  // measured one of the same kind only because it is idle, a re-plan moves
  // there, measures it as slow, and moves back (bench replan_stability). A
  // node slowed on its own (throttling, another app) shows it in its probe,
  // which the residual divides out, so the floor does not hide it.
  double floor = 0;
  for (size_t m = 0; m < scale_.size(); ++m) {
    if (measured_[m]) {
      double residual = scale_[m] * capacity_[m];
      floor = floor == 0 ? residual : std::min(floor, residual);
    }
  }
  return scale_[node] * std::max(1.0, floor);
}

double capacity_model::speed(size_t node) const {
  double s = scale(node);
  return s > 0 ? 1.0 / s : 0.0;
}

} // namespace salamander::actors
