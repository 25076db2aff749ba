#include "algorithms/partitioner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_map>

namespace salamander::algorithms {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

std::string mb(double bytes) {
  char buf[32];
  if (bytes >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  } else if (bytes >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  } else if (bytes >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1f KB", bytes / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  }
  return buf;
}

// Prefix sums and the cost arithmetic shared by the searches.
struct cost_model {
  const plan_request& req;
  size_t layers;
  std::vector<std::vector<double>> time_prefix; // [device][l]: compute of [0, l)
  std::vector<double> param_prefix;
  std::vector<double> act_prefix;

  explicit cost_model(const plan_request& r) : req(r), layers(r.layers.size()) {
    param_prefix.assign(layers + 1, 0);
    act_prefix.assign(layers + 1, 0);
    for (size_t l = 0; l < layers; ++l) {
      param_prefix[l + 1] = param_prefix[l] + r.layers[l].param_bytes;
      act_prefix[l + 1] = act_prefix[l] + r.layers[l].activation_bytes;
    }
    for (auto& d : r.devices) {
      std::vector<double> t(layers + 1, 0);
      for (size_t l = 0; l < layers; ++l) {
        double step = d.forward_s[l];
        if (r.mode == plan_mode::training) {
          step += d.backward_s[l];
        }
        t[l + 1] = t[l] + step;
      }
      time_prefix.push_back(std::move(t));
    }
  }

  /// A stage's time on the device: its layers, plus the other work the
  /// device carries (device_profile::busy_s) when it runs any.
  double compute(size_t device, size_t p, size_t q) const {
    return time_prefix[device][q] - time_prefix[device][p] +
           (q > p ? req.devices[device].busy_s : 0.0);
  }

  double memory(size_t p, size_t q, int in_flight) const {
    double weights = param_prefix[q] - param_prefix[p];
    bool training = req.mode == plan_mode::training;
    double state = training ? req.optimizer_state_factor : 0.0;
    // live weights (+ gradients and optimizer state), and each kept
    // snapshot's copy of the weights (+ optimizer state)
    double factor = (training ? 2.0 + state : 1.0) +
                    static_cast<double>(req.kept_snapshots) * (1.0 + state);
    if (training && req.schedule == plan_schedule::async) {
      // the versions in use, and the older ones each kept snapshot stashes
      factor += static_cast<double>(req.async_delay + 1) +
                static_cast<double>(req.kept_snapshots) * std::max(req.async_delay, 0);
    }
    auto mbs = static_cast<double>(req.micro_batch_size);
    if (training) {
      // what every micro-batch in flight keeps for its backward pass
      return weights * factor + (act_prefix[q] - act_prefix[p]) * mbs * in_flight;
    }
    // inference, PipeEdge's model: each micro-batch held needs an input and
    // an output buffer (the first stage's input is the request's), and the
    // one being computed the working set of one layer at a time. Both
    // buffers are taken at the largest tensor that crosses into, within or
    // out of the range: that bounds the intermediate ones, and keeps a
    // range's memory at least that of any range inside it, as the search
    // needs.
    double largest = 0;
    double working = 0;
    for (size_t l = p > 0 ? p - 1 : 0; l < q; ++l) {
      largest = std::max(largest, req.layers[l].output_bytes);
    }
    for (size_t l = p; l < q; ++l) {
      working = std::max(working, req.layers[l].activation_bytes);
    }
    double buffers = 2 * largest;
    return weights * factor + (buffers * in_flight + working) * mbs;
  }

  bool fits(size_t device, size_t p, size_t q, int in_flight) const {
    return memory(p, q, in_flight) <= req.devices[device].memory_bytes;
  }

  // Transfer across the cut before layer q between devices a and b.
  double link(size_t a, size_t b, size_t q) const {
    auto& da = req.devices[a];
    auto& db = req.devices[b];
    double rate = std::min(da.link_bytes_per_s, db.link_bytes_per_s);
    double bytes =
        req.layers[q - 1].output_bytes * static_cast<double>(req.micro_batch_size);
    double directions = req.mode == plan_mode::training ? 2.0 : 1.0;
    return directions * (bytes / rate + std::max(da.link_latency_s, db.link_latency_s));
  }

  // Whether a plan of k stages may be chosen (the request's fixed count).
  bool count_allowed(size_t k) const {
    return req.stages == 0 || req.mode != plan_mode::training || k == req.stages;
  }

  // Bottleneck steps per batch for `stages` stages (see partition_plan).
  double steps(size_t stages) const {
    if (req.mode != plan_mode::training) {
      return 1.0;
    }
    double fill = static_cast<double>(stages) - 1.0;
    if (req.schedule == plan_schedule::async) {
      fill /= static_cast<double>(std::max(1, req.segment_batches));
    }
    return static_cast<double>(req.micro_batches) + fill;
  }

  // Micro-batches in flight for a stage with `from_end` stages from it to the
  // end of the pipeline (itself included).
  int flight(size_t from_end) const {
    if (req.mode == plan_mode::inference) {
      return std::max(1, req.inference_in_flight);
    }
    if (req.schedule == plan_schedule::gpipe) {
      return req.micro_batches;
    }
    if (req.schedule == plan_schedule::async) {
      // (the warm-up of the first of `from_end` stages: at least what stage
      // S - from_end of a longer pipeline holds, whose stage 0 has less room)
      return static_cast<int>(async_warmup(
                 static_cast<int>(from_end), 0, req.micro_batches,
                 static_cast<uint64_t>(std::max(req.async_delay, 0)), req.async_slack)) +
             1;
    }
    return std::min(static_cast<int>(from_end), req.micro_batches);
  }
};

void validate(const plan_request& req) {
  if (req.layers.empty()) {
    throw std::invalid_argument("nothing to plan: the model has no layers");
  }
  if (req.devices.empty()) {
    throw std::invalid_argument("nothing to plan on: no devices");
  }
  if (req.micro_batch_size < 1 || req.micro_batches < 1) {
    throw std::invalid_argument("micro-batch size and count must be >= 1");
  }
  if (req.stages > req.devices.size() || req.stages > req.layers.size()) {
    throw std::invalid_argument(
        std::to_string(req.stages) + " stages were asked for, but there are only " +
        std::to_string(req.devices.size()) + " devices and " +
        std::to_string(req.layers.size()) + " layers (a stage needs one of each)");
  }
  for (auto& d : req.devices) {
    if (d.forward_s.size() != req.layers.size() ||
        d.backward_s.size() != req.layers.size()) {
      throw std::invalid_argument(
          "device " + d.name + " has timings for " + std::to_string(d.forward_s.size()) +
          " layers, the model has " + std::to_string(req.layers.size()));
    }
    if (!(d.link_bytes_per_s > 0)) {
      throw std::invalid_argument("device " + d.name + " has no positive link rate");
    }
    if (!(d.busy_s >= 0)) {
      throw std::invalid_argument("device " + d.name +
                                  " has a negative or missing busy time");
    }
    for (size_t l = 0; l < req.layers.size(); ++l) {
      if (!(d.forward_s[l] >= 0) || !(d.backward_s[l] >= 0)) {
        throw std::invalid_argument("device " + d.name +
                                    " has a negative or missing time for "
                                    "layer " +
                                    req.layers[l].name);
      }
    }
  }
}

// Explains why no plan fits, naming a layer and a device where it can.
[[noreturn]] void explain_no_fit(const plan_request& req, const cost_model& cm) {
  size_t biggest = 0;
  for (size_t d = 1; d < req.devices.size(); ++d) {
    if (req.devices[d].memory_bytes > req.devices[biggest].memory_bytes) {
      biggest = d;
    }
  }
  auto& big = req.devices[biggest];
  for (size_t l = 0; l < req.layers.size(); ++l) {
    double need = cm.memory(l, l + 1, cm.flight(1));
    if (need > big.memory_bytes) {
      throw plan_error(
          "layer " + req.layers[l].name + " alone needs " + mb(need) + " (weights" +
          (req.mode == plan_mode::training ? ", gradients, optimizer state" : "") +
          (req.kept_snapshots > 0 ? ", kept snapshots" : "") +
          " and activations) but the largest device, " + big.name + ", has " +
          mb(big.memory_bytes));
    }
  }
  double total = 0, need = cm.memory(0, req.layers.size(), 1);
  for (auto& d : req.devices) {
    total += d.memory_bytes;
  }
  if (need > total) {
    throw plan_error("the model needs at least " + mb(need) + " but all " +
                     std::to_string(req.devices.size()) + " devices together have " +
                     mb(total));
  }
  throw plan_error(
      "no split of the model into contiguous ranges fits the devices' memory ("
      "model " +
      mb(need) + " before activations in flight, devices " + mb(total) +
      " together); add a device or lower the micro-batch size");
}

// --- ordered search: a fixed device order, devices may be skipped ----------

struct ordered_result {
  double bottleneck = inf;
  std::vector<stage_assignment> stages;
};

// Only plans whose objective is below `cap` count (an entry that cannot
// beat it is cut as early as it can be; none: bottleneck stays inf).
ordered_result search_ordered(const cost_model& cm, const std::vector<size_t>& order,
                              double cap = inf) {
  const size_t n = order.size(), L = cm.layers;
  // the stage count matters for 1F1B's in-flight activations and for the
  // flush in training; inference streams and ignores it
  bool by_count = cm.req.mode == plan_mode::training;
  const size_t K = by_count ? std::min(n, L) : 1;
  // best[(i * (L + 1) + p) * K + (k - 1)]
  std::vector<double> best(n * (L + 1) * K, inf);
  std::vector<std::pair<uint32_t, uint32_t>> choice(best.size(), {0, 0}); // (q, next i)
  auto at = [&](size_t i, size_t p, size_t k) { return (i * (L + 1) + p) * K + (k - 1); };
  for (size_t i = n; i-- > 0;) {
    size_t dev = order[i];
    for (size_t p = L; p-- > 0;) {
      for (size_t k = 1; k <= K; ++k) {
        size_t from_end = by_count ? k : 1;
        int fl = cm.flight(from_end);
        // a chain through this entry has at least k stages, so at least
        // steps(k) steps per batch
        double b = cap / cm.steps(by_count ? k : 1);
        bool found = false;
        // last stage of the chain (k == 1, or any chain when counts do not matter)
        if ((k == 1) && cm.fits(dev, p, L, fl) && cm.compute(dev, p, L) < b) {
          b = cm.compute(dev, p, L);
          found = true;
          choice[at(i, p, k)] = {static_cast<uint32_t>(L), static_cast<uint32_t>(n)};
        }
        if (by_count && k == 1) {
          best[at(i, p, k)] = found ? b : inf;
          continue;
        }
        size_t kn = by_count ? k - 1 : 1;
        for (size_t q = p + 1; q < L; ++q) {
          if (!cm.fits(dev, p, q, fl)) {
            break; // memory only grows with q
          }
          double c = cm.compute(dev, p, q);
          if (c >= b) {
            break; // compute only grows with q
          }
          for (size_t i2 = i + 1; i2 < n; ++i2) {
            double rest = best[at(i2, q, kn)];
            if (rest >= b) {
              continue;
            }
            double v = std::max({c, rest, cm.link(dev, order[i2], q)});
            if (v < b) {
              b = v;
              found = true;
              choice[at(i, p, k)] = {static_cast<uint32_t>(q), static_cast<uint32_t>(i2)};
            }
          }
        }
        best[at(i, p, k)] = found ? b : inf;
      }
    }
  }
  ordered_result out;
  size_t bi = n, bk = 0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 1; k <= K; ++k) {
      if (!cm.count_allowed(k)) {
        continue;
      }
      double v = best[at(i, 0, k)] * cm.steps(k);
      if (v < out.bottleneck) {
        out.bottleneck = v;
        bi = i;
        bk = k;
      }
    }
  }
  if (bi == n) {
    return out;
  }
  size_t i = bi, p = 0, k = bk;
  while (p < L) {
    auto [q, next] = choice[at(i, p, k)];
    out.stages.push_back({order[i], p, q, 0, 0, 0});
    p = q;
    i = next;
    k = by_count ? k - 1 : 1;
  }
  return out;
}

