// Deterministic sampling: which examples make up batch b of epoch e.
//
// Why: after a failure, salamander rolls back to a version and replays the
// batches after it. Replay is exact only if the batch for (seed, epoch,
// batch id) is always the same set of examples in the same order, on every
// machine and across restarts. std::shuffle and the <random> distributions
// are implementation-defined, so the permutation here uses its own generator
// (splitmix64) and its own unbiased bounded draw (Lemire's method).
//
// The federated partitions (IID and Dirichlet(alpha) over labels) follow the
// usual recipe of Hsu et al. 2019, "Measuring the effects of non-identical
// data distribution for federated visual classification".
#pragma once

#include <cstdint>
#include <vector>

namespace salamander::algorithms {

/// A small, fast, fully specified 64-bit generator (Steele et al. 2014).
class splitmix64 {
public:
  explicit splitmix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  /// Uniform integer in [0, bound), unbiased; bound > 0.
  uint64_t below(uint64_t bound);
  /// Uniform double in [0, 1).
  double unit();
  /// Standard normal (Box-Muller).
  double normal();
  /// Gamma(shape, 1), Marsaglia-Tsang; shape > 0.
  double gamma(double shape);

private:
  uint64_t state_;
};

/// Mixes several integers into one seed; order matters.
uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0);

/// The permutation of [0, n) used for epoch `epoch` under `seed`.
std::vector<int64_t> epoch_permutation(uint64_t seed, uint64_t epoch, int64_t n);

/// Number of batches in an epoch of n examples; the last batch may be short
/// unless drop_last is set.
int64_t batches_per_epoch(int64_t n, int64_t batch_size, bool drop_last);

/// Example indices of batch `batch_id` of epoch `epoch`. Throws
/// std::out_of_range for a batch id past the end of the epoch.
std::vector<int64_t> batch_indices(uint64_t seed, uint64_t epoch, int64_t batch_id,
                                   int64_t n, int64_t batch_size, bool drop_last);

/// Splits [0, n) into `clients` shards of near-equal size at random.
std::vector<std::vector<int64_t>> partition_iid(uint64_t seed, int64_t n, int clients);

/// Splits examples by label: for every class, the fraction going to each
/// client is drawn from Dirichlet(alpha). Small alpha gives very skewed
/// clients, large alpha approaches IID. Every example goes to exactly one
/// client. Throws std::invalid_argument for alpha <= 0 or clients < 1.
std::vector<std::vector<int64_t>> partition_dirichlet(uint64_t seed,
                                                      const std::vector<int64_t>& labels,
                                                      int clients, double alpha);

/// A split where the last `apart` clients hold classes that no other client
/// holds: of the C classes present (in increasing order), the last
/// max(1, round(C x apart / clients)) go only to those clients, the rest
/// only to the others; within each group every class is split by
/// Dirichlet(alpha) (alpha <= 0: evenly at random). Where stragglers are
/// the last clients this is the regime where leaving them out loses
/// whole classes. Every example goes to exactly one client. Throws
/// std::invalid_argument unless 0 < apart < clients and there are at least
/// two classes.
std::vector<std::vector<int64_t>> partition_apart(uint64_t seed,
                                                  const std::vector<int64_t>& labels,
                                                  int clients, int apart, double alpha);

/// The clients that take part in round `round`: a uniform sample of
/// `available` (client ids) of max(1, ceil(fraction * n)) of them, the same
/// for the same seed and round, in increasing order (FedAvg's C, Flower's
/// fraction_fit). A fraction of 1 or more takes every client; none are
/// taken from an empty list. Throws std::invalid_argument for a fraction
/// outside (0, 1].
std::vector<uint32_t> sample_clients(uint64_t seed, uint64_t round,
                                     const std::vector<uint32_t>& available,
                                     double fraction);

/// The order in which `clients` take their turns in round `round` (vanilla
/// split learning): a seeded permutation, fresh every round. A fixed order
/// would evaluate the model right after the same client's epoch every round.
std::vector<uint32_t> turn_order(uint64_t seed, uint64_t round,
                                 std::vector<uint32_t> clients);

/// Which of `clients` clients are stragglers: round(fraction x clients) of
/// them, drawn with `seed` (the same every run and on every machine), as a
/// mask indexed by client. Throws std::invalid_argument for a fraction
/// outside [0, 1].
std::vector<bool> pick_stragglers(uint64_t seed, uint32_t clients, double fraction);

} // namespace salamander::algorithms
