#include "algorithms/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

namespace salamander::algorithms {

uint64_t splitmix64::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t splitmix64::below(uint64_t bound) {
  // Lemire, "Fast random integer generation in an interval" (2019).
  uint64_t x = next();
  __uint128_t m = static_cast<__uint128_t>(x) * bound;
  auto low = static_cast<uint64_t>(m);
  if (low < bound) {
    uint64_t threshold = -bound % bound;
    while (low < threshold) {
      x = next();
      m = static_cast<__uint128_t>(x) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double splitmix64::unit() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

double splitmix64::normal() {
  double u1 = 0.0;
  while (u1 <= 0.0) {
    u1 = unit();
  }
  double u2 = unit();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double splitmix64::gamma(double shape) {
  if (!(shape > 0.0)) {
    throw std::invalid_argument("gamma shape must be > 0, got " + std::to_string(shape));
  }
  if (shape < 1.0) {
    // Boost to shape + 1 and scale back (Marsaglia-Tsang, section 6).
    double u = 0.0;
    while (u <= 0.0) {
      u = unit();
    }
    return gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  double d = shape - 1.0 / 3.0;
  double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = normal();
    double v = 1.0 + c * x;
    if (v <= 0.0) {
      continue;
    }
    v = v * v * v;
    double u = unit();
    if (u < 1.0 - 0.0331 * x * x * x * x) {
      return d * v;
    }
    if (u > 0.0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) {
      return d * v;
    }
  }
}

uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c) {
  splitmix64 g(a);
  uint64_t h = g.next() ^ (b * 0xd6e8feb86659fd93ULL);
  splitmix64 g2(h);
  h = g2.next() ^ (c * 0xa0761d6478bd642fULL);
  splitmix64 g3(h);
  return g3.next();
}

std::vector<int64_t> epoch_permutation(uint64_t seed, uint64_t epoch, int64_t n) {
  if (n < 0) {
    throw std::invalid_argument("epoch_permutation: negative size " + std::to_string(n));
  }
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    perm[static_cast<size_t>(i)] = i;
  }
  splitmix64 g(mix_seed(seed, epoch, 0x5a1a));
  for (int64_t i = n - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(g.below(static_cast<uint64_t>(i + 1)));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

int64_t batches_per_epoch(int64_t n, int64_t batch_size, bool drop_last) {
  if (batch_size <= 0) {
    throw std::invalid_argument("batch size must be > 0, got " + std::to_string(batch_size));
  }
  return drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
}

std::vector<int64_t> batch_indices(uint64_t seed, uint64_t epoch, int64_t batch_id,
                                   int64_t n, int64_t batch_size, bool drop_last) {
  int64_t count = batches_per_epoch(n, batch_size, drop_last);
  if (batch_id < 0 || batch_id >= count) {
    throw std::out_of_range("batch " + std::to_string(batch_id) + " is outside epoch of " +
                            std::to_string(count) + " batches");
  }
  // The result depends only on the arguments; the cache of the last epoch's
  // permutation (per thread) only saves recomputing it for every batch.
  struct cache_entry {
    uint64_t seed = 0, epoch = 0;
    int64_t n = -1;
    std::vector<int64_t> perm;
  };
  thread_local cache_entry cache;
  if (cache.n != n || cache.seed != seed || cache.epoch != epoch) {
    cache.perm = epoch_permutation(seed, epoch, n);
    cache.seed = seed;
    cache.epoch = epoch;
    cache.n = n;
  }
  const auto& perm = cache.perm;
  int64_t begin = batch_id * batch_size;
  int64_t end = std::min(n, begin + batch_size);
  return {perm.begin() + begin, perm.begin() + end};
}

std::vector<std::vector<int64_t>> partition_iid(uint64_t seed, int64_t n, int clients) {
  if (clients < 1) {
    throw std::invalid_argument("partition needs at least one client, got " +
                                std::to_string(clients));
  }
  auto perm = epoch_permutation(seed, 0x11d, n);
  std::vector<std::vector<int64_t>> shards(static_cast<size_t>(clients));
  for (int64_t i = 0; i < n; ++i) {
    shards[static_cast<size_t>(i % clients)].push_back(perm[static_cast<size_t>(i)]);
  }
  return shards;
}

std::vector<std::vector<int64_t>> partition_dirichlet(uint64_t seed,
                                                      const std::vector<int64_t>& labels,
                                                      int clients, double alpha) {
  if (clients < 1) {
    throw std::invalid_argument("partition needs at least one client, got " +
                                std::to_string(clients));
  }
  if (!(alpha > 0.0)) {
    throw std::invalid_argument("dirichlet alpha must be > 0, got " + std::to_string(alpha));
  }
  std::map<int64_t, std::vector<int64_t>> by_label;
  auto order = epoch_permutation(seed, 0xd1c, static_cast<int64_t>(labels.size()));
  for (int64_t i : order) {
    by_label[labels[static_cast<size_t>(i)]].push_back(i);
  }
  splitmix64 g(mix_seed(seed, 0xd1c, 1));
  std::vector<std::vector<int64_t>> shards(static_cast<size_t>(clients));
  for (auto& [label, idx] : by_label) {
    std::vector<double> p(static_cast<size_t>(clients));
    double sum = 0.0;
    for (auto& x : p) {
      x = g.gamma(alpha);
      sum += x;
    }
    // Cumulative cut points; rounding leftovers go to the last client so that
    // every example is placed exactly once.
    auto total = static_cast<int64_t>(idx.size());
    int64_t start = 0;
    double acc = 0.0;
    for (int c = 0; c < clients; ++c) {
      acc += p[static_cast<size_t>(c)] / sum;
      int64_t stop = (c == clients - 1) ? total
                                        : std::min(total, static_cast<int64_t>(std::llround(
                                                              acc * static_cast<double>(total))));
      stop = std::max(stop, start);
      auto& shard = shards[static_cast<size_t>(c)];
      shard.insert(shard.end(), idx.begin() + start, idx.begin() + stop);
      start = stop;
    }
  }
  for (auto& shard : shards) {
    std::sort(shard.begin(), shard.end());
  }
  return shards;
}

std::vector<std::vector<int64_t>> partition_apart(uint64_t seed,
                                                  const std::vector<int64_t>& labels,
                                                  int clients, int apart, double alpha) {
  if (!(apart > 0 && apart < clients)) {
    throw std::invalid_argument("classes apart: the clients apart must be from 1 to " +
                                std::to_string(clients - 1) + " (of " +
                                std::to_string(clients) + " clients), got " +
                                std::to_string(apart));
  }
  std::vector<int64_t> classes(labels.begin(), labels.end());
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  const auto n_classes = static_cast<int64_t>(classes.size());
  if (n_classes < 2) {
    throw std::invalid_argument(
        "classes apart needs at least two classes, the data has " +
        std::to_string(n_classes));
  }
  auto k = std::clamp<int64_t>(
      std::llround(static_cast<double>(n_classes * apart) / static_cast<double>(clients)),
      1, n_classes - 1);
  const int64_t first_apart = classes[static_cast<size_t>(n_classes - k)];
  // The two groups are split on their own, each over its own clients.
  std::vector<std::vector<int64_t>> shards(static_cast<size_t>(clients));
  for (int group = 0; group < 2; ++group) {
    std::vector<int64_t> members; // indices into labels
    std::vector<int64_t> member_labels;
    for (size_t i = 0; i < labels.size(); ++i) {
      if ((labels[i] >= first_apart) == (group == 1)) {
        members.push_back(static_cast<int64_t>(i));
        member_labels.push_back(labels[i]);
      }
    }
    const int first = group == 0 ? 0 : clients - apart;
    const int count = group == 0 ? clients - apart : apart;
    auto sub_seed = mix_seed(seed, 0xa9a7, static_cast<uint64_t>(group));
    auto parts =
        alpha > 0 ? partition_dirichlet(sub_seed, member_labels, count, alpha)
                  : partition_iid(sub_seed, static_cast<int64_t>(members.size()), count);
    for (int c = 0; c < count; ++c) {
      auto& shard = shards[static_cast<size_t>(first + c)];
      for (auto m : parts[static_cast<size_t>(c)]) {
        shard.push_back(members[static_cast<size_t>(m)]);
      }
      std::sort(shard.begin(), shard.end());
    }
  }
  return shards;
}

std::vector<uint32_t> sample_clients(uint64_t seed, uint64_t round,
                                     const std::vector<uint32_t>& available,
                                     double fraction) {
  if (!(fraction > 0) || fraction > 1) {
    throw std::invalid_argument("the fraction of clients per round must be in (0, 1], got " +
                                std::to_string(fraction));
  }
  auto n = static_cast<int64_t>(available.size());
  auto m = std::min<int64_t>(
      n, std::max<int64_t>(1, static_cast<int64_t>(std::ceil(fraction * static_cast<double>(n) - 1e-9))));
  if (n == 0 || m == n) {
    auto all = available;
    std::sort(all.begin(), all.end());
    return all;
  }
  auto order = epoch_permutation(mix_seed(seed, 0xc11e, 0), round, n);
  std::vector<uint32_t> out;
  for (int64_t i = 0; i < m; ++i) {
    out.push_back(available[static_cast<size_t>(order[static_cast<size_t>(i)])]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint32_t> turn_order(uint64_t seed, uint64_t round,
                                 std::vector<uint32_t> clients) {
  std::sort(clients.begin(), clients.end());
  auto order = epoch_permutation(mix_seed(seed, 0x7475726e /* "turn" */), round,
                                 static_cast<int64_t>(clients.size()));
  std::vector<uint32_t> out;
  out.reserve(clients.size());
  for (auto i : order) {
    out.push_back(clients[static_cast<size_t>(i)]);
  }
  return out;
}

std::vector<bool> pick_stragglers(uint64_t seed, uint32_t clients, double fraction) {
  if (!(fraction >= 0) || fraction > 1) {
    throw std::invalid_argument("the fraction of stragglers must be in [0, 1], got " +
                                std::to_string(fraction));
  }
  std::vector<bool> out(clients, false);
  auto k = static_cast<int64_t>(std::llround(fraction * static_cast<double>(clients)));
  auto order = epoch_permutation(mix_seed(seed, 0x51c4, 0), 0, clients);
  for (int64_t i = 0; i < k; ++i) {
    out[static_cast<size_t>(order[static_cast<size_t>(i)])] = true;
  }
  return out;
}

} // namespace salamander::algorithms
