// Split learning's pure parts (see split.hpp for the methods and the
// choices). Everything is a function of its arguments and the orchestrator
// state passed in: the send plan has no randomness (ties go to the lower
// index), so a round's plan is the same on every machine and can be
// recomputed after a restart from the saved orchestrator.
#include "algorithms/split.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace salamander::split {

namespace {

std::string str(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::string joined_names() {
  std::string s;
  for (const auto& n : method_names()) {
    s += (s.empty() ? "" : ", ") + n;
  }
  return s;
}

void check_rounds(int64_t rounds, double local_fraction) {
  if (rounds < 1) {
    throw std::invalid_argument("split: rounds must be >= 1, got " +
                                std::to_string(rounds));
  }
  if (!(local_fraction >= 0.0 && local_fraction <= 1.0)) {
    throw std::invalid_argument("split: local fraction must be in [0, 1], got " +
                                str(local_fraction));
  }
}

} // namespace

// ---- methods

std::vector<std::string> method_names() {
  return {"vanilla", "splitfed", "adasplit"};
}

method parse_method(const std::string& name) {
  if (name == "vanilla") {
    return method::vanilla;
  }
  if (name == "splitfed") {
    return method::splitfed;
  }
  if (name == "adasplit") {
    return method::adasplit;
  }
  throw std::invalid_argument("unknown split method '" + name +
                              "'; known: " + joined_names());
}

std::string to_string(method m) {
  switch (m) {
  case method::vanilla:
    return "vanilla";
  case method::splitfed:
    return "splitfed";
  case method::adasplit:
    return "adasplit";
  }
  throw std::invalid_argument("split method " + std::to_string(static_cast<int>(m)) +
                              " is not one of " + joined_names());
}

// ---- AdaSplit's phases

int64_t local_rounds(int64_t rounds, double local_fraction) {
  check_rounds(rounds, local_fraction);
  const double exact = local_fraction * static_cast<double>(rounds);
  const auto n = static_cast<int64_t>(std::floor(exact + 0.5 + 1e-9));
  return std::clamp<int64_t>(n, 0, rounds);
}

bool in_local_phase(int64_t round, int64_t rounds, double local_fraction) {
  if (round < 1) {
    throw std::invalid_argument("split: rounds are numbered from 1, got " +
                                std::to_string(round));
  }
  return round <= local_rounds(rounds, local_fraction);
}

// ---- AdaSplit's orchestrator

orchestrator::orchestrator(size_t clients)
    : loss(clients, std::numeric_limits<double>::quiet_NaN()), picks(clients, 0) {}

std::vector<std::vector<uint8_t>> plan_sends(const std::vector<int64_t>& batches,
                                             double fraction, double explore,
                                             orchestrator& o, double floor) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw std::invalid_argument("split: send fraction must be in (0, 1], got " +
                                str(fraction));
  }
  if (!(explore >= 0.0 && std::isfinite(explore))) {
    throw std::invalid_argument("split: explore must be finite and >= 0, got " +
                                str(explore));
  }
  if (!(floor >= 0.0 && floor <= 1.0)) {
    throw std::invalid_argument("split: the send floor must be in [0, 1], got " +
                                str(floor));
  }
  const size_t n = batches.size();
  if (o.loss.size() != n || o.picks.size() != n) {
    throw std::invalid_argument("split: " + std::to_string(n) +
                                " batch counts for an orchestrator of " +
                                std::to_string(o.loss.size()) + " clients (" +
                                std::to_string(o.picks.size()) + " pick counts)");
  }
  int64_t iterations = 0;
  for (size_t i = 0; i < n; ++i) {
    if (batches[i] < 0) {
      throw std::invalid_argument("split: client " + std::to_string(i) +
                                  " has a negative batch count " +
                                  std::to_string(batches[i]));
    }
    iterations = std::max(iterations, batches[i]);
  }

  std::vector<std::vector<uint8_t>> send(n);
  for (size_t i = 0; i < n; ++i) {
    send[i].assign(static_cast<size_t>(batches[i]), 0);
  }
  std::vector<size_t> eligible;
  std::vector<double> priority(n, 0.0);
  std::vector<int64_t> round_picks(n, 0);
  std::vector<uint8_t> starved(n, 0);
  for (int64_t t = 0; t < iterations; ++t) {
    eligible.clear();
    for (size_t i = 0; i < n; ++i) {
      if (batches[i] > t) {
        eligible.push_back(i);
        // eligible at t = 0 .. t: t + 1 iterations this round
        starved[i] = floor > 0 && static_cast<double>(round_picks[i] + 1) <=
                                      floor * fraction * static_cast<double>(t + 1);
      }
    }
    const double log_total = std::log1p(static_cast<double>(o.total_picks));
    for (auto i : eligible) {
      priority[i] =
          std::isnan(o.loss[i])
              ? std::numeric_limits<double>::infinity()
              : o.loss[i] + explore * std::sqrt(log_total /
                                                (1.0 + static_cast<double>(o.picks[i])));
    }
    const auto count = static_cast<double>(eligible.size());
    const auto k = std::clamp<size_t>(
        static_cast<size_t>(std::ceil(fraction * count - 1e-9)), 1, eligible.size());
    // Highest priority first; unseen clients (all +infinity) rotate: the
    // least picked first. Other ties keep index order, eligible being sorted.
    std::stable_sort(eligible.begin(), eligible.end(), [&](size_t a, size_t b) {
      if (starved[a] != starved[b]) {
        return starved[a] > starved[b];
      }
      if (starved[a]) { // both: the fewer picks this round first (same eligibility)
        return round_picks[a] < round_picks[b];
      }
      if (std::isinf(priority[a]) && std::isinf(priority[b])) {
        return o.picks[a] < o.picks[b];
      }
      return priority[a] > priority[b];
    });
    for (size_t j = 0; j < k; ++j) {
      const auto i = eligible[j];
      send[i][static_cast<size_t>(t)] = 1;
      ++round_picks[i];
      ++o.picks[i];
      ++o.total_picks;
    }
  }
  return send;
}

