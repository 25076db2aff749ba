// The dashboard's view of a job: the job's common status (messages/job.hpp)
// as JSON, every node with its state and what it holds (layers, replicas,
// clients), and one sample of the live curves. The page, the state API and
// the report of a finished run (`salamander plot RUN.jsonl -o report.html`)
// read this one shape.
#pragma once

#include "messages/job.hpp"

#include <nlohmann/json.hpp>

namespace salamander::apps {

/// {"job": {...}, "nodes": [...], "sample": {...}}:
/// - job: mode, phase, times, loss, accuracy, plan, progress (done, total,
///   unit, eta_s), the mode's figures, and the stages with their layer
///   ranges and per-batch compute / wait / send;
/// - nodes: name, address, state (online, joining, suspect, lost, paused),
///   health as
///   the cluster says it, role, emulation, cpu share, speed, capacity,
///   memory, link rate and latency, heartbeat age, and what it holds:
///   `layers` ([begin, end) per stage it runs), `replicas` (the stages whose
///   chain replica it keeps), `clients` (federated and split);
/// - sample: the figures the page's curves add a point of (t = elapsed_s).
nlohmann::json state_json(const job_status& s);

/// A node's state from the cluster's health word and the job's phase.
std::string node_state(const std::string& health, const job_status& s);

} // namespace salamander::apps
