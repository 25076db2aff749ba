// Federated learning strategies: which clients train what in a round, and
// how their updates become the next global model. Pure: no actors, clocks,
// torch or logging; the federated job (actors/federated/) gathers the
// inputs, calls these and moves the bytes (Flower's split of strategy and
// transport).
//
// Width slicing. A client may train a sub-model that keeps only some units
// (neurons of a dense layer, channels of a conv layer) of each hidden layer;
// the output layer always keeps all of its units. A model is described by
// its layers' unit counts and, for each parameter tensor, which layer's
// units its first dimension indexes (out_layer) and which its second does
// (in_layer, each unit spanning `in_spatial` consecutive elements: a dense
// layer after a conv layer reads C x H x W inputs, so input unit c is
// elements [c*H*W, (c+1)*H*W)). A sub-model's parameter is the global one
// restricted to the kept units along those dimensions, in the same order.
//
// Strategies (README.md, "Federated learning", documents the choices):
//
//   fedavg    every client trains the whole model; the round waits for all
//             of them (bounded by round_timeout_s, so a dead or hung client
//             never stalls it); weights: samples (McMahan et al. 2017)
//   deadline  every client trains the whole model; the round ends at a
//             deadline and late updates are dropped (Flower's round timeout)
//   elfish    ELFISH (Xu et al. 2019): stragglers soft-train. Each client's
//             time per local epoch as a function of the kept fraction comes
//             from its profile; the pace is the median client's full-width
//             round time (times 1 + slack); a client slower than the pace
//             keeps the largest fraction whose predicted round fits it. The
//             kept units are a fresh random subset each round (seeded by
//             seed, round, client), so every unit is trained by stragglers
//             over rounds; aggregation restores masked units (an element
//             nobody trained keeps its global value) and balances soft-
//             trained contributions: each element is the average of the
//             clients that trained it, weighted samples x kept fraction.
//             Partial work (not in the paper; on by default, see
//             settings::partial_work): a straggler whose narrowest sub-model
//             (min_keep) is still predicted past the pace trains only the
//             part of its round's batches that fits the pace (FedProx's
//             inexact local work), so a device whose time at min_keep is
//             mostly fixed overhead does not hold every round back
//   heterofl  HeteroFL (Diao et al. 2021): the same time model, the kept
//             fraction rounded down to a power of 1/2; each client trains
//             the first ceil(r*C) units of every hidden layer; each element
//             is the sample-weighted average of the clients that held it;
//             partial work as ELFISH's
//   fedrolex  FedRolex (Alam et al. 2022): HeteroFL's levels, a window of
//             ceil(r*C) units starting at unit (round - 1) mod C, wrapping
//   fedbuff   FedBuff (Nguyen et al. 2022): asynchronous. Every idle client
//             trains the whole model from the newest global; the server
//             steps after `buffer` updates: global += server_lr * sum_i
//             s(tau_i) delta_i / buffer, with staleness tau_i = version now -
//             the version the client started from and s(tau) = 1/sqrt(1+tau)
//
// Updates are deltas (trained - start) of the client's sub-model; for the
// synchronous strategies every client started from the same global, so the
// averaged delta added to it is the averaged model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace salamander::algorithms::fed {

// ---- width

struct width_layer {
  std::string name;
  int64_t units = 0;  ///< output neurons or channels
  bool sliced = true; ///< false: the output layer, every unit always kept
};

struct param_layout {
  std::string name;          ///< "<layer>.<param>", as in weight snapshots
  std::vector<int64_t> dims; ///< of the global tensor
  int out_layer = -1;        ///< dims[0] indexes this layer's units (-1: not sliced)
  int in_layer = -1;         ///< dims[1] indexes this layer's units (-1: not sliced)
  int64_t in_spatial = 1;    ///< elements of dims[1] per input unit
};

struct model_layout {
  std::vector<width_layer> layers;
  std::vector<param_layout> params;
  int64_t elements() const; ///< of every parameter, summed
};

/// Kept units per layer: sorted, distinct indices; every unit of an
/// unsliced layer. An empty `unit_sets` means the whole model.
using unit_sets = std::vector<std::vector<int64_t>>;

/// Parameters as flat row-major float arrays, one per param_layout.
using flat_params = std::vector<std::vector<float>>;

