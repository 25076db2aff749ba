// What the training job believes about its devices: each node's profile
// (per-layer forward and backward time, memory, link), corrected by what its
// stages measure, the links the profilers measured, and each kind of plan's
// measured batch time over its prediction. A plain class: the job feeds it
// reports and asks it for the planner's request; it sends nothing.
//
// Node indices are the cluster's (stable: a node that joins is appended).
#pragma once

#include "algorithms/partitioner.hpp"
#include "algorithms/schedule.hpp"
#include "messages/cluster.hpp"
#include "messages/pipeline.hpp"
#include "models/model_desc.hpp"

#include <map>
#include <utility>
#include <vector>

namespace salamander::actors {

/// The planner's request for training `desc` with this schedule and
/// batching, without devices: the one place that turns a model and a job's
/// batching into layer costs (the job's planner and a node's memory check
/// both use it).
algorithms::plan_request make_plan_request(const models::model_desc& desc,
                                           const std::string& schedule,
                                           int64_t micro_batch_size, int micro_batches,
                                           const std::string& optimizer);

/// Gives the nodes of each device type (device_report::device_type, at the
/// same CPU share) one profile: per layer the median of their forward and
/// backward times. Identical devices then get identical plans: measured one
/// by one, their profiles differed by up to 40% on single layers (16
/// emulated devices of one share on this host), and the planner gave some
/// a third more layers than others. Memory and links stay each node's own;
/// a node whose speed changes later is corrected by its own stage times and
/// probes (scale()), not by its type. Reports without a type are left alone.
void merge_device_types(std::vector<device_report>& reports);

class capacity_model {
public:
  /// Measured batch time over the model's prediction is clamped to this.
  static constexpr double min_kind_ratio = 0.5;
  static constexpr double max_kind_ratio = 4.0;
  /// Weight of a new measurement in a node's correction (moving average).
  static constexpr double correction_weight = 0.3;

  bool profiled() const { return !profiles_.empty(); }
  size_t size() const { return profiles_.size(); }

  /// A profiling round's results (node index -> report) and measured links.
  void set_profiles(const cluster_profile& round);
  /// Links measured again (a recovery's probes): each replaces what was
  /// known of its pair; the others stay.
  void update_links(const std::vector<link_entry>& links);
  /// A node that joined: until measured, it is planned with the profile of
  /// the first node.
  void add_node();

  /// Median outgoing rate and latency to live peers (0, 0: not measured).
  std::pair<double, double> measured_link(size_t node,
                                          const std::vector<bool>& dead) const;

  /// The rate the profilers measured from `from` to `to` (bytes/s; 0: not
  /// measured).
  double link_rate(size_t from, size_t to) const;

  /// The planner's request over the live nodes (device d of it is
  /// `live[d]`), with every profile scaled by its correction.
  algorithms::plan_request request(algorithms::plan_request base,
                                   const std::vector<size_t>& live,
                                   const std::vector<bool>& dead,
                                   const std::vector<std::string>& names,
                                   double default_link_bytes_per_s) const;

  /// Corrects each staged node by its stage's measured compute over what
  /// its profile predicts for that range (`runs` micro-batches each).
  void correct(const std::vector<batch_stats>& reports,
               const algorithms::layer_ranges& ranges,
               const std::vector<size_t>& stage_nodes, const std::vector<int>& split,
               int micro_batches);

  /// A kind of plan (pipeline, data parallel, one device alone) measured
  /// `ratio` times its predicted batch time.
  enum plan_kind { pipeline_kind = 0, data_parallel_kind = 1, single_kind = 2 };
  void set_kind_ratio(int kind, double ratio);
  /// What a kind measured; a kind never measured is taken to run as far
  /// behind the model as the worst kind that was (the host, its load and
  /// the profiles' error are the same for all; an unmeasured kind must not
  /// look better only because nobody has seen it run).
  double kind_ratio(int kind) const;
  static int kind_of(size_t stages, bool data_parallel) {
    return data_parallel ? data_parallel_kind : stages == 1 ? single_kind : pipeline_kind;
  }

  /// A profiler's capacity report: `factor` of the node's capacity at the
  /// start. A spare node is re-rated by the change since its last report
  /// (it may now be worth planning in; what its stages measured while it
  /// ran stays); a staged one is corrected by its stage times instead.
  void report_capacity(size_t node, double factor, bool staged);
  double capacity(size_t node) const {
    return node < capacity_.size() ? capacity_[node] : 1.0;
  }

  /// Relative speed from the profile and corrections (1: as profiled).
  double speed(size_t node) const;
  /// What a node's profile is multiplied by: its own correction once a stage
  /// of it has been measured; before, its probes' and at least the smallest
  /// residual of the measured nodes (their correction beyond what their
  /// probes explain: the profiles' error and the host's load under a
  /// running pipeline, which an idle node does not show until it runs).
  double scale(size_t node) const;
  /// Predicted compute of layers [begin, end) on a node, `runs`
  /// micro-batches (0 when not profiled).
  double predicted_s(size_t node, size_t begin, size_t end, double runs) const;

private:
  std::vector<device_report> profiles_;
  std::vector<double> scale_;
  std::vector<double> capacity_;
  std::vector<bool> measured_; ///< a stage on it has been measured
  std::map<std::pair<size_t, size_t>, link_report> links_;
  double kind_ratio_[3] = {1.0, 1.0, 1.0};
  bool kind_measured_[3] = {false, false, false};
};

} // namespace salamander::actors
