// Federated strategies and width slicing (see federated.hpp for the papers
// and the choices). Everything here is a function of its arguments: masks
// and client draws use our own splitmix64 so that a round's plan is the
// same on every machine and after a restart, and the time model is plain
// arithmetic on the client's profile.
#include "algorithms/federated.hpp"

#include "algorithms/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace salamander::algorithms::fed {

namespace {

std::string str(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

int64_t product(const std::vector<int64_t>& dims, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < dims.size(); ++i) {
    n *= dims[i];
  }
  return n;
}

const std::vector<int64_t>& units_of(const unit_sets& kept, int layer) {
  return kept[static_cast<size_t>(layer)];
}

// A layout whose params do not match its layers would make every index
// computation below wrong, so each entry point checks it first.
void check_layout(const model_layout& layout) {
  const auto layers = static_cast<int>(layout.layers.size());
  for (const auto& l : layout.layers) {
    if (l.units < 1) {
      throw std::invalid_argument("layer " + l.name + ": units must be >= 1, got " +
                                  std::to_string(l.units));
    }
  }
  for (const auto& p : layout.params) {
    for (auto d : p.dims) {
      if (d < 0) {
        throw std::invalid_argument("param " + p.name + ": negative dimension " +
                                    std::to_string(d));
      }
    }
    if (p.out_layer < -1 || p.out_layer >= layers) {
      throw std::invalid_argument("param " + p.name + ": out_layer " +
                                  std::to_string(p.out_layer) + " is not a layer");
    }
    if (p.in_layer < -1 || p.in_layer >= layers) {
      throw std::invalid_argument("param " + p.name + ": in_layer " +
                                  std::to_string(p.in_layer) + " is not a layer");
    }
    if (p.out_layer >= 0) {
      auto units = layout.layers[static_cast<size_t>(p.out_layer)].units;
      if (p.dims.empty() || p.dims[0] != units) {
        throw std::invalid_argument("param " + p.name + ": dims[0] must be " +
                                    std::to_string(units) + " (units of its out_layer)");
      }
    }
    if (p.in_layer >= 0) {
      auto units = layout.layers[static_cast<size_t>(p.in_layer)].units;
      if (p.in_spatial < 1) {
        throw std::invalid_argument("param " + p.name +
                                    ": in_spatial must be >= 1, got " +
                                    std::to_string(p.in_spatial));
      }
      if (p.dims.size() < 2 || p.dims[1] != units * p.in_spatial) {
        throw std::invalid_argument("param " + p.name + ": dims[1] must be " +
                                    std::to_string(units * p.in_spatial) +
                                    " (units of its in_layer x in_spatial)");
      }
    }
  }
}

// The unit-set half of check_sub; `kept` must not be empty here.
void check_kept(const model_layout& layout, const unit_sets& kept) {
  if (kept.size() != layout.layers.size()) {
    throw std::invalid_argument("kept units for " + std::to_string(kept.size()) +
                                " layers, the model has " +
                                std::to_string(layout.layers.size()));
  }
  for (size_t l = 0; l < kept.size(); ++l) {
    const auto& layer = layout.layers[l];
    const auto& units = kept[l];
    // a layer with no unit cuts the model in two: every mask keeps one
    if (units.empty()) {
      throw std::invalid_argument("layer " + layer.name + ": keeps no unit");
    }
    for (size_t i = 0; i < units.size(); ++i) {
      if (units[i] < 0 || units[i] >= layer.units) {
        throw std::invalid_argument("layer " + layer.name + ": unit " +
                                    std::to_string(units[i]) + " outside [0, " +
                                    std::to_string(layer.units) + ")");
      }
      if (i > 0 && units[i] <= units[i - 1]) {
        throw std::invalid_argument("layer " + layer.name +
                                    ": units not sorted and distinct at " +
                                    std::to_string(units[i]));
      }
    }
    if (!layer.sliced && static_cast<int64_t>(units.size()) != layer.units) {
      throw std::invalid_argument("layer " + layer.name + ": unsliced but keeps " +
                                  std::to_string(units.size()) + " of " +
                                  std::to_string(layer.units) + " units");
    }
  }
}

const unit_sets& whole_or(const unit_sets& kept, const unit_sets& whole) {
  return kept.empty() ? whole : kept;
}

void check_global(const model_layout& layout, const flat_params& global) {
  if (global.size() != layout.params.size()) {
    throw std::invalid_argument("global model has " + std::to_string(global.size()) +
                                " params, the layout " +
                                std::to_string(layout.params.size()));
  }
  for (size_t p = 0; p < global.size(); ++p) {
    auto want = product(layout.params[p].dims);
    if (static_cast<int64_t>(global[p].size()) != want) {
      throw std::invalid_argument("global param " + layout.params[p].name + " has " +
                                  std::to_string(global[p].size()) +
                                  " values, expected " + std::to_string(want));
    }
  }
}

std::vector<int64_t> iota_units(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Round 0 is treated as round 1 by the rolling mask; configure() needs a
// real round because base_version is round - 1.
void check_round(uint64_t round) {
  if (round == 0) {
    throw std::invalid_argument("round must be >= 1, got 0");
  }
}

std::map<uint32_t, const client_view*> by_id(const std::vector<client_view>& clients) {
  std::map<uint32_t, const client_view*> m;
  for (const auto& c : clients) {
    m[c.id] = &c;
  }
  return m;
}

double full_round_s(const client_view& c, int64_t epochs) {
  return static_cast<double>(epochs) * c.time.at(1.0);
}

} // namespace

int64_t model_layout::elements() const {
  int64_t n = 0;
  for (const auto& p : params) {
    n += product(p.dims);
  }
  return n;
}

int64_t kept_count(int64_t units, double keep) {
  if (units < 1) {
    throw std::invalid_argument("kept_count: units must be >= 1, got " +
                                std::to_string(units));
  }
  if (!(keep >= 0)) {
    throw std::invalid_argument("kept_count: keep must be >= 0, got " + str(keep));
  }
  // the epsilon keeps 0.7 x 10 = 7.000000000000001 at 7 units
  double n = std::ceil(keep * static_cast<double>(units) - 1e-9);
  n = std::min(std::max(n, 1.0), static_cast<double>(units));
  return static_cast<int64_t>(n);
}

unit_sets all_units(const model_layout& layout) {
  unit_sets all;
  all.reserve(layout.layers.size());
  for (const auto& l : layout.layers) {
    all.push_back(iota_units(std::max<int64_t>(l.units, 0)));
  }
  return all;
}

std::vector<std::vector<int64_t>> sub_dims(const model_layout& layout,
                                           const unit_sets& kept) {
  check_layout(layout);
  unit_sets whole = kept.empty() ? all_units(layout) : unit_sets{};
  const auto& k = whole_or(kept, whole);
  check_kept(layout, k);
  std::vector<std::vector<int64_t>> dims;
  dims.reserve(layout.params.size());
  for (const auto& p : layout.params) {
    auto d = p.dims;
    if (p.out_layer >= 0) {
      d[0] = static_cast<int64_t>(units_of(k, p.out_layer).size());
    }
    if (p.in_layer >= 0) {
      d[1] = static_cast<int64_t>(units_of(k, p.in_layer).size()) * p.in_spatial;
    }
    dims.push_back(std::move(d));
  }
  return dims;
}

std::vector<int64_t> sub_to_global(const model_layout& layout, size_t p,
                                   const unit_sets& kept) {
  check_layout(layout);
  if (p >= layout.params.size()) {
    throw std::invalid_argument("sub_to_global: param " + std::to_string(p) + " of " +
                                std::to_string(layout.params.size()));
  }
  unit_sets whole = kept.empty() ? all_units(layout) : unit_sets{};
  const auto& k = whole_or(kept, whole);
  check_kept(layout, k);
  const auto& param = layout.params[p];
  const auto& dims = param.dims;
  if (dims.empty()) {
    return {0}; // a scalar: nothing to slice
  }
  std::vector<int64_t> rows =
      param.out_layer >= 0 ? units_of(k, param.out_layer) : iota_units(dims[0]);
  if (dims.size() == 1) {
    return rows;
  }
  std::vector<int64_t> cols;
  if (param.in_layer >= 0) {
    for (auto u : units_of(k, param.in_layer)) {
      for (int64_t s = 0; s < param.in_spatial; ++s) {
        cols.push_back(u * param.in_spatial + s);
      }
    }
  } else {
    cols = iota_units(dims[1]);
  }
  const int64_t rest = product(dims, 2);
  std::vector<int64_t> index;
  index.reserve(rows.size() * cols.size() * static_cast<size_t>(rest));
  for (auto r : rows) {
    for (auto c : cols) {
      for (int64_t e = 0; e < rest; ++e) {
        index.push_back((r * dims[1] + c) * rest + e);
      }
    }
  }
  return index;
}

flat_params slice(const model_layout& layout, const flat_params& global,
                  const unit_sets& kept) {
  check_layout(layout);
  check_global(layout, global);
  flat_params sub(layout.params.size());
  for (size_t p = 0; p < layout.params.size(); ++p) {
    auto index = sub_to_global(layout, p, kept);
    sub[p].reserve(index.size());
    for (auto g : index) {
      sub[p].push_back(global[p][static_cast<size_t>(g)]);
    }
  }
  return sub;
}

void check_sub(const model_layout& layout, const unit_sets& kept,
               const flat_params& values) {
  auto dims = sub_dims(layout, kept);
  if (values.size() != dims.size()) {
    throw std::invalid_argument("sub-model has " + std::to_string(values.size()) +
                                " params, the layout " + std::to_string(dims.size()));
  }
  for (size_t p = 0; p < dims.size(); ++p) {
    auto want = product(dims[p]);
    if (static_cast<int64_t>(values[p].size()) != want) {
      throw std::invalid_argument("sub-model param " + layout.params[p].name + " has " +
                                  std::to_string(values[p].size()) +
                                  " values, expected " + std::to_string(want));
    }
  }
}

unit_sets mask_prefix(const model_layout& layout, double keep) {
  unit_sets kept;
  for (const auto& l : layout.layers) {
    kept.push_back(iota_units(l.sliced ? kept_count(l.units, keep) : l.units));
  }
  return kept;
}

unit_sets mask_rolling(const model_layout& layout, double keep, uint64_t round) {
  const uint64_t r = round == 0 ? 0 : round - 1;
  unit_sets kept;
  for (const auto& l : layout.layers) {
    if (!l.sliced) {
      kept.push_back(iota_units(l.units));
      continue;
    }
    const auto k = kept_count(l.units, keep);
    const auto units = static_cast<uint64_t>(l.units);
    const uint64_t start = r % units;
    std::vector<int64_t> window;
    for (int64_t i = 0; i < k; ++i) {
      window.push_back(static_cast<int64_t>((start + static_cast<uint64_t>(i)) % units));
    }
    std::sort(window.begin(), window.end());
    kept.push_back(std::move(window));
  }
  return kept;
}

unit_sets mask_random(const model_layout& layout, double keep, uint64_t seed,
                      uint64_t round, uint32_t client) {
  const uint64_t base = mix_seed(seed, round, client);
  unit_sets kept;
  for (size_t l = 0; l < layout.layers.size(); ++l) {
    const auto& layer = layout.layers[l];
    auto units = iota_units(layer.units);
    if (!layer.sliced) {
      kept.push_back(std::move(units));
      continue;
    }
    const auto k = static_cast<size_t>(kept_count(layer.units, keep));
    // partial Fisher-Yates: the first k places are a uniform k-subset
    splitmix64 g(mix_seed(base, l, 0x3a5c));
    for (size_t i = 0; i < k; ++i) {
      auto j = i + static_cast<size_t>(g.below(units.size() - i));
      std::swap(units[i], units[j]);
    }
    units.resize(k);
    std::sort(units.begin(), units.end());
    kept.push_back(std::move(units));
  }
  return kept;
}

double time_model::at(double fraction) const {
  if (!known()) {
    return 0;
  }
  if (keep.size() != seconds.size()) {
    throw std::invalid_argument("time model: " + std::to_string(keep.size()) +
                                " fractions but " + std::to_string(seconds.size()) +
                                " times");
  }
  for (size_t i = 0; i < keep.size(); ++i) {
    if (!(keep[i] > 0) || (i > 0 && !(keep[i] > keep[i - 1]))) {
      throw std::invalid_argument(
          "time model: fractions must be positive and ascending, got " + str(keep[i]) +
          " at " + std::to_string(i));
    }
  }
  double t = 0;
  if (fraction <= keep.front()) {
    t = seconds.front() * fraction / keep.front();
  } else if (fraction >= keep.back()) {
    t = seconds.back();
  } else {
    size_t i = 1;
    while (keep[i] < fraction) {
      ++i;
    }
    double w = (fraction - keep[i - 1]) / (keep[i] - keep[i - 1]);
    t = seconds[i - 1] + w * (seconds[i] - seconds[i - 1]);
  }
  return t * scale;
}

std::vector<double> nondecreasing(std::vector<double> y) {
  // blocks of (mean, count); a block below the one before it merges into it
  std::vector<std::pair<double, size_t>> blocks;
  for (double v : y) {
    blocks.emplace_back(v, 1);
    while (blocks.size() > 1 && blocks[blocks.size() - 2].first > blocks.back().first) {
      auto [m, n] = blocks.back();
      blocks.pop_back();
      auto& prev = blocks.back();
      prev.first =
          (prev.first * static_cast<double>(prev.second) + m * static_cast<double>(n)) /
          static_cast<double>(prev.second + n);
      prev.second += n;
    }
  }
  size_t i = 0;
  for (auto [m, n] : blocks) {
    for (size_t k = 0; k < n; ++k) {
      y[i++] = m;
    }
  }
  return y;
}

double time_model::keep_for(double budget, double min_keep) const {
  if (!(min_keep > 0 && min_keep <= 1)) {
    throw std::invalid_argument("keep_for: min_keep must be in (0, 1], got " +
                                str(min_keep));
  }
  if (!known()) {
    return 1.0;
  }
  // Scanning from the top finds the largest fitting fraction even when a
  // noisy profile is not monotone. The relative tolerance lets a time that
  // equals the budget up to rounding (p / epochs x epochs) fit it.
  const double limit = budget + 1e-9 * std::max(1.0, std::abs(budget));
  const auto lowest = static_cast<int>(std::ceil(min_keep * 1000 - 1e-9));
  for (int i = 1000; i >= std::max(lowest, 1); --i) {
    double f = i / 1000.0;
    if (at(f) <= limit) {
      return f;
    }
  }
  return min_keep;
}

void time_model::observe(double fraction, double epochs, double measured) {
  double predicted = epochs * at(fraction);
  if (predicted > 0 && measured > 0) {
    double ratio = measured / (predicted / scale);
    scale = (scale + ratio) / 2;
  }
}

int64_t work_batches(int64_t epochs, int64_t per_epoch, double work) {
  if (!(work > 0 && work <= 1)) {
    throw std::invalid_argument("work must be in (0, 1], got " + str(work));
  }
  const int64_t all = epochs * per_epoch;
  if (all <= 0) {
    return 0;
  }
  auto part = static_cast<int64_t>(std::ceil(work * static_cast<double>(all) - 1e-9));
  return std::clamp<int64_t>(part, 1, all);
}

std::vector<uint32_t> select_clients(const std::vector<client_view>& clients,
                                     double fraction, uint64_t seed, uint64_t round) {
  if (!(fraction > 0)) {
    throw std::invalid_argument("select_clients: fraction must be > 0, got " +
                                str(fraction));
  }
  std::vector<uint32_t> ids;
  for (const auto& c : clients) {
    if (c.available) {
      ids.push_back(c.id);
    }
  }
  std::sort(ids.begin(), ids.end());
  if (fraction >= 1 || ids.empty()) {
    return ids;
  }
  const auto n = static_cast<long long>(ids.size());
  const auto count = static_cast<size_t>(
      std::min(n, std::max(1LL, std::llround(fraction * static_cast<double>(n)))));
  splitmix64 g(mix_seed(seed, round, 0x5e1));
  for (size_t i = 0; i < count; ++i) {
    auto j = i + static_cast<size_t>(g.below(ids.size() - i));
    std::swap(ids[i], ids[j]);
  }
  ids.resize(count);
  std::sort(ids.begin(), ids.end());
  return ids;
}

double pace(const std::vector<client_view>& clients,
            const std::vector<uint32_t>& selected, int64_t epochs, double slack) {
  auto ids = by_id(clients);
  std::vector<double> times;
  for (auto id : selected) {
    auto it = ids.find(id);
    if (it == ids.end()) {
      throw std::invalid_argument("pace: selected client " + std::to_string(id) +
                                  " is not among the clients");
    }
    if (it->second->time.known()) {
      times.push_back(full_round_s(*it->second, epochs));
    }
  }
  if (times.empty()) {
    return 0;
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  double median = n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  return median * (1 + slack);
}

double power_of_half_level(double keep, double min_keep) {
  auto level_of = [](double x) {
    double level = 1.0;
    // 1/2^60 is far below any sensible fraction and ends the loop for x <= 0
    for (int k = 0; k < 60 && level > x + 1e-9; ++k) {
      level /= 2;
    }
    return level;
  };
  return std::min(1.0, std::max(level_of(keep), level_of(min_keep)));
}

flat_params weighted_merge(const model_layout& layout, const flat_params& global,
                           const std::vector<update>& updates,
                           const std::vector<double>& weights, double divide_by,
                           double server_lr) {
  check_layout(layout);
  check_global(layout, global);
  if (weights.size() != updates.size()) {
    throw std::invalid_argument("weighted_merge: " + std::to_string(weights.size()) +
                                " weights for " + std::to_string(updates.size()) +
                                " updates");
  }
  if (!(divide_by >= 0)) {
    throw std::invalid_argument("weighted_merge: divide_by must be >= 0, got " +
                                str(divide_by));
  }
  const unit_sets whole = all_units(layout);
  std::vector<std::vector<double>> sum(global.size());
  std::vector<std::vector<double>> weight(global.size());
  for (size_t p = 0; p < global.size(); ++p) {
    sum[p].assign(global[p].size(), 0.0);
    weight[p].assign(global[p].size(), 0.0);
  }
  for (size_t u = 0; u < updates.size(); ++u) {
    const double w = weights[u];
    if (!(w >= 0) || !std::isfinite(w)) {
      throw std::invalid_argument("weighted_merge: weight of client " +
                                  std::to_string(updates[u].client) + " is " + str(w));
    }
    const auto& kept = whole_or(updates[u].kept, whole);
    check_sub(layout, kept, updates[u].delta);
    for (size_t p = 0; p < global.size(); ++p) {
      auto index = sub_to_global(layout, p, kept);
      const auto& delta = updates[u].delta[p];
      for (size_t i = 0; i < index.size(); ++i) {
        auto g = static_cast<size_t>(index[i]);
        sum[p][g] += w * static_cast<double>(delta[i]);
        weight[p][g] += w;
      }
    }
  }
  flat_params out = global;
  for (size_t p = 0; p < out.size(); ++p) {
    for (size_t g = 0; g < out[p].size(); ++g) {
      double step = 0;
      if (divide_by > 0) {
        step = server_lr * sum[p][g] / divide_by;
      } else if (weight[p][g] > 0) {
        step = sum[p][g] / weight[p][g];
      }
      out[p][g] = static_cast<float>(static_cast<double>(global[p][g]) + step);
    }
  }
  return out;
}

double staleness_weight(uint64_t tau) {
  return 1.0 / std::sqrt(1.0 + static_cast<double>(tau));
}

round_plan strategy::configure(uint64_t, const std::vector<client_view>&,
                               const model_layout&) const {
  throw std::logic_error(name() + " is asynchronous: it has no rounds, use next_task");
}

client_task strategy::next_task(const client_view&, uint64_t, const model_layout&) const {
  throw std::logic_error(name() + " is synchronous: it plans rounds, use configure");
}

namespace {

// How a synchronous strategy picks a straggler's width: whole (fedavg,
// deadline), or ELFISH's random, HeteroFL's prefix, FedRolex's rolling mask.
enum class width_rule { whole, random, prefix, rolling };

class sync_strategy : public strategy {
public:
  sync_strategy(std::string name, width_rule rule, bool deadline, const settings& s)
      : name_(std::move(name)), rule_(rule), deadline_(deadline), s_(s) {}

  std::string name() const override { return name_; }

  round_plan configure(uint64_t round, const std::vector<client_view>& clients,
                       const model_layout& layout) const override {
    check_round(round);
    auto ids = by_id(clients);
    auto selected = select_clients(clients, s_.fraction, s_.seed, round);
    const double p = pace(clients, selected, s_.local_epochs, s_.slack);
    const auto epochs = static_cast<double>(s_.local_epochs);
    round_plan plan;
    plan.pace_s = p;
    double slowest = 0;
    for (auto id : selected) {
      const auto& c = *ids.at(id);
      client_task t;
      t.client = id;
      t.base_version = round - 1;
      if (rule_ != width_rule::whole && c.time.known() &&
          full_round_s(c, s_.local_epochs) > p) {
        narrow(t, c, p, round, layout);
      }
      t.predicted_s = epochs * c.time.at(t.keep) * t.work;
      slowest = std::max(slowest, t.predicted_s);
      plan.tasks.push_back(std::move(t));
    }
    plan.wait_s = wait(p, slowest);
    return plan;
  }

  flat_params aggregate(const model_layout& layout, const flat_params& global,
                        const std::vector<update>& updates, uint64_t) const override {
    auto how = s_.weighting;
    if (how == aggregation::own) {
      // ELFISH balances soft-trained contributions by the kept fraction
      how = rule_ == width_rule::random ? aggregation::kept : aggregation::samples;
    }
    std::vector<double> w;
    w.reserve(updates.size());
    double all = 0;
    for (const auto& u : updates) {
      double f = how == aggregation::kept ? u.keep : 1.0;
      w.push_back(static_cast<double>(u.samples) * f);
      all += w.back();
    }
    // naive: divided by every client's weight, so a masked element's
    // missing delta counts as 0
    return weighted_merge(layout, global, updates, w,
                          how == aggregation::naive && all > 0 ? all : 0);
  }

private:
  // A straggler keeps the largest fraction whose predicted round fits the
  // pace; HeteroFL and FedRolex round it down to their power-of-1/2 levels.
  // When even that round is predicted past the pace, partial work trains
  // the part of it that fits.
  void narrow(client_task& t, const client_view& c, double p, uint64_t round,
              const model_layout& layout) const {
    const auto epochs = static_cast<double>(s_.local_epochs);
    double keep = c.time.keep_for(p / epochs, s_.min_keep);
    if (rule_ != width_rule::random) {
      keep = power_of_half_level(keep, s_.min_keep);
    }
    if (keep >= 1) {
      return;
    }
    t.keep = keep;
    const double round_s = epochs * c.time.at(keep);
    if (s_.partial_work && round_s > p * (1 + 1e-9)) {
      t.work = p / round_s;
    }
    switch (rule_) {
    case width_rule::random:
      t.kept = mask_random(layout, keep, s_.seed, round, c.id);
      break;
    case width_rule::prefix:
      t.kept = mask_prefix(layout, keep);
      break;
    case width_rule::rolling:
      t.kept = mask_rolling(layout, keep, round);
      break;
    case width_rule::whole:
      break;
    }
  }

  double wait(double p, double slowest) const {
    const double timeout_bound = 3 * slowest + 30;
    if (rule_ != width_rule::whole) {
      return s_.round_timeout_s > 0 ? s_.round_timeout_s : std::max(p, slowest) * 2 + 10;
    }
    if (deadline_) {
      double d = s_.deadline_s > 0 ? s_.deadline_s : p * s_.deadline_factor;
      if (d <= 0) {
        d = s_.round_timeout_s > 0 ? s_.round_timeout_s : timeout_bound;
      }
      // round_timeout_s bounds every synchronous round, a deadline too
      return s_.round_timeout_s > 0 ? std::min(d, s_.round_timeout_s) : d;
    }
    return s_.round_timeout_s > 0 ? s_.round_timeout_s : timeout_bound;
  }

  std::string name_;
  width_rule rule_;
  bool deadline_; ///< the round ends at a deadline, not when all answered
  settings s_;
};

class fedbuff_strategy : public strategy {
public:
  explicit fedbuff_strategy(const settings& s) : s_(s) {}

  std::string name() const override { return "fedbuff"; }
  bool asynchronous() const override { return true; }
  size_t buffer_size() const override { return s_.buffer; }

  client_task next_task(const client_view& client, uint64_t version,
                        const model_layout&) const override {
    client_task t;
    t.client = client.id;
    t.base_version = version;
    t.predicted_s = full_round_s(client, s_.local_epochs);
    return t;
  }

  // Divides by the updates given rather than the configured buffer, so a
  // final, partial buffer (the job ending) steps by the same rule.
  flat_params aggregate(const model_layout& layout, const flat_params& global,
                        const std::vector<update>& updates,
                        uint64_t version) const override {
    std::vector<double> w;
    w.reserve(updates.size());
    for (const auto& u : updates) {
      uint64_t tau = u.base_version > version ? 0 : version - u.base_version;
      w.push_back(staleness_weight(tau));
    }
    return weighted_merge(layout, global, updates, w, static_cast<double>(updates.size()),
                          s_.server_lr);
  }

private:
  settings s_;
};

} // namespace

std::string to_string(aggregation a) {
  switch (a) {
  case aggregation::own:
    return "own";
  case aggregation::kept:
    return "kept";
  case aggregation::samples:
    return "samples";
  case aggregation::naive:
    return "naive";
  }
  return "?";
}

aggregation parse_aggregation(const std::string& name) {
  for (auto a :
       {aggregation::own, aggregation::kept, aggregation::samples, aggregation::naive}) {
    if (to_string(a) == name) {
      return a;
    }
  }
  throw std::invalid_argument("unknown aggregation '" + name +
                              "'; known: own, kept, samples, naive");
}

namespace {

void check_settings(const std::string& name, const settings& s) {
  auto bad = [&](const std::string& what) {
    throw std::invalid_argument("strategy " + name + ": " + what);
  };
  if (s.local_epochs < 1) {
    bad("local_epochs must be >= 1, got " + std::to_string(s.local_epochs));
  }
  if (!(s.fraction > 0 && s.fraction <= 1)) {
    bad("fraction must be in (0, 1], got " + str(s.fraction));
  }
  if (!(s.min_keep > 0 && s.min_keep <= 1)) {
    bad("min_keep must be in (0, 1], got " + str(s.min_keep));
  }
  if (!(s.slack >= 0)) {
    bad("slack must be >= 0, got " + str(s.slack));
  }
  if (!(s.deadline_s >= 0)) {
    bad("deadline_s must be >= 0, got " + str(s.deadline_s));
  }
  if (!(s.deadline_factor > 0)) {
    bad("deadline_factor must be > 0, got " + str(s.deadline_factor));
  }
  if (!(s.round_timeout_s >= 0)) {
    bad("round_timeout_s must be >= 0, got " + str(s.round_timeout_s));
  }
  if (s.buffer < 1) {
    bad("buffer must be >= 1, got " + std::to_string(s.buffer));
  }
  if (s.weighting != aggregation::own && name == "fedbuff") {
    bad("fedbuff steps by staleness; aggregation " + to_string(s.weighting) +
        " is for the synchronous strategies");
  }
  if (!(s.server_lr > 0)) {
    bad("server_lr must be > 0, got " + str(s.server_lr));
  }
}

} // namespace

std::vector<std::string> strategy_names() {
  return {"fedavg", "deadline", "elfish", "heterofl", "fedrolex", "fedbuff"};
}

std::unique_ptr<strategy> make_strategy(const std::string& name, const settings& s) {
  static const std::map<std::string, width_rule> sync = {
      {"fedavg", width_rule::whole},
      {"deadline", width_rule::whole},
      {"elfish", width_rule::random},
      {"heterofl", width_rule::prefix},
      {"fedrolex", width_rule::rolling}};
  auto it = sync.find(name);
  if (it == sync.end() && name != "fedbuff") {
    std::string known;
    for (const auto& n : strategy_names()) {
      known += (known.empty() ? "" : ", ") + n;
    }
    throw std::invalid_argument("unknown federated strategy '" + name +
                                "'; known: " + known);
  }
  check_settings(name, s);
  if (it == sync.end()) {
    return std::make_unique<fedbuff_strategy>(s);
  }
  return std::make_unique<sync_strategy>(name, it->second, name == "deadline", s);
}

} // namespace salamander::algorithms::fed
