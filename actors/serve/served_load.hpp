// What the serving jobs of one server have placed on each node, so that
// every model is planned over the cluster together with the others: a job
// about to plan reads the other models' work on each node and its planner
// counts it (algorithms::device_profile::busy_s, and the memory it leaves
// free); a job whose pipeline starts to serve writes its own.
//
// The load model is PipeEdge's bottleneck, summed: at an equal request rate
// for every model, a node that runs stages of several models is busy for
// the sum of their times, and the server's rate is bounded by its busiest
// node. Each model in turn places itself to lower that bound against the
// others as they stand (a re-plan for a failure or a join sees the latest
// placements), which is coordinate descent over the models, not a joint
// search.
//
// Two jobs of one model name are two versions of it during a reload: the
// old one stops once the new one serves, so neither plans around the
// other (the new version may take its predecessor's nodes).
//
// The jobs of one `salamander serve` run in one process: this is plain
// state behind a mutex, shared by their serve_configs, not a message
// protocol. Entries are keyed by the jobs' actor ids.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace salamander::actors {

class served_load {
public:
  /// One job's work on one node.
  struct work {
    double seconds_per_row = 0; ///< its stages' predicted compute per request row
    double bytes = 0;           ///< its stages' planned memory
  };
  using placement = std::map<std::string, work>; ///< node name -> work

  /// Job `job`, serving model `model`, now serves with this placement
  /// (replaces its previous one; an empty one clears it).
  void place(uint64_t job, const std::string& model, placement where) {
    std::lock_guard<std::mutex> g(mutex_);
    if (where.empty()) {
      placed_.erase(job);
    } else {
      placed_[job] = {model, std::move(where)};
    }
  }

  /// Job `job` no longer serves.
  void clear(uint64_t job) {
    std::lock_guard<std::mutex> g(mutex_);
    placed_.erase(job);
  }

  /// The work on `node` of every job that serves a model other than `model`.
  work others(const std::string& model, const std::string& node) const {
    std::lock_guard<std::mutex> g(mutex_);
    work sum;
    for (auto& [id, e] : placed_) {
      if (e.model == model) {
        continue;
      }
      if (auto it = e.where.find(node); it != e.where.end()) {
        sum.seconds_per_row += it->second.seconds_per_row;
        sum.bytes += it->second.bytes;
      }
    }
    return sum;
  }

  /// Jobs with a placement.
  size_t jobs() const {
    std::lock_guard<std::mutex> g(mutex_);
    return placed_.size();
  }

private:
  struct entry {
    std::string model;
    placement where;
  };
  mutable std::mutex mutex_;
  std::map<uint64_t, entry> placed_;
};

} // namespace salamander::actors