// --- local search over device chains (many devices) ------------------------
//
// A chain is the devices a plan uses, in stage order. The best split of the
// layers over one chain (every device a non-empty stage) is a smaller DP
// than the ordered search's, and bounds on where each stage can start
// dismiss most chains that cannot beat the best so far in O(L). The search
// moves from chain to chain by removing, inserting or replacing a device,
// swapping two, or moving one elsewhere, taking the best move that lowers
// the objective; at a local optimum it kicks (iterated local search, as in
// Lourenco, Martin and Stutzle 2003): it descends again from each
// neighbour in turn, and moves on when one of those descents ends lower.
// Neighbours come in a fixed order and there is no randomness: the same
// request gives the same plan.

// Every chain one move away from `chain`, in a fixed order, until `visit`
// returns true (it took the chain); whether it did.
template <class Visit>
bool for_each_neighbour(const std::vector<size_t>& chain, size_t devices, Visit visit) {
  const size_t S = chain.size();
  std::vector<bool> used(devices, false);
  for (auto d : chain) {
    used[d] = true;
  }
  std::vector<size_t> c;
  auto at = [](size_t i) { return static_cast<std::ptrdiff_t>(i); };
  // remove one (fewer stages: less fill and drain)
  for (size_t i = 0; S > 1 && i < S; ++i) {
    c = chain;
    c.erase(c.begin() + at(i));
    if (visit(c)) {
      return true;
    }
  }
  // replace one by an unused device
  for (size_t i = 0; i < S; ++i) {
    for (size_t u = 0; u < devices; ++u) {
      if (!used[u]) {
        c = chain;
        c[i] = u;
        if (visit(c)) {
          return true;
        }
      }
    }
  }
  // swap two
  for (size_t i = 0; i < S; ++i) {
    for (size_t j = i + 1; j < S; ++j) {
      c = chain;
      std::swap(c[i], c[j]);
      if (visit(c)) {
        return true;
      }
    }
  }
  // move one elsewhere (to a neighbouring place is a swap, done above)
  for (size_t i = 0; i < S; ++i) {
    for (size_t j = 0; j < S; ++j) {
      if (j + 1 < i || j > i + 1) {
        c = chain;
        c.erase(c.begin() + at(i));
        c.insert(c.begin() + at(j), chain[i]);
        if (visit(c)) {
          return true;
        }
      }
    }
  }
  // insert an unused device anywhere
  for (size_t u = 0; u < devices; ++u) {
    for (size_t i = 0; !used[u] && i <= S; ++i) {
      c = chain;
      c.insert(c.begin() + at(i), u);
      if (visit(c)) {
        return true;
      }
    }
  }
  return false;
}

