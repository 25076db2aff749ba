// The split-learning job supervisor (AdaSplit mode): one per split job, a
// peer of the training, serving and federated jobs under the cluster
// supervisor. It spawns the server beside itself and a client on every
// node, and runs rounds of one local epoch per client:
//
//   vanilla   clients take turns, in a seeded order fresh every round; each
//             trains its epoch through the server (activations up,
//             gradients down, every batch), starting from the client-side
//             weights the previous client ended with
//   splitfed  SplitFed v2: every client in parallel through one shared
//             server model; the client-side models are averaged (weighted
//             by examples) at the end of the round
//   adasplit  every client in parallel; rounds 1..round(kappa R) are the local
//             phase (local loss only, nothing sent); after it, a client
//             sends its activations only on the batches the orchestrator
//             picked (algorithms/split.hpp) and gets no gradient back. The
//             client-side models are averaged after each global-phase round
//             (our choice, average_clients; without it each client keeps its
//             own model all along, and the server's mask per client is what
//             reconciles them)
//
//   starting --> spawning --> training <--> paused (console)
//                               |  round: tasks out -> results in (vanilla: one
//                               |         turn after another) -> server snapshot
//                               |         -> evaluate -> checkpoint -> next round
//                               '--> finished (rounds done, time budget, stop) | failed
//
// Faults: a client whose node is lost, that dies, or that reports no
// progress for stall_s is out of the round in hand at once (vanilla: the
// next client takes its turn from the weights before it); the job spawns it
// again when its node is back and it takes part from the next round
// (adasplit: with its own last weights). After every round the server's
// layers and masks, every client-side model and the job's counters are
// checkpointed (one file, written to a temporary and renamed); a job
// started with resume carries on from there.
#pragma once

#include "actors/job/round_job.hpp"
#include "actors/job/runner.hpp"
#include "actors/split/split_client.hpp"
#include "actors/tuning.hpp"
#include "messages/interfaces.hpp"
#include "models/data.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace salamander::actors {

/// A split job's description: what `salamander split` and the tests set,
/// beside what every round job has. The defaults are the ones the README
/// documents.
struct split_config : round_job_config {
  std::string method = "adasplit";
  int64_t cut = 2; ///< the client holds layers [0, cut)
  // adasplit
  double local_fraction = 0.3;  ///< kappa: share of the rounds in the local phase
  double client_fraction = 0.6; ///< eta: share of the clients sending per iteration
  double explore = 0.5;         ///< the orchestrator's exploration weight
  /// Every client sends at least about this share of its fair part
  /// (client_fraction x its batches) in a round: its mask trains even when
  /// the bandit favours others (split::plan_sends). 0: the bandit alone.
  double send_floor = 0.5;
  double loss_decay = 0.5;      ///< of its per-client loss average
  /// vanilla: the clients take their turns in a seeded order, fresh every
  /// round (algorithms::turn_order); false: in the order of their numbers,
  /// which evaluates the model after the last-numbered client's epoch every
  /// round (a per-client figure then flatters that client).
  bool shuffle_turns = true;
  /// After each global-phase round, average the client-side models (and
  /// heads), weighted by examples, and start every client from the average;
  /// false: each client keeps its own model all along.
  bool average_clients = true;
  double mask_lr = 0.1;
  double mask_l1 = 1e-3;
  /// Below 1: each client's server mask keeps this share of every server
  /// tensor, the highest-scoring parameters (split_server_config::mask_keep);
  /// 1: a score above 1/2 keeps a parameter, the L1 pull deciding how many
  /// (at 1e-3 it kept 99.99% in ten rounds of bench split: no client's
  /// mask differed from another's). bench split, seed 1, against vanilla on
  /// each client's own labels: at least +2.5 points on every client with
  /// the L1 rule, +3.3 at 0.7, +4.5 at 0.9, +3.7 at 0.5; the shared model
  /// +3.5, +2.5, +3.7, +1.1 over vanilla's.
  double mask_keep = 0.7;
  split::c3_budget budget; ///< for the C3-style score
  /// A client that reports no progress for this long in its round is hung.
  double stall_s = 30;
};

/// What the split job keeps of client i beside its slot in the roster.
struct split_client_info {
  bool holds_weights = false; ///< adasplit: the live actor has its own weights
  int64_t samples = 0;
  std::vector<int64_t> labels; ///< its shard's examples by label
  std::chrono::steady_clock::time_point last_heard{};
  int64_t weights_sent_bytes = 0;  ///< of the task in hand
  models::weight_snapshot weights; ///< adasplit: its client-side model, as last reported
  split::traffic traffic;
  int64_t rounds_done = 0;
  double last_loss = 0;
  double last_server_loss = 0;
  int64_t last_sent = 0;
  int64_t last_batches = 0;
};

struct split_job_state {
  static inline const char* name = "split_job";
  split_config cfg;
  round_job core;                      ///< nodes, client slots, phase, status, ...
  std::unique_ptr<round_mode> mode;    ///< the hooks the core calls
  std::vector<split_client_info> info; ///< by client, beside core.clients
  split::method method = split::method::adasplit;
  models::model_desc desc;
  split::cut_costs costs;
  split_server_actor server;
  models::weight_snapshot client_model; ///< vanilla, splitfed: the current one
  models::weight_snapshot server_snap;  ///< fetched at the end of each round
  models::weight_snapshot resume_snap;  ///< the checkpoint resumed from
  size_t resume_clients = 0;            ///< how many clients its job had
  split::orchestrator orch;
  uint64_t round = 0; ///< rounds completed
  bool in_round = false;
  bool finishing = false;      ///< the round's results are in; fetching the server
  std::vector<uint32_t> turns; ///< vanilla: this round's order
  size_t turn = 0;
  std::set<uint32_t> pending; ///< clients whose result the round waits for
  std::vector<split_result> arrived;
  std::vector<uint32_t> failed;
  std::chrono::steady_clock::time_point round_started{};
  split::traffic total;
  int void_rounds = 0; ///< in a row: rounds in which no client finished
  std::string last_client_error;
  std::shared_ptr<const models::dataset> test;
  std::unique_ptr<models::layered_model> eval_model;
  std::vector<double> client_accuracy; ///< adasplit: per client, last evaluation
  /// By client, last evaluation: its model on the test split weighed to its
  /// labels (-1: not evaluated)
  std::vector<double> personal_accuracy;
  double shared_accuracy =
      -1; ///< the one model; adasplit: sides averaged, server unmasked
};

split_job_actor::behavior_type
split_job(split_job_actor::stateful_pointer<split_job_state> self, split_config cfg,
          cluster_actor cluster);

/// Runs a split job over `nodes` to its end (the CLI, tests, benchmarks);
/// weights: the whole model (client 0's side in adasplit), when asked for.
job_result run_split_job(caf::actor_system& sys, const split_config& cfg,
                         std::vector<remote_node> nodes, const job_options& opts = {});

/// The C3-style score of a finished split job's status under `budget`.
double c3_of(const job_status& s, const split::c3_budget& budget);

} // namespace salamander::actors