void observe_loss(orchestrator& o, size_t client, double value, double decay) {
  if (client >= o.loss.size()) {
    throw std::invalid_argument("split: client " + std::to_string(client) +
                                " of an orchestrator of " +
                                std::to_string(o.loss.size()) + " clients");
  }
  if (!(decay >= 0.0 && decay < 1.0)) {
    throw std::invalid_argument("split: loss decay must be in [0, 1), got " + str(decay));
  }
  if (!std::isfinite(value)) {
    throw std::invalid_argument("split: client " + std::to_string(client) +
                                " reported a non-finite loss " + str(value));
  }
  double& l = o.loss[client];
  l = std::isnan(l) ? value : decay * l + (1.0 - decay) * value;
}

// ---- costs of a cut

cut_costs costs_at_cut(const std::vector<double>& layer_forward_flops,
                       const std::vector<int64_t>& layer_output_bytes,
                       const std::vector<int64_t>& layer_param_bytes, size_t cut) {
  const size_t n = layer_forward_flops.size();
  if (layer_output_bytes.size() != n || layer_param_bytes.size() != n) {
    throw std::invalid_argument(
        "split: per-layer figures disagree on the layer count: " + std::to_string(n) +
        " FLOPs, " + std::to_string(layer_output_bytes.size()) + " output sizes, " +
        std::to_string(layer_param_bytes.size()) + " parameter sizes");
  }
  if (n < 2) {
    throw std::invalid_argument("split: a model of n = " + std::to_string(n) +
                                " layers cannot be cut (cuts need n >= 2 and lie in "
                                "[1, n-1])");
  }
  if (cut < 1 || cut > n - 1) {
    throw std::invalid_argument("split: cut " + std::to_string(cut) + " is outside [1, " +
                                std::to_string(n - 1) +
                                "] for a model of n = " + std::to_string(n) + " layers");
  }
  for (size_t l = 0; l < n; ++l) {
    if (!(layer_forward_flops[l] >= 0.0) || layer_output_bytes[l] < 0 ||
        layer_param_bytes[l] < 0) {
      throw std::invalid_argument("split: layer " + std::to_string(l) +
                                  " has a negative (or NaN) cost figure");
    }
  }
  cut_costs c;
  for (size_t l = 0; l < n; ++l) {
    if (l < cut) {
      c.client_forward_flops += layer_forward_flops[l];
      c.client_param_bytes += layer_param_bytes[l];
    } else {
      c.server_forward_flops += layer_forward_flops[l];
      c.server_param_bytes += layer_param_bytes[l];
    }
  }
  c.activation_bytes = layer_output_bytes[cut - 1];
  return c;
}

double aux_head_flops(int64_t activation_bytes, int64_t classes) {
  if (activation_bytes < 0 || activation_bytes % 4 != 0) {
    throw std::invalid_argument(
        "split: activation bytes must be a non-negative multiple of 4 (float32), got " +
        std::to_string(activation_bytes));
  }
  if (classes < 1) {
    throw std::invalid_argument("split: an auxiliary head needs >= 1 class, got " +
                                std::to_string(classes));
  }
  const auto in = static_cast<double>(activation_bytes / 4);
  const auto out = static_cast<double>(classes);
  return 2.0 * in * out + out;
}

// ---- accounting and scoring

traffic& traffic::operator+=(const traffic& o) {
  up += o.up;
  down += o.down;
  client_flops += o.client_flops;
  server_flops += o.server_flops;
  return *this;
}

double c3_score(double accuracy, double bytes, double client_flops,
                const c3_budget& budget) {
  if (!(budget.bytes > 0.0) || !(budget.client_flops > 0.0)) {
    throw std::invalid_argument("split: C3 budgets must be > 0, got " +
                                str(budget.bytes) + " bytes and " +
                                str(budget.client_flops) + " FLOPs");
  }
  if (!(bytes >= 0.0) || !(client_flops >= 0.0)) {
    throw std::invalid_argument("split: C3 costs must be >= 0, got " + str(bytes) +
                                " bytes and " + str(client_flops) + " FLOPs");
  }
  const double acc = std::isnan(accuracy) ? 0.0 : std::clamp(accuracy, 0.0, 1.0);
  return acc * std::exp2(-bytes / budget.bytes) *
         std::exp2(-client_flops / budget.client_flops);
}

std::vector<double> sample_weights(const std::vector<int64_t>& samples) {
  int64_t sum = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i] < 0) {
      throw std::invalid_argument("split: client " + std::to_string(i) +
                                  " has a negative sample count " +
                                  std::to_string(samples[i]));
    }
    sum += samples[i];
  }
  std::vector<double> w(samples.size());
  if (samples.empty()) {
    return w;
  }
  if (sum == 0) {
    std::fill(w.begin(), w.end(), 1.0 / static_cast<double>(samples.size()));
    return w;
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    w[i] = static_cast<double>(samples[i]) / static_cast<double>(sum);
  }
  return w;
}

} // namespace salamander::split