// Improving moves per descent, at most (each lowers the objective, so a
// descent ends anyway; this bounds its time).
constexpr int max_moves = 64;
// Chain splits tried per plan, at most: bounds the kicks' time. Small
// instances end well within it; 64 layers on 16 devices spend it in about
// 1.5 ms (most splits are cut by the bounds within a microsecond or so).
constexpr size_t max_evaluations = 4000;

class chain_search {
public:
  explicit chain_search(const cost_model& cm)
      : cm_(cm), L_(cm.layers), by_count_(cm.req.mode == plan_mode::training) {}

  // The best split of the layers over exactly `chain`, in order; only
  // splits whose objective is below `cap` count (bottleneck stays inf when
  // none).
  ordered_result split(const std::vector<size_t>& chain, double cap) {
    ++evaluations_;
    ordered_result out;
    const size_t S = chain.size();
    if (S == 0 || S > L_ || !cm_.count_allowed(S)) {
      return out;
    }
    const double limit = cap / cm_.steps(S);
    // a stage that a plan below the cap could have, links aside (they only
    // rule out more): within memory and below the limit on compute
    auto ok = [&](size_t s, size_t p, size_t q) {
      return cm_.fits(chain[s], p, q, flight(s, S)) &&
             cm_.compute(chain[s], p, q) < limit;
    };
    // bounds on where stage s can start, links aside: hi_ greedily forward
    // (every stage as long as it may be), lo_ greedily backward; a range
    // that is ok contains only ok ranges, so neither greedy can be beaten
    hi_.assign(S + 1, 0);
    lo_.assign(S + 1, L_);
    for (size_t s = 0; s < S; ++s) {
      size_t p = hi_[s], q = p;
      while (q < last_end(s, S) && ok(s, p, q + 1)) {
        ++q;
      }
      hi_[s + 1] = q; // (q == p: stage s can only end before hi_[s])
    }
    if (!ok(S - 1, hi_[S - 1], L_)) {
      return out;
    }
    for (size_t s = S; s-- > 0;) {
      size_t q = lo_[s + 1], p = q;
      while (p > s && ok(s, p - 1, q)) {
        --p;
      }
      lo_[s] = p;
    }
    if (lo_[0] > 0) {
      return out;
    }
    // best[s][p]: layers [p, L) on chain[s..S), one stage each
    best_.assign(S * (L_ + 1), inf);
    cut_.assign(S * (L_ + 1), 0);
    auto at = [&](size_t s, size_t p) { return s * (L_ + 1) + p; };
    for (size_t s = S; s-- > 0;) {
      const size_t dev = chain[s];
      const int fl = flight(s, S);
      const size_t end = std::min(last_end(s, S), hi_[s + 1]);
      for (size_t p = std::max(s, lo_[s]); p <= hi_[s] && p < last_end(s, S); ++p) {
        double b = limit;
        uint32_t pick = 0;
        if (s + 1 == S) {
          if (ok(s, p, L_)) {
            b = cm_.compute(dev, p, L_);
            pick = static_cast<uint32_t>(L_);
          }
        } else {
          const size_t next = chain[s + 1];
          for (size_t q = std::max(p + 1, lo_[s + 1]); q <= end; ++q) {
            if (!cm_.fits(dev, p, q, fl)) {
              break; // memory only grows with q
            }
            double c = cm_.compute(dev, p, q);
            if (c >= b) {
              break; // compute only grows with q
            }
            double rest = best_[at(s + 1, q)];
            if (rest >= b) {
              continue;
            }
            double v = std::max({c, rest, cm_.link(dev, next, q)});
            if (v < b) {
              b = v;
              pick = static_cast<uint32_t>(q);
            }
          }
        }
        if (pick != 0) {
          best_[at(s, p)] = b;
          cut_[at(s, p)] = pick;
        }
      }
    }
    if (std::isinf(best_[at(0, 0)])) {
      return out;
    }
    out.bottleneck = best_[at(0, 0)] * cm_.steps(S);
    for (size_t s = 0, p = 0; s < S; ++s) {
      size_t q = cut_[at(s, p)];
      out.stages.push_back({chain[s], p, q, 0, 0, 0});
      p = q;
    }
    return out;
  }