/// Units a fraction keeps: max(1, ceil(keep * units)) (at most units).
int64_t kept_count(int64_t units, double keep);

/// Every unit of every layer.
unit_sets all_units(const model_layout& layout);

/// The dims of each parameter in the sub-model that keeps `kept`.
std::vector<std::vector<int64_t>> sub_dims(const model_layout& layout, const unit_sets& kept);

/// For each element of parameter p of the sub-model (row-major), its index
/// in the global parameter.
std::vector<int64_t> sub_to_global(const model_layout& layout, size_t p, const unit_sets& kept);

/// The sub-model's parameters cut out of `global`.
flat_params slice(const model_layout& layout, const flat_params& global, const unit_sets& kept);

/// Throws std::invalid_argument when `kept` does not fit `layout` (a layer
/// count, an index out of range, unsorted or repeated, an unsliced layer
/// not whole) or `values` do not have the sizes sub_dims gives.
void check_sub(const model_layout& layout, const unit_sets& kept, const flat_params& values);

// ---- masks: which units a client keeps

/// HeteroFL: the first kept_count units of each sliced layer.
unit_sets mask_prefix(const model_layout& layout, double keep);
/// FedRolex: kept_count consecutive units from (round - 1) mod units,
/// wrapping, sorted.
unit_sets mask_rolling(const model_layout& layout, double keep, uint64_t round);
/// ELFISH: kept_count units drawn without replacement, a different draw for
/// each (seed, round, client), sorted.
unit_sets mask_random(const model_layout& layout, double keep, uint64_t seed, uint64_t round,
                      uint32_t client);

// ---- a client's time model

/// Seconds of one local epoch at kept fractions `keep` (ascending, ending
/// at 1), measured by the client's profile, times `scale`: the ratio of
/// measured to predicted round time, updated from every round (observe).
struct time_model {
  std::vector<double> keep;
  std::vector<double> seconds;
  double scale = 1.0;

  bool known() const { return !keep.empty(); }
  /// Piecewise linear between the profiled fractions; below the smallest,
  /// proportional to the fraction; times scale. 0 when not known.
  double at(double fraction) const;
  /// The largest fraction in [min_keep, 1] (to 1/1000) whose time is at
  /// most `seconds`; min_keep when none is.
  double keep_for(double seconds, double min_keep) const;
  /// A round at `fraction` took `measured` seconds for `epochs` epochs (a
  /// part of an epoch under partial work): scale moves halfway to the ratio
  /// that would have predicted it.
  void observe(double fraction, double epochs, double measured);
};

/// The batches a round of `epochs` x `per_epoch` batches trains at `work`
/// (partial work): ceil(work x all), at least one; 0 when it has none.
int64_t work_batches(int64_t epochs, int64_t per_epoch, double work);

/// The non-decreasing sequence closest to `y` in least squares (pool
/// adjacent violators): a profile's times made monotone in the kept
/// fraction, so that a narrower sub-model is never predicted slower than a
/// wider one because one timing was noisy.
std::vector<double> nondecreasing(std::vector<double> y);

// ---- clients, tasks, rounds

struct client_view {
  uint32_t id = 0;
  bool available = true; ///< alive, profiled, not busy with an abandoned task
  int64_t samples = 0;
  time_model time;
};

struct client_task {
  uint32_t client = 0;
  double keep = 1.0;
  unit_sets kept;            ///< empty: the whole model
  uint64_t base_version = 0; ///< the global version it starts from
  /// The part of the round's batches (local epochs x batches per epoch) it
  /// trains, in (0, 1]: below 1 under partial work only.
  double work = 1.0;
  double predicted_s = 0; ///< its time model's prediction for the round
};

struct round_plan {
  std::vector<client_task> tasks;
  /// The round ends when every task answered or after wait_s, whichever is
  /// first; later updates are dropped.
  double wait_s = 0;
  double pace_s = 0; ///< the round time the plan aims at (0: none)
};

/// How a synchronous round's updates are weighted (the ablation of ELFISH's
/// aggregation; the synchronous strategies only):
///   own      the strategy's: kept for elfish, samples for the others
///   kept     each element: the average over the clients that trained it,
///            weighted samples x kept fraction (ELFISH's)
///   samples  each element: the average over the clients that trained it,
///            weighted by samples
///   naive    each element: the sample-weighted average over every client
///            of the round, a masked element counted as unchanged (its
///            delta 0), as plain FedAvg over sub-models would
enum class aggregation { own, kept, samples, naive };

