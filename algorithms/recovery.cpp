#include "algorithms/recovery.hpp"

#include <algorithm>
#include <map>

namespace salamander::algorithms {

namespace {

// Every version held by any source, newest first.
std::vector<uint64_t> versions_newest_first(const std::vector<recovery_source>& sources) {
  std::set<uint64_t> all;
  for (auto& s : sources) {
    for (auto& [layer, version] : s.held) {
      all.insert(version);
    }
  }
  return {all.rbegin(), all.rend()};
}

bool holds(const recovery_source& s, uint64_t layer, uint64_t version) {
  return std::find(s.held.begin(), s.held.end(), std::make_pair(layer, version)) !=
         s.held.end();
}

} // namespace

uint64_t rollback_version(const std::vector<recovery_source>& sources, size_t layers,
                          uint64_t committed) {
  for (auto v : versions_newest_first(sources)) {
    if (v > committed) {
      continue; // a stage ran ahead of the commit: not every layer is there
    }
    bool complete = true;
    for (uint64_t l = 0; l < layers && complete; ++l) {
      complete = std::any_of(sources.begin(), sources.end(),
                             [&](const recovery_source& s) { return holds(s, l, v); });
    }
    if (complete) {
      return v;
    }
  }
  return 0;
}

fast_choice fast_sources(const std::vector<recovery_source>& sources, size_t layers) {
  fast_choice out;
  auto versions = versions_newest_first(sources);
  for (uint64_t l = 0; l < layers; ++l) {
    std::optional<layer_pick> pick;
    for (size_t h = 0; h < sources.size(); ++h) {
      auto& s = sources[h];
      if (s.stage && s.end > s.begin && l >= s.begin && l < s.end) {
        pick = layer_pick{h, version_now}; // a survivor keeps its weights
        break;
      }
    }
    for (size_t k = 0; !pick && k < versions.size(); ++k) {
      for (size_t h = 0; h < sources.size(); ++h) {
        if (holds(sources[h], l, versions[k])) {
          pick = layer_pick{h, versions[k]};
          break;
        }
      }
    }
    if (!pick) {
      out.missing = l;
      out.picks.clear();
      return out;
    }
    out.picks.push_back(*pick);
  }
  return out;
}

int64_t missed_updates(const std::vector<layer_pick>& picks, uint64_t committed) {
  int64_t missed = 0;
  for (auto& p : picks) {
    if (p.version != version_now && p.version < committed) {
      missed += static_cast<int64_t>(committed - p.version);
    }
  }
  return missed;
}

std::optional<size_t> pick_source(const std::vector<recovery_source>& sources,
                                  uint64_t layer, uint64_t version, size_t node) {
  std::optional<size_t> best;
  int best_rank = 3;
  for (size_t h = 0; h < sources.size(); ++h) {
    auto& s = sources[h];
    if (!holds(s, layer, version)) {
      continue;
    }
    int rank = s.central ? 2 : s.node == node ? 0 : 1;
    if (rank < best_rank) {
      best_rank = rank;
      best = h;
    }
  }
  return best;
}

std::optional<std::vector<layer_pick>>
spread_pulls(const std::vector<recovery_source>& sources, uint64_t begin, uint64_t end,
             uint64_t version, size_t node, const std::vector<int64_t>& layer_bytes,
             const std::vector<double>& rate) {
  std::vector<layer_pick> picks;
  std::vector<double> bytes(sources.size(), 0.0); // what each source serves so far
  for (uint64_t l = begin; l < end; ++l) {
    auto size = l < layer_bytes.size() ? static_cast<double>(layer_bytes[l]) : 0.0;
    std::optional<size_t> best;
    double best_end = 0;
    bool best_usable = false;
    for (size_t h = 0; h < sources.size(); ++h) {
      auto& s = sources[h];
      if (!holds(s, l, version)) {
        continue;
      }
      if (!s.central && s.node == node) {
        best = h; // on the stage's own node: no bytes on the wire
        break;
      }
      double r = h < rate.size() ? rate[h] : 0.0;
      bool usable = r > 0;
      double ends = usable ? (bytes[h] + size) / r : 0.0;
      // a usable source beats an unusable one; then the sooner end; then
      // pick_source's order (a node's copy before the central one, lower
      // index first)
      bool better =
          !best || (usable && !best_usable) ||
          (usable == best_usable && (ends < best_end || (ends == best_end && !s.central &&
                                                         sources[*best].central)));
      if (better) {
        best = h;
        best_end = ends;
        best_usable = usable;
      }
    }
    if (!best) {
      return std::nullopt;
    }
    bytes[*best] += size;
    picks.push_back({*best, version});
  }
  return picks;
}

std::vector<pull> merge_pulls(const std::vector<layer_pick>& picks, uint64_t begin) {
  std::vector<pull> out;
  for (size_t i = 0; i < picks.size(); ++i) {
    uint64_t l = begin + i;
    auto& p = picks[i];
    if (!out.empty() && out.back().source == p.source && out.back().end == l &&
        out.back().version == p.version) {
      out.back().end = l + 1;
    } else {
      out.push_back({p.source, l, l + 1, p.version});
    }
  }
  return out;
}

std::vector<pull> split_pull(const pull& p, const std::vector<int64_t>& layer_bytes,
                             int64_t part_bytes) {
  if (part_bytes <= 0) {
    throw std::invalid_argument("a pull's parts must hold at least one byte");
  }
  if (p.end > layer_bytes.size()) {
    throw std::invalid_argument("a pull of layers " + std::to_string(p.begin) + ".." +
                                std::to_string(p.end) + " from a model of " +
                                std::to_string(layer_bytes.size()) + " layers");
  }
  std::vector<pull> out;
  for (auto b = p.begin; b < p.end;) {
    auto e = b + 1;
    auto bytes = layer_bytes[b];
    while (e < p.end && bytes + layer_bytes[e] <= part_bytes) {
      bytes += layer_bytes[e++];
    }
    out.push_back({p.source, b, e, p.version});
    b = e;
  }
  return out;
}

int64_t moved_bytes(const layer_ranges& before, const std::vector<size_t>& before_nodes,
                    const layer_ranges& after, const std::vector<size_t>& after_nodes,
                    const std::vector<int64_t>& param_bytes, int state_factor) {
  // the node that holds layer l (the last stage listed, as data-parallel
  // members all hold every layer and the first one serves)
  auto holder = [](const layer_ranges& r, const std::vector<size_t>& nodes, size_t l) {
    std::optional<size_t> n;
    for (size_t j = 0; j < r.size() && j < nodes.size(); ++j) {
      if (l >= r[j].first && l < r[j].second) {
        n = nodes[j];
        break;
      }
    }
    return n;
  };
  int64_t moved = 0;
  for (size_t l = 0; l < param_bytes.size(); ++l) {
    if (holder(before, before_nodes, l) != holder(after, after_nodes, l)) {
      moved += param_bytes[l] * state_factor;
    }
  }
  return moved;
}

size_t chain_holder_node(size_t stage, const std::vector<size_t>& on_nodes,
                         bool data_parallel, size_t central) {
  if (data_parallel) {
    return on_nodes.size() > 1 ? on_nodes[1] : central;
  }
  return stage + 1 < on_nodes.size() ? on_nodes[stage + 1] : central;
}

size_t member_of_micro(const std::vector<int>& split, size_t micro) {
  size_t end = 0;
  for (size_t k = 0; k < split.size(); ++k) {
    end += static_cast<size_t>(std::max(split[k], 0));
    if (micro < end) {
      return k;
    }
  }
  return split.empty() ? 0 : split.size() - 1;
}

std::vector<std::pair<size_t, size_t>>
pairs_to_dial(const std::vector<size_t>& on_nodes,
              const std::set<std::pair<size_t, size_t>>& peered,
              const std::vector<bool>& can_dial, const std::vector<bool>& dialable) {
  std::vector<std::pair<size_t, size_t>> out;
  auto in = [](const std::vector<bool>& v, size_t n) { return n < v.size() && v[n]; };
  for (size_t i = 0; i + 1 < on_nodes.size(); ++i) {
    auto a = std::min(on_nodes[i], on_nodes[i + 1]);
    auto b = std::max(on_nodes[i], on_nodes[i + 1]);
    if (a != b && !peered.count({a, b}) && in(can_dial, a) && in(dialable, b) &&
        std::find(out.begin(), out.end(), std::make_pair(a, b)) == out.end()) {
      out.emplace_back(a, b);
    }
  }
  return out;
}

} // namespace salamander::algorithms