  // How far `chain` is from fitting: over its splits, the smallest largest
  // ratio of a stage's memory to its device's (at most 1: it fits).
  double overflow(const std::vector<size_t>& chain) {
    const size_t S = chain.size();
    if (S == 0 || S > L_ || !cm_.count_allowed(S)) {
      return inf;
    }
    auto ratio = [&](size_t s, size_t p, size_t q) {
      return cm_.memory(p, q, flight(s, S)) / cm_.req.devices[chain[s]].memory_bytes;
    };
    // worst[s][p]: layers [p, L) on chain[s..S)
    best_.assign(S * (L_ + 1), inf);
    auto at = [&](size_t s, size_t p) { return s * (L_ + 1) + p; };
    for (size_t p = S - 1; p < L_; ++p) {
      best_[at(S - 1, p)] = ratio(S - 1, p, L_);
    }
    for (size_t s = S - 1; s-- > 0;) {
      for (size_t p = s; p < last_end(s, S); ++p) {
        double b = inf;
        for (size_t q = p + 1; q <= last_end(s, S); ++q) {
          b = std::min(b, std::max(ratio(s, p, q), best_[at(s + 1, q)]));
        }
        best_[at(s, p)] = b;
      }
    }
    return best_[at(0, 0)];
  }

  // From a plan: descends to a local optimum, then kicks: descends again
  // from each of its neighbours in turn (reaching chains two moves and more
  // away), and the first descent that ends lower is the new optimum to kick
  // from. Stops when no kick helps, or the evaluations are spent.
  ordered_result improve(ordered_result start) {
    ordered_result best = descend(std::move(start));
    for (int round = 0; round < max_moves && evaluations_ < max_evaluations; ++round) {
      bool improved = for_each_neighbour(chain_of(best), cm_.req.devices.size(),
                                         [&](const std::vector<size_t>& c) {
                                           if (evaluations_ >= max_evaluations) {
                                             return true;
                                           }
                                           auto kicked = split(c, inf);
                                           if (kicked.stages.empty()) {
                                             return false;
                                           }
                                           auto local = descend(std::move(kicked));
                                           if (local.bottleneck < best.bottleneck) {
                                             best = std::move(local);
                                             return true;
                                           }
                                           return false;
                                         });
      if (!improved) {
        break;
      }
    }
    return best;
  }

  // When no order gave a plan: descends on overflow from `chain` until a
  // chain fits; its best plan (none if no chain was found that fits).
  ordered_result fit(std::vector<size_t> chain) {
    double worst = overflow(chain);
    for (int move = 0; move < max_moves && worst > 1.0; ++move) {
      double step = worst;
      std::vector<size_t> next;
      for_each_neighbour(chain, cm_.req.devices.size(),
                         [&](const std::vector<size_t>& c) {
                           if (double o = overflow(c); o < step) {
                             step = o;
                             next = c;
                           }
                           return false;
                         });
      if (next.empty()) {
        break;
      }
      worst = step;
      chain = std::move(next);
    }
    return worst <= 1.0 ? split(chain, inf) : ordered_result{};
  }

private:
  static std::vector<size_t> chain_of(const ordered_result& r) {
    std::vector<size_t> chain;
    for (auto& s : r.stages) {
      chain.push_back(s.device);
    }
    return chain;
  }

