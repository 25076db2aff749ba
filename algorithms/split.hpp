// Split learning: the pure parts. A model is cut after layer cut-1; each
// client holds layers [0, cut) and the server holds [cut, n). A client runs
// its part on a batch and sends the cut's activations (and the labels) to
// the server, which finishes the forward pass, computes the loss and sends
// back the gradient at the cut. No actors, clocks, torch or logging here;
// the split job (actors/split/) moves the tensors and calls these to decide
// who sends what, what a cut costs and how a run scores (the same split of
// policy and transport as federated.hpp).
//
// Methods:
//
//   vanilla   split learning (Gupta & Raskar 2018; Vepakomma et al. 2018):
//             clients take turns, one at a time, against one server model;
//             the client part's weights pass from each client to the next
//   splitfed  SplitFed (Thapa et al. 2022): every client trains in
//             parallel against the server; after a round the client parts
//             (and the server's per-client copies) are averaged, weighted
//             by samples (sample_weights), as in FedAvg
//   adasplit  AdaSplit (Chopra et al. 2021): the first local_rounds rounds
//             are a local phase in which each client trains alone on a local
//             loss (here an auxiliary dense head on the cut's activations,
//             aux_head_flops; our choice) and sends nothing; in the global
//             phase an orchestrator picks, at each iteration, a fraction of
//             the clients whose activations go to the server, favouring the
//             clients the server does worst on (an EMA of its loss on each)
//             plus a UCB-style exploration bonus, so traffic and server
//             compute scale with the fraction instead of the client count.
//             The plan is made per round so the job can tell each client up
//             front at which of its batches to send.
//
// The cost model (costs_at_cut) and the score (c3_score) turn a model
// description's per-layer figures and a run's counters into comparable
// numbers: AdaSplit's C3-Score weighs accuracy against communication and
// client computation, but its formula is not published in a form we have,
// so c3_score is our own half-life discount (documented below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace salamander::split {

// ---- methods

enum class method { vanilla, splitfed, adasplit };

/// "vanilla" | "splitfed" | "adasplit"; throws std::invalid_argument listing
/// the names.
method parse_method(const std::string& name);
/// The name parse_method accepts; throws std::invalid_argument for a value
/// outside the enum.
std::string to_string(method m);
/// vanilla, splitfed, adasplit (in that order).
std::vector<std::string> method_names();

// ---- AdaSplit's phases

/// AdaSplit's rounds 1..local_rounds(R, kappa) are the local phase.
/// round(kappa*R) (half up, with a 1e-9 tolerance so that decimal fractions
/// such as 0.35 of 10 round as written), clamped to [0, R]; throws
/// std::invalid_argument for kappa outside [0,1] (or NaN) or R < 1.
int64_t local_rounds(int64_t rounds, double local_fraction);
/// round is 1-based: true for rounds 1..local_rounds(rounds, local_fraction).
/// Throws std::invalid_argument for round < 1 and for what local_rounds
/// rejects.
bool in_local_phase(int64_t round, int64_t rounds, double local_fraction);

// ---- AdaSplit's orchestrator

/// The orchestrator: which clients send their activations to the server at
/// each iteration (batch index within a round) of AdaSplit's global phase.
struct orchestrator {
  /// Per client: EMA of the server's loss on its activations; NaN = never seen.
  std::vector<double> loss;
  /// Per client: iterations it was picked, over the whole job.
  std::vector<int64_t> picks;
  int64_t total_picks = 0; ///< sum of picks
  /// loss all NaN, picks 0.
  explicit orchestrator(size_t clients = 0);
  size_t clients() const { return loss.size(); }
};

