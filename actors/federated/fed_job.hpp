// The federated job supervisor (ELFISH mode): one per federated job, a peer
// of the training and serving jobs under the cluster supervisor. It spawns a
// client on every node, collects their profiles, and runs rounds: the
// strategy (algorithms/federated.hpp) says who trains what, the job cuts
// each client's sub-model out of the global one, sends it, and aggregates
// what comes back within the round's bounded wait.
//
//   starting --> profiling --> training <--> paused (console)
//                                 |  round: configure -> tasks out -> updates in
//                                 |         (all answered, or the wait ends) -> aggregate
//                                 |         -> evaluate -> checkpoint -> next round
//                                 '--> finished (rounds done, time budget, stop) | failed
//
// Asynchronous strategies (fedbuff) have no rounds: every idle client gets a
// task from the newest global model, and the server steps every `buffer`
// updates.
//
// Faults: a client whose node is lost, or that dies, is out of the round in
// hand at once (the round does not wait for it); a hung one is out when the
// round's wait ends, and its late update is dropped. Every second the job
// spawns a client again on each live node that has none (a node that came
// back, a client that was killed), profiles it, and takes it into the next
// round. The global model and its round are checkpointed after every round
// (written to a temporary file and renamed), and a job started with resume
// carries on from the last one.
#pragma once

#include "actors/federated/width.hpp"
#include "actors/job/round_job.hpp"
#include "actors/job/runner.hpp"
#include "actors/tuning.hpp"
#include "messages/interfaces.hpp"
#include "models/data.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace salamander::actors {

/// A federated job's description: what `salamander federate` and the tests
/// set, beside what every round job has. The defaults are the ones the
/// README documents.
struct fed_config : round_job_config {
  fed_config() { rounds = 20; }
  std::string strategy = "fedavg";
  fed::settings settings;
  std::vector<double> profile_keeps = {0.0625, 0.125, 0.25, 0.5, 1.0};
  /// Timed batches at each kept fraction (their median is the time; a
  /// warm-up batch before them is not timed).
  int64_t profile_batches = 5;
  /// FedRS's restricted softmax in every client's local training: the
  /// logits of the classes its shard lacks scaled by this (Li and Zhan
  /// 2021, alpha); 1: plain softmax, the default.
  double restricted_softmax = 1.0;
};

/// What the federated job keeps of client i beside its slot in the roster.
struct fed_client_info {
  bool busy = false; ///< fedbuff: a task is out
  fed::client_view view;
  fed_profile profile;
  double last_keep = 0; ///< of its last task (0: none yet)
  double last_work = 1; ///< of its last task
  double last_train_s = 0;
  int64_t last_batches = 0; ///< batches its last update trained
  int64_t updates = 0; ///< taken into the global model
};

struct fed_job_state {
  static inline const char* name = "fed_job";
  fed_config cfg;
  round_job core;                    ///< nodes, client slots, phase, status, ...
  std::unique_ptr<round_mode> mode;  ///< the hooks the core calls
  std::vector<fed_client_info> info; ///< by client, beside core.clients
  models::model_desc desc;
  fed::model_layout layout;
  std::unique_ptr<fed::strategy> strategy;
  fed::flat_params global;
  uint64_t version = 0; ///< rounds aggregated (fedbuff: server steps)
  std::shared_ptr<const models::dataset> test;
  std::unique_ptr<models::layered_model> eval_model;

  // the round in hand (synchronous strategies)
  bool in_round = false;
  fed::round_plan plan;
  std::map<uint32_t, fed::client_task> tasks; ///< by client: out, not answered
  std::vector<fed::update> arrived;
  std::vector<uint32_t> failed; ///< answered with an error, or lost
  std::chrono::steady_clock::time_point round_started{};
  // fedbuff
  std::vector<fed::update> buffer;
  std::map<uint32_t, fed::client_task> async_tasks;
  uint64_t async_tasks_sent = 0; ///< numbers each task (its example order)
};

fed_job_actor::behavior_type fed_job(fed_job_actor::stateful_pointer<fed_job_state> self,
                                     fed_config cfg, cluster_actor cluster);

/// Runs a federated job over `nodes` to its end (the CLI, tests,
/// benchmarks); weights: the global model, when asked for.
job_result run_fed_job(caf::actor_system& sys, const fed_config& cfg,
                       std::vector<remote_node> nodes, const job_options& opts = {});

} // namespace salamander::actors