  // The best improving move, again and again, until none improves (a local
  // optimum over the moves), max_moves were taken or the evaluations are
  // spent. (The best rather than the first: after a kick, the first is
  // often the move that undoes it.)
  ordered_result descend(ordered_result start) {
    ordered_result best = std::move(start);
    auto chain = chain_of(best);
    for (int move = 0; move < max_moves; ++move) {
      ordered_result step;
      std::vector<size_t> next;
      for_each_neighbour(
          chain, cm_.req.devices.size(), [&](const std::vector<size_t>& c) {
            if (evaluations_ >= max_evaluations) {
              return true;
            }
            auto r = split(c, std::min(best.bottleneck, step.bottleneck));
            if (r.bottleneck < std::min(best.bottleneck, step.bottleneck)) {
              step = std::move(r);
              next = c;
            }
            return false;
          });
      if (step.stages.empty()) {
        break;
      }
      best = std::move(step);
      chain = std::move(next);
    }
    return best;
  }

  int flight(size_t s, size_t S) const { return cm_.flight(by_count_ ? S - s : 1); }
  // the last layer stage s of S may end at: one layer for each after it
  size_t last_end(size_t s, size_t S) const { return L_ - (S - 1 - s); }

  const cost_model& cm_;
  const size_t L_;
  const bool by_count_;
  std::vector<double> best_;
  std::vector<uint32_t> cut_;
  std::vector<size_t> lo_, hi_;
  size_t evaluations_ = 0; ///< splits tried, over every search of this plan
};

// --- exact search: any subset and order, of devices or of device types ----
//
// best(p, t, free, k): the smallest bottleneck for layers [p, L) on a chain
// whose first stage runs on a device of type t, with k stages (training)
// and `free` devices of each type left for the stages after it. With one
// type per device (up to exact_device_limit devices) `free` is the bitmask
// of unused devices and the search covers every subset in every order.
// PipeEdge (Hu et al. 2022) stays exact at 16 devices by treating devices of
// one type as interchangeable: a chain's state is then how many devices of
// each type are still free, not which ones, so 32 devices of 3 types have
// 12 x 12 x 11 states where a bitmask has 2^32. Devices whose every figure (per-layer
// times, memory, link rate and latency) lies within the request's
// type_tolerance of a type's first member join that type, and the type is
// planned at its worst member (slowest per layer, least memory, slowest and
// latest link): the plan is optimal for that model of the devices, and the
// real devices it names run it no slower than planned.

bool close_to(double a, double b, double tolerance) {
  return std::abs(a - b) <= tolerance * std::max(std::abs(a), std::abs(b)) + 1e-15;
}

bool same_type(const device_profile& a, const device_profile& b, double tolerance) {
  if (!close_to(a.memory_bytes, b.memory_bytes, tolerance) ||
      !close_to(a.link_bytes_per_s, b.link_bytes_per_s, tolerance) ||
      !close_to(a.link_latency_s, b.link_latency_s, tolerance) ||
      !close_to(a.busy_s, b.busy_s, tolerance)) {
    return false;
  }
  for (size_t l = 0; l < a.forward_s.size(); ++l) {
    if (!close_to(a.forward_s[l], b.forward_s[l], tolerance) ||
        !close_to(a.backward_s[l], b.backward_s[l], tolerance)) {
      return false;
    }
  }
  return true;
}

struct device_types {
  std::vector<std::vector<size_t>> members; ///< per type, fastest member first
  /// The request with one device per type, its worst member (grouped types
  /// only; one type per device plans on the request itself).
  plan_request typed;
};

device_types group_devices(const plan_request& req, const cost_model& cm) {
  device_types out;
  for (size_t d = 0; d < req.devices.size(); ++d) {
    size_t t = 0;
    while (t < out.members.size() &&
           !same_type(req.devices[out.members[t].front()], req.devices[d],
                      req.type_tolerance)) {
      ++t;
    }
    if (t == out.members.size()) {
      out.members.emplace_back();
    }
    out.members[t].push_back(d);
  }
  out.typed = req;
  out.typed.devices.clear();
  for (auto& m : out.members) {
    std::stable_sort(m.begin(), m.end(), [&](size_t a, size_t b) {
      return cm.compute(a, 0, cm.layers) < cm.compute(b, 0, cm.layers);
    });
    auto worst = req.devices[m.front()];
    worst.name = "type of " + worst.name;
    for (auto d : m) {
      auto& dev = req.devices[d];
      worst.memory_bytes = std::min(worst.memory_bytes, dev.memory_bytes);
      worst.link_bytes_per_s = std::min(worst.link_bytes_per_s, dev.link_bytes_per_s);
      worst.link_latency_s = std::max(worst.link_latency_s, dev.link_latency_s);
      worst.busy_s = std::max(worst.busy_s, dev.busy_s);
      for (size_t l = 0; l < cm.layers; ++l) {
        worst.forward_s[l] = std::max(worst.forward_s[l], dev.forward_s[l]);
        worst.backward_s[l] = std::max(worst.backward_s[l], dev.backward_s[l]);
      }
    }
    out.typed.devices.push_back(std::move(worst));
  }
  return out;
}

// One type per device: the search over types is then the search over every
// subset and order of the devices (and runs on the request's own cost model:
// `typed` stays empty).
device_types one_type_each(const plan_request& req) {
  device_types out;
  for (size_t d = 0; d < req.devices.size(); ++d) {
    out.members.push_back({d});
  }
  return out;
}

