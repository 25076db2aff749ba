// What every job has, whatever its mode: written once, and the base of the
// training and serving jobs' states and of the round job core (federated,
// split).
//
//   job_core                           a mode adds
//   --------------------------------   -------------------------------------
//   the cluster supervisor's handle    its phase (an enum and a pure table
//   the node roster (job_node)           in algorithms/, one per mode)
//   the console's pause and stop       its workers (stages, clients) and
//   the status (job_status: the          what it does on each event
//     common part and the mode's)      its part of the status
//   the metrics log and its events     its checkpoint and resume state
//   when the job started
//
// The behaviour of an ended job is common too (actors/job/ended.hpp): each
// job switches to it with `become` when its phase is over.
#pragma once

#include "actors/job/event_ring.hpp"
#include "actors/job/job_nodes.hpp"
#include "messages/interfaces.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace salamander::actors {

class capacity_model;
class metrics_log;

struct job_core {
  cluster_actor cluster;
  std::vector<job_node> nodes;
  /// The console paused the job: it starts no new work until resumed.
  bool user_paused = false;
  /// Asked to stop (SIGINT, SIGTERM, the console): why ("" while not).
  std::string stop_requested;
  job_status status;
  std::shared_ptr<metrics_log> metrics; ///< null without --metrics
  /// The recent events, with or without a metrics log (the dashboard's
  /// timeline); shared with the ended behaviour.
  std::shared_ptr<event_ring> events = std::make_shared<event_ring>();
  std::chrono::steady_clock::time_point started{};

  /// Opens the metrics log at `path` ("" for none) and names it in the
  /// status; throws with the path when it cannot be created.
  void open_metrics(const std::string& path);
  /// One event in the metrics log (if there is one) and, but for the
  /// per-batch and per-second lines ("batch", "serve"), in `events`; null
  /// fields are an empty object.
  void log_event(const std::string& kind, nlohmann::json fields = nlohmann::json::object());
  void flush_metrics();
  /// The console's pause: pauses, or says why nothing changes (paused
  /// already).
  std::optional<std::string> pause_by_user();
  /// The console's resume: false when the console had not paused it.
  bool resume_by_user();
  /// A node joined the cluster (new, or back): takes it into the roster and
  /// logs "join"; a new node is planned with its peers' profile
  /// (`capacity`, for pipelined jobs) until it is measured. The error names
  /// an index the job does not know (nothing changes).
  caf::expected<joined> node_joins(uint32_t n, const cluster_member& m,
                                   capacity_model* capacity = nullptr);
  /// Keeps why the job stops ("stop" when no reason is given), or says why
  /// nothing changes (a stop was asked already: the first reason stays).
  std::optional<std::string> request_stop(const std::string& why);
};

} // namespace salamander::actors