/// Plans one round: batches[i] = how many batches client i trains this
/// round (0: not in the round). For each iteration t = 0 .. max(batches)-1,
/// the eligible clients are those with batches[i] > t; k = ceil(fraction *
/// eligible - 1e-9), at least 1 when any is eligible, at most eligible. The
/// k eligible clients with the highest priority are picked,
/// priority_i = loss_i + explore * sqrt(ln(1 + total_picks) / (1 + picks_i));
/// a client whose loss is NaN has priority +infinity (it is always tried
/// first; unseen clients rotate, the least picked first); other ties go to
/// the lower index. After each iteration's picks, picks_i
/// and total_picks are incremented (so the plan rotates within a round).
/// Returns send[i][t] = 1 if client i sends at iteration t (send[i].size()
/// == batches[i]).
///
/// A floor keeps every client's mask trained: with floor f > 0, a client
/// whose picks this round + 1 <= f x fraction x (t + 1) at iteration t is
/// starved and goes before every other (the fewest picks this round first,
/// then the lower index). So each client sends at least about f x fraction
/// of its batches in a round, whatever its loss. f = 0: the bandit alone.
/// Throws std::invalid_argument (leaving `o` unchanged) unless fraction is
/// in (0,1], explore is finite and >= 0, floor is in [0, 1], batches has
/// one entry per client of `o` and none is negative.
std::vector<std::vector<uint8_t>> plan_sends(const std::vector<int64_t>& batches,
                                             double fraction, double explore,
                                             orchestrator& o, double floor = 0);

/// After a round: client i's mean server loss on what it sent (not called
/// when it sent nothing): loss_i = loss_i is NaN ? value : decay*loss_i +
/// (1-decay)*value. Throws std::invalid_argument unless decay is in [0,1),
/// value is finite and client is one of `o`'s.
void observe_loss(orchestrator& o, size_t client, double value, double decay);

// ---- costs of a cut

/// Training FLOPs per sample from forward FLOPs: forward + backward, the
/// backward pass ~ 2x the forward one.
constexpr double training_flops_factor = 3.0;
inline double training_flops(double forward_flops) {
  return training_flops_factor * forward_flops;
}

/// Per-sample costs of a model cut after layer cut-1 (client holds layers
/// [0,cut), server [cut,n)), from the model description's per-layer figures
/// (forward FLOPs per sample, output bytes per sample, parameter bytes per
/// layer). Training FLOPs are 3x forward (training_flops).
struct cut_costs {
  double client_forward_flops = 0; ///< per sample, layers [0,cut)
  double server_forward_flops = 0; ///< per sample, layers [cut,n)
  int64_t activation_bytes = 0;   ///< per sample: output of layer cut-1 (what crosses the
                                  ///< cut, float32)
  int64_t client_param_bytes = 0; ///< layers [0,cut)
  int64_t server_param_bytes = 0; ///< layers [cut,n)
};

/// Throws std::invalid_argument unless 1 <= cut <= n-1 (the message names n
/// and the valid range); all three vectors must have the same size n and
/// hold no negative figure.
cut_costs costs_at_cut(const std::vector<double>& layer_forward_flops,
                       const std::vector<int64_t>& layer_output_bytes,
                       const std::vector<int64_t>& layer_param_bytes, size_t cut);

/// Forward FLOPs per sample of the auxiliary head AdaSplit's client uses for
/// its local loss: one dense layer from the cut's activations
/// (activation_bytes/4 floats) to `classes`: 2*in*classes + classes.
/// Throws std::invalid_argument for activation_bytes < 0 or not a multiple
/// of 4, or classes < 1.
double aux_head_flops(int64_t activation_bytes, int64_t classes);

// ---- accounting and scoring

/// What one client (or the job, summed) sent and computed.
struct traffic {
  int64_t up = 0;   ///< bytes client -> server (activations, labels, weights)
  int64_t down = 0; ///< bytes server -> client (gradients, weights)
  double client_flops = 0;
  double server_flops = 0;
  /// Adds every field.
  traffic& operator+=(const traffic& o);
  int64_t bytes() const { return up + down; }
};

/// Budgets of the C3-style score: spending one halves the score.
struct c3_budget {
  double bytes = 1e9;
  double client_flops = 1e13;
};

/// The C3-style score (ours; the published C3-Score's formula is not
/// available): accuracy in [0,1] discounted by a half-life per budget:
/// score = accuracy * 2^(-bytes/budget_bytes) *
/// 2^(-client_flops/budget_flops). Spending a whole budget halves the
/// score. Budgets must be > 0 and bytes and client_flops >= 0
/// (std::invalid_argument otherwise); accuracy is clamped to [0,1] (NaN
/// counts as 0).
double c3_score(double accuracy, double bytes, double client_flops,
                const c3_budget& budget);

/// Sample-weighted average weights: weights_i = samples_i / sum (sum 0 ->
/// equal weights); empty -> empty. Throws std::invalid_argument for a
/// negative count.
std::vector<double> sample_weights(const std::vector<int64_t>& samples);

} // namespace salamander::split