// A bound on the typed search's table: prod(count + 1) free-count states,
// times the types a chain may start a stage on, the layers and the stage
// counts (training).
double typed_table(const device_types& types, const plan_request& req) {
  double states = 1;
  size_t n = 0;
  for (auto& m : types.members) {
    states *= static_cast<double>(m.size() + 1);
    n += m.size();
  }
  auto L = req.layers.size();
  double counts = req.mode == plan_mode::training ? static_cast<double>(std::min(n, L)) : 1.0;
  return states * static_cast<double>(types.members.size()) * static_cast<double>(L) * counts;
}

struct typed_search {
  const cost_model& cm; ///< over the typed request: device t is type t
  const device_types& types;
  size_t T, L, K;
  bool by_count;
  std::vector<uint64_t> radix; ///< free counts as one mixed-radix number
  std::unordered_map<uint64_t, std::pair<double, uint64_t>> memo; // value, (q, next type)

  typed_search(const cost_model& c, const device_types& t)
      : cm(c), types(t), T(t.members.size()), L(c.layers),
        by_count(c.req.mode == plan_mode::training) {
    size_t n = 0;
    uint64_t r = 1;
    for (auto& m : t.members) {
      n += m.size();
      radix.push_back(r);
      r *= m.size() + 1;
    }
    K = by_count ? std::min(n, L) : 1;
  }

  size_t free_of(uint64_t avail, size_t t) const {
    return static_cast<size_t>((avail / radix[t]) % (types.members[t].size() + 1));
  }

  uint64_t key(size_t p, size_t t, uint64_t avail, size_t k) const {
    return ((avail * T + t) * 256 + p) * 256 + k;
  }

  // layers [p, L) with the first stage on a device of type t, k stages
  // (training) and `avail` devices of each type free for the stages after it
  double solve(size_t p, size_t t, uint64_t avail, size_t k) {
    auto kk = key(p, t, avail, k);
    if (auto it = memo.find(kk); it != memo.end()) {
      return it->second.first;
    }
    int fl = cm.flight(by_count ? k : 1);
    double b = inf;
    uint64_t pick = 0;
    if (k == 1 && cm.fits(t, p, L, fl)) {
      b = cm.compute(t, p, L);
      pick = static_cast<uint64_t>(L) << 32 | T;
    }
    if (!(by_count && k == 1)) {
      size_t kn = by_count ? k - 1 : 1;
      for (size_t q = p + 1; q < L; ++q) {
        if (!cm.fits(t, p, q, fl)) {
          break;
        }
        double c = cm.compute(t, p, q);
        if (c >= b) {
          break;
        }
        for (size_t t2 = 0; t2 < T; ++t2) {
          if (free_of(avail, t2) == 0) {
            continue;
          }
          double l = cm.link(t, t2, q);
          if (std::max(c, l) >= b) {
            continue;
          }
          double v = std::max({c, l, solve(q, t2, avail - radix[t2], kn)});
          if (v < b) {
            b = v;
            pick = static_cast<uint64_t>(q) << 32 | t2;
          }
        }
      }
    }
    memo[kk] = {b, pick};
    return b;
  }

  // The best chain, with the types' members in place of the types.
  ordered_result run() {
    ordered_result out;
    uint64_t all = 0;
    for (size_t t = 0; t < T; ++t) {
      all += radix[t] * types.members[t].size();
    }
    size_t bt = T, bk = 0;
    for (size_t t = 0; t < T; ++t) {
      for (size_t k = 1; k <= K; ++k) {
        if (!cm.count_allowed(k)) {
          continue;
        }
        double v = solve(0, t, all - radix[t], k) * cm.steps(k);
        if (v < out.bottleneck) {
          out.bottleneck = v;
          bt = t;
          bk = k;
        }
      }
    }
    if (bt == T) {
      return out;
    }
    std::vector<size_t> used(T, 0);
    size_t p = 0, t = bt, k = bk;
    uint64_t avail = all - radix[bt];
    while (p < L) {
      auto pick = memo[key(p, t, avail, k)].second;
      size_t q = static_cast<size_t>(pick >> 32);
      size_t next = static_cast<size_t>(pick & 0xffffffffu);
      out.stages.push_back({types.members[t][used[t]++], p, q, 0, 0, 0});
      p = q;
      if (next < T) {
        avail -= radix[next];
      }
      t = next;
      k = by_count ? k - 1 : 1;
    }
    return out;
  }
};

} // namespace

int in_flight(const plan_request& req, size_t index, size_t stages) {
  cost_model cm(req);
  return cm.flight(stages - index);
}

double stage_memory(const plan_request& req, size_t begin, size_t end, int flight) {
  return cost_model(req).memory(begin, end, flight);
}

partition_plan evaluate_plan(const plan_request& req,
                             std::vector<stage_assignment> stages) {
  validate(req);
  cost_model cm(req);
  partition_plan plan;
  double worst = 0;
  for (size_t s = 0; s < stages.size(); ++s) {
    auto& st = stages[s];
    st.compute_s = cm.compute(st.device, st.begin, st.end);
    st.link_in_s = s > 0 ? cm.link(stages[s - 1].device, st.device, st.begin) : 0.0;
    st.memory_bytes = cm.memory(st.begin, st.end, cm.flight(stages.size() - s));
    worst = std::max({worst, st.compute_s, st.link_in_s});
  }
  plan.objective_s = worst * cm.steps(stages.size());
  double per_objective = static_cast<double>(req.micro_batch_size) *
                         (req.mode == plan_mode::training ? req.micro_batches : 1);
  plan.stages = std::move(stages);
  plan.bottleneck_s = worst;
  plan.samples_per_s = worst > 0 ? per_objective / plan.objective_s : 0.0;
  return plan;
}

