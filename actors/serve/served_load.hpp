// What the serving jobs of one server have placed on each node, so that
// every model is planned over the cluster together with the others: a job
// about to plan reads the others' work on each node and its planner counts
// it (algorithms::device_profile::busy_s, and the memory it leaves free);
// a job whose pipeline starts to serve writes its own.
//
// The load model is PipeEdge's bottleneck, summed: at an equal request rate
// for every model, a node that runs stages of several models is busy for
// the sum of their times, and the server's rate is bounded by its busiest
// node. Each model in turn places itself to lower that bound against the
// others as they stand (a re-plan for a failure or a join sees the latest
// placements), which is coordinate descent over the models, not a joint
// search.
//
// The jobs of one `salamander serve` run in one process: this is plain
// state behind a mutex, shared by their serve_configs, not a message
// protocol. Keys are the jobs' actor ids, so two versions of one model
// (during a reload) are two entries.
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

  /// Job `job` now serves with this placement (replaces its previous one).
  void place(uint64_t job, placement where) {
    std::lock_guard<std::mutex> g(mutex_);
    if (where.empty()) {
      placed_.erase(job);
    } else {
      placed_[job] = std::move(where);
    }
  }

  /// Job `job` no longer serves.
  void clear(uint64_t job) { place(job, {}); }

  /// The work every job but `job` has on `node`.
  work others(uint64_t job, const std::string& node) const {
    std::lock_guard<std::mutex> g(mutex_);
    work sum;
    for (auto& [id, where] : placed_) {
      if (id == job) {
        continue;
      }
      if (auto it = where.find(node); it != where.end()) {
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
  mutable std::mutex mutex_;
  std::map<uint64_t, placement> placed_;
};

} // namespace salamander::actors