/// own, kept, samples, naive.
std::string to_string(aggregation a);
/// Throws std::invalid_argument naming the known ones.
aggregation parse_aggregation(const std::string& name);

struct settings {
  int64_t local_epochs = 1;
  aggregation weighting = aggregation::own;
  /// Of the available clients, this fraction (at least one) takes part in a
  /// round: a seeded draw per round.
  double fraction = 1.0;
  double min_keep = 0.0625; ///< no client keeps less than this
  /// elfish, heterofl, fedrolex: a straggler predicted past the pace even at
  /// min_keep trains the part of its batches that fits the pace (work)
  bool partial_work = true;
  double slack = 0.1;       ///< the pace is the median round time x (1 + slack)
  /// deadline: the round's deadline in seconds; 0: the pace x deadline_factor
  double deadline_s = 0;
  double deadline_factor = 1.25;
  /// Every synchronous round waits at most this; 0: 3 x the slowest
  /// prediction + 30 s.
  double round_timeout_s = 0;
  uint32_t buffer = 3;     ///< fedbuff: updates per server step
  double server_lr = 1.0;  ///< fedbuff
  uint64_t seed = 1;
};

struct update {
  uint32_t client = 0;
  int64_t samples = 0;
  double keep = 1.0;
  unit_sets kept; ///< empty: the whole model
  flat_params delta;
  uint64_t base_version = 0;
};

class strategy {
public:
  virtual ~strategy() = default;
  virtual std::string name() const = 0;
  /// fedbuff: no rounds; next_task for each idle client, aggregate every
  /// buffer_size() updates.
  virtual bool asynchronous() const { return false; }
  virtual size_t buffer_size() const { return 0; }
  /// Synchronous: round `round` (from 1) over the available clients.
  virtual round_plan configure(uint64_t round, const std::vector<client_view>& clients,
                               const model_layout& layout) const;
  /// Asynchronous: what an idle client trains from global version `version`.
  virtual client_task next_task(const client_view& client, uint64_t version,
                                const model_layout& layout) const;
  /// The new global model from the updates that arrived; `version` is the
  /// global's version now.
  virtual flat_params aggregate(const model_layout& layout, const flat_params& global,
                                const std::vector<update>& updates,
                                uint64_t version) const = 0;
};

/// fedavg, deadline, elfish, heterofl, fedrolex, fedbuff.
std::vector<std::string> strategy_names();
/// Throws std::invalid_argument naming the strategy and the known ones, or a
/// bad setting (fraction outside (0, 1], min_keep outside (0, 1], a zero
/// buffer, a non-positive epoch count).
std::unique_ptr<strategy> make_strategy(const std::string& name, const settings& s);

// ---- building blocks (exposed for tests)

/// The clients of round `round`: the available ones, or a seeded draw of
/// max(1, round(fraction x count)) of them, in id order.
std::vector<uint32_t> select_clients(const std::vector<client_view>& clients, double fraction,
                                     uint64_t seed, uint64_t round);

/// The median of the selected clients' full-width round times (epochs x
/// time.at(1)) times (1 + slack); 0 when none is known.
double pace(const std::vector<client_view>& clients, const std::vector<uint32_t>& selected,
            int64_t epochs, double slack);

/// HeteroFL's levels: the largest 1/2^k <= keep (k >= 0), at least min_keep's level.
double power_of_half_level(double keep, double min_keep);

/// Each element: global + sum_i w_i delta_i / sum_i w_i over the updates
/// that hold it (elements nobody holds keep the global value). With
/// `divide_by` > 0 the sum is divided by that instead of sum_i w_i
/// (fedbuff); then `server_lr` scales the step. Throws std::invalid_argument
/// for a weight < 0 or an update that does not fit the layout.
flat_params weighted_merge(const model_layout& layout, const flat_params& global,
                           const std::vector<update>& updates,
                           const std::vector<double>& weights, double divide_by = 0,
                           double server_lr = 1.0);

/// FedBuff's staleness discount 1/sqrt(1 + tau).
double staleness_weight(uint64_t tau);

} // namespace salamander::algorithms::fed