partition_plan plan_homogeneous(const plan_request& req, size_t like) {
  validate(req);
  if (like >= req.devices.size()) {
    throw std::invalid_argument("plan_homogeneous: device " + std::to_string(like) +
                                " of " + std::to_string(req.devices.size()));
  }
  // the planner's view: every device is `like`, with room for any stage
  // (memory is not checked), and no stage count of the request's
  auto same = req;
  same.stages = 0;
  for (auto& d : same.devices) {
    d = req.devices[like];
    d.memory_bytes = inf;
  }
  cost_model cm(same);
  // one stage per device, stage i on device i, in the order given: the
  // best split over that chain, as the local search takes it
  std::vector<size_t> chain(std::min(req.devices.size(), req.layers.size()));
  std::iota(chain.begin(), chain.end(), size_t{0});
  auto split = chain_search(cm).split(chain, inf);
  if (split.stages.empty()) {
    throw plan_error("plan_homogeneous: no split of the layers over " +
                     std::to_string(chain.size()) + " stages");
  }
  return evaluate_plan(req, std::move(split.stages)); // what the real devices do
}

std::vector<int> split_micro_batches(const std::vector<double>& per_micro_s,
                                     int micro_batches) {
  if (per_micro_s.empty()) {
    throw std::invalid_argument("no devices to split micro-batches over");
  }
  std::vector<int> split(per_micro_s.size(), 0);
  for (int m = 0; m < micro_batches; ++m) {
    size_t best = 0;
    double best_end = inf;
    for (size_t i = 0; i < per_micro_s.size(); ++i) {
      double end = (split[i] + 1) * per_micro_s[i];
      if (end < best_end) {
        best = i;
        best_end = end;
      }
    }
    split[best]++;
  }
  return split;
}

namespace {

// Per member: its block's compute, memory for the whole model, and on its
// link the gradient sum, its weights' size each way. Through the supervisor
// the sums are taken one after another; along the chain of members in
// chunks (models::dp_chunks) the links work at once, so the sum takes twice
// the weights over the slowest link, plus a chunk's hop per member up and
// down the chain.
partition_plan data_parallel_plan(const plan_request& req, const cost_model& cm,
                                  const std::vector<size_t>& devices,
                                  std::vector<int> split) {
  if (split.empty()) {
    std::vector<double> t;
    for (auto d : devices) {
      t.push_back(cm.compute(d, 0, cm.layers));
    }
    split = split_micro_batches(t, req.micro_batches);
  }
  if (split.size() != devices.size()) {
    throw std::invalid_argument("the micro-batch split names " +
                                std::to_string(split.size()) + " members for " +
                                std::to_string(devices.size()) + " devices");
  }
  int total = 0;
  for (int k : split) {
    if (k < 0) {
      throw std::invalid_argument("a negative micro-batch share");
    }
    total += k;
  }
  if (total != req.micro_batches) {
    throw std::invalid_argument("the split covers " + std::to_string(total) + " of " +
                                std::to_string(req.micro_batches) + " micro-batches");
  }
  partition_plan plan;
  double weights = cm.param_prefix[cm.layers];
  double slowest = 0;
  double link = 0;
  double hop = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto& d = req.devices[devices[i]];
    stage_assignment a;
    a.device = devices[i];
    a.begin = 0;
    a.end = cm.layers;
    a.compute_s = cm.compute(devices[i], 0, cm.layers);
    a.link_in_s = 2.0 * (weights / d.link_bytes_per_s + d.link_latency_s);
    int flight = req.schedule == plan_schedule::gpipe ? std::max(split[i], 1) : 1;
    a.memory_bytes = cm.memory(0, cm.layers, flight);
    if (a.memory_bytes > d.memory_bytes) {
      throw plan_error("data parallelism: " + d.name + " cannot hold the whole model (" +
                       mb(a.memory_bytes) + ", has " + mb(d.memory_bytes) + ")");
    }
    slowest = std::max(slowest, split[i] * a.compute_s);
    link = req.dp_chain ? std::max(link, a.link_in_s) : link + a.link_in_s;
    hop = std::max(hop, std::min(weights, req.dp_chunk_bytes) / d.link_bytes_per_s +
                            d.link_latency_s);
    plan.stages.push_back(a);
  }
  double reduce =
      req.dp_chain ? link + 2.0 * static_cast<double>(devices.size() - 1) * hop : link;
  plan.micro_split = std::move(split);
  plan.objective_s = slowest + reduce;
  plan.bottleneck_s = plan.objective_s / req.micro_batches;
  plan.samples_per_s =
      static_cast<double>(req.micro_batch_size * req.micro_batches) / plan.objective_s;
  return plan;
}

// The best data-parallel plan: the k fastest devices that can hold the
// model, for every k >= 2 (a faster member never hurts the compute; more
// members cost more summing), members with no micro-batch dropped.
partition_plan best_data_parallel(const plan_request& req, const cost_model& cm) {
  partition_plan best;
  best.objective_s = inf;
  std::vector<size_t> fits;
  for (size_t d = 0; d < req.devices.size(); ++d) {
    if (cm.memory(0, cm.layers,
                  req.schedule == plan_schedule::gpipe ? req.micro_batches : 1) <=
        req.devices[d].memory_bytes) {
      fits.push_back(d);
    }
  }
  std::stable_sort(fits.begin(), fits.end(), [&](size_t a, size_t b) {
    return cm.compute(a, 0, cm.layers) < cm.compute(b, 0, cm.layers);
  });
  for (size_t k = 2; k <= fits.size() && k <= static_cast<size_t>(req.micro_batches);
       ++k) {
    std::vector<size_t> members(fits.begin(),
                                fits.begin() + static_cast<std::ptrdiff_t>(k));
    std::vector<double> t;
    for (auto d : members) {
      t.push_back(cm.compute(d, 0, cm.layers));
    }
    auto split = split_micro_batches(t, req.micro_batches);
    std::vector<size_t> used;
    std::vector<int> shares;
    for (size_t i = 0; i < k; ++i) {
      if (split[i] > 0) {
        used.push_back(members[i]);
        shares.push_back(split[i]);
      }
    }
    if (used.size() < 2) {
      continue;
    }
    auto plan = data_parallel_plan(req, cm, used, shares);
    if (plan.objective_s < best.objective_s) {
      best = std::move(plan);
    }
  }
  return best;
}

} // namespace

partition_plan evaluate_data_parallel(const plan_request& req,
                                      const std::vector<size_t>& devices,
                                      std::vector<int> split) {
  validate(req);
  if (devices.empty()) {
    throw std::invalid_argument("a data-parallel plan needs at least one device");
  }
  for (auto d : devices) {
    if (d >= req.devices.size()) {
      throw std::invalid_argument("device index " + std::to_string(d) + " out of range");
    }
  }
  cost_model cm(req);
  return data_parallel_plan(req, cm, devices, std::move(split));
}

partition_plan plan_data_parallel(const plan_request& req) {
  validate(req);
  cost_model cm(req);
  if (req.mode != plan_mode::training) {
    throw plan_error("data parallelism is for training");
  }
  auto dp = best_data_parallel(req, cm);
  if (!dp.data_parallel()) {
    throw plan_error(
        "no two devices can share the micro-batches (memory, or fewer than two "
        "micro-batches)");
  }
  return dp;
}

partition_plan plan_partition(const plan_request& req) {
  validate(req);
  cost_model cm(req);
  const size_t n = req.devices.size();
  if (req.layers.size() > 255) {
    throw std::invalid_argument("the planner handles at most 255 layers");
  }
  ordered_result best;
  bool exact = n <= req.exact_device_limit && n <= 16;
  size_t types = 0;
  std::optional<device_types> grouped;
  if (exact) {
    grouped = one_type_each(req);
  } else {
    grouped = group_devices(req, cm);
    if (typed_table(*grouped, req) <= req.typed_table_limit) {
      exact = true;
      types = grouped->members.size();
    }
  }
  if (exact) {
    std::optional<cost_model> typed_cm; // the types' worst members, when grouped
    if (types > 0) {
      typed_cm.emplace(grouped->typed);
    }
    typed_search search(types > 0 ? *typed_cm : cm, *grouped);
    best = search.run();
  } else {
    // Candidate orders: as given, fastest first, best-linked first, largest
    // memory first (under 1F1B the first stages hold the most activations).
    std::vector<size_t> given(n);
    std::iota(given.begin(), given.end(), 0);
    auto fastest = given;
    std::stable_sort(fastest.begin(), fastest.end(), [&](size_t a, size_t b) {
      return cm.compute(a, 0, cm.layers) < cm.compute(b, 0, cm.layers);
    });
    auto linked = given;
    std::stable_sort(linked.begin(), linked.end(), [&](size_t a, size_t b) {
      return req.devices[a].link_bytes_per_s > req.devices[b].link_bytes_per_s;
    });
    auto roomy = given;
    std::stable_sort(roomy.begin(), roomy.end(), [&](size_t a, size_t b) {
      return req.devices[a].memory_bytes > req.devices[b].memory_bytes;
    });
    // each order's plan that beats the orders before it, the best last
    std::vector<ordered_result> starts;
    double cap = inf;
    for (auto* order : {&given, &fastest, &linked, &roomy}) {
      auto r = search_ordered(cm, *order, cap);
      if (!r.stages.empty()) {
        cap = std::min(cap, r.bottleneck);
        starts.push_back(std::move(r));
      }
    }
    chain_search chains(cm);
    if (starts.empty()) {
      // no order fits; the roomiest devices, one per layer, are the
      // likeliest to: search from them for a chain that fits
      size_t k = std::min(n, cm.layers);
      while (k > 1 && !cm.count_allowed(k)) {
        --k;
      }
      roomy.resize(k);
      if (auto r = chains.fit(roomy); !r.stages.empty()) {
        starts.push_back(std::move(r));
      }
    }
    // a local search from each start (they can reach different local
    // optima), the best first: the evaluations they share may run out
    for (auto r = starts.rbegin(); r != starts.rend(); ++r) {
      auto local = chains.improve(std::move(*r));
      if (local.bottleneck < best.bottleneck) {
        best = std::move(local);
      }
    }
  }
  if (best.stages.empty()) {
    explain_no_fit(req, cm);
  }
  auto plan = evaluate_plan(req, std::move(best.stages));
  plan.exact = exact;
  plan.device_types = types;
  if (req.mode == plan_mode::training && req.allow_data_parallel && req.stages == 0 &&
      n >= 2) {
    auto dp = best_data_parallel(req, cm);
    if (dp.objective_s < plan.objective_s) {
      dp.exact = exact;
      dp.device_types = types;
      return dp;
    }
  }
  return plan;
}

} // namespace salamander::algorithms
