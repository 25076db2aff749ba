#include "apps/dashboard/state_json.hpp"

#include <algorithm>
#include <cmath>

namespace salamander::apps {

namespace {

using json = nlohmann::json;

// NaN and infinity are not JSON: null instead.
json number(double x) {
  return std::isfinite(x) ? json(x) : json(nullptr);
}

// Done, total, unit and the time left at the rate so far (null: unknown).
json progress(const job_status& s) {
  double done = 0;
  double total = 0;
  std::string unit;
  switch (s.mode) {
  case job_mode::train:
    done = static_cast<double>(s.training.committed);
    total = static_cast<double>(s.training.epochs * s.training.batches);
    unit = "batches";
    break;
  case job_mode::federate:
  case job_mode::split:
    done = static_cast<double>(s.rounds.round);
    total = static_cast<double>(s.rounds.total);
    unit = "rounds";
    break;
  case job_mode::serve:
    done = static_cast<double>(s.serving.requests);
    unit = "requests";
    break;
  }
  json eta = nullptr;
  // training's train_s advances at the end of each epoch only: the wall
  // time since the start keeps pace with the batches (start-up included)
  double spent = s.mode == job_mode::train || s.train_s <= 0 ? s.elapsed_s : s.train_s;
  if (s.finished()) {
    eta = 0.0;
  } else if (total > 0 && done > 0 && spent > 0) {
    eta = spent / done * std::max(0.0, total - done);
  }
  return json{{"done", done}, {"total", total}, {"unit", unit}, {"eta_s", eta}};
}

json stages_json(const job_status& s) {
  json out = json::array();
  for (auto& r : s.stages) {
    out.push_back({{"index", r.index},
                   {"node", r.node},
                   {"begin", r.begin},
                   {"end", r.end},
                   {"predicted_s", r.predicted_s},
                   {"measured_s", r.measured_s},
                   {"wait_s", r.wait_s},
                   {"send_s", r.send_s}});
  }
  return out;
}

// Each stage's mean compute, wait and send per batch of the current plan.
json stage_time_json(const pipeline_status& p) {
  json out = json::array();
  auto n = static_cast<double>(std::max<int64_t>(1, p.plan_batches));
  for (size_t i = 0; i < p.stage_compute_s.size(); ++i) {
    double wait = i < p.stage_wait_s.size() ? p.stage_wait_s[i] : 0;
    double send = i < p.stage_send_s.size() ? p.stage_send_s[i] : 0;
    out.push_back({{"stage", i},
                   {"compute_s", p.stage_compute_s[i] / n},
                   {"wait_s", wait / n},
                   {"send_s", send / n}});
  }
  return out;
}

json mode_json(const job_status& s) {
  json out = json::object();
  if (s.mode == job_mode::train || s.mode == job_mode::serve) {
    auto& p = s.pipeline;
    out["pipeline"] = {{"plan_version", p.plan_version},
                       {"replans", p.replans},
                       {"last_replan_s", p.last_replan_s},
                       {"recoveries", p.recoveries},
                       {"last_recovery_s", p.last_recovery_s},
                       {"schedule", p.schedule},
                       {"stage_time", stage_time_json(p)}};
  }
  if (s.mode == job_mode::train) {
    auto& t = s.training;
    out["training"] = {{"epoch", t.epoch},
                       {"epochs", t.epochs},
                       {"batch", t.batch},
                       {"batches", t.batches},
                       {"committed", t.committed},
                       {"samples_per_s", t.samples_per_s},
                       {"recent_samples_per_s", t.recent_samples_per_s},
                       {"redone_batches", t.redone_batches},
                       {"lineage_batches", t.lineage.size()},
                       {"exact", t.exact}};
  }
  if (s.mode == job_mode::serve) {
    auto& v = s.serving;
    out["serving"] = {{"requests", v.requests},
                      {"failed_requests", v.failed_requests},
                      {"rejected", v.rejected},
                      {"requests_per_s", v.requests_per_s},
                      {"queue_depth", v.queue_depth},
                      {"in_flight", v.in_flight},
                      {"latency_p50_s", v.latency_p50_s},
                      {"latency_p95_s", v.latency_p95_s},
                      {"latency_p99_s", v.latency_p99_s},
                      {"resent", v.resent},
                      {"duplicates", v.duplicates}};
  }
  if (s.mode == job_mode::federate || s.mode == job_mode::split) {
    auto& r = s.rounds;
    out["rounds"] = {{"strategy", r.strategy},   {"round", r.round},
                     {"total", r.total},         {"clients", r.clients},
                     {"contributed", r.contributed}, {"dropped_updates", r.dropped_updates},
                     {"round_s", r.round_s},     {"pace_s", r.pace_s},
                     {"bytes_up", r.bytes_up},   {"bytes_down", r.bytes_down},
                     {"client_flops", r.client_flops}, {"server_flops", r.server_flops},
                     {"split_phase", to_string(r.split_phase)}};
  }
  return out;
}

// What a node holds: the stages it runs, the chain replicas it keeps (stage
// k's weights live on stage k+1's node; the last stage's on the
// supervisor), and for round jobs the client it runs (client i on the
// job's node i).
void holdings(const job_status& s, json& nodes) {
  for (auto& n : nodes) {
    n["layers"] = json::array();
    n["replicas"] = json::array();
    n["clients"] = json::array();
  }
  auto find = [&](const std::string& name) -> json* {
    for (auto& n : nodes) {
      if (n["name"] == name) {
        return &n;
      }
    }
    return nullptr;
  };
  // data parallelism lists several members under one stage index: where
  // their replicas live is not the next row's node, so none is drawn
  bool members = false;
  for (size_t i = 1; i < s.stages.size(); ++i) {
    members = members || s.stages[i].index == s.stages[i - 1].index;
  }
  for (size_t i = 0; i < s.stages.size(); ++i) {
    auto& r = s.stages[i];
    if (auto* n = find(r.node)) {
      (*n)["layers"].push_back({{"stage", r.index}, {"begin", r.begin}, {"end", r.end}});
    }
    if (s.mode == job_mode::train && !members && i + 1 < s.stages.size() &&
        s.stages[i + 1].index == r.index + 1) {
      if (auto* n = find(s.stages[i + 1].node)) {
        (*n)["replicas"].push_back({{"stage", r.index}, {"begin", r.begin}, {"end", r.end}});
      }
    }
  }
  if (s.mode == job_mode::federate || s.mode == job_mode::split) {
    // a round job's plan names each client's node, client by client:
    // "node1:1.00 node1:0.50 node2:down"
    size_t client = 0;
    size_t at = 0;
    while (at < s.plan.size()) {
      auto end = s.plan.find(' ', at);
      auto word = s.plan.substr(at, end == std::string::npos ? std::string::npos : end - at);
      if (auto colon = word.rfind(':'); colon != std::string::npos && colon > 0) {
        if (auto* n = find(word.substr(0, colon))) {
          (*n)["clients"].push_back(client);
        }
        ++client;
      }
      if (end == std::string::npos) {
        break;
      }
      at = end + 1;
    }
  }
}

json sample_json(const job_status& s) {
  json x{{"t", s.elapsed_s}, {"phase", to_string(s.phase)}};
  x["accuracy"] = s.test_accuracy >= 0 ? json(s.test_accuracy) : json(nullptr);
  switch (s.mode) {
  case job_mode::train:
    x["samples_per_s"] = s.training.recent_samples_per_s;
    x["loss"] = number(s.loss);
    x["committed"] = s.training.committed;
    break;
  case job_mode::serve:
    x["requests_per_s"] = s.serving.requests_per_s;
    x["p50_ms"] = s.serving.latency_p50_s * 1e3;
    x["p99_ms"] = s.serving.latency_p99_s * 1e3;
    x["queue"] = s.serving.queue_depth;
    break;
  case job_mode::federate:
  case job_mode::split:
    x["round"] = s.rounds.round;
    x["loss"] = number(s.loss);
    x["bytes"] = s.rounds.bytes_up + s.rounds.bytes_down;
    break;
  }
  return x;
}

} // namespace

std::string node_state(const std::string& health, const job_status& s) {
  if (health == "dead" || health == "refused") {
    return "lost";
  }
  if (health == "late") {
    return "suspect";
  }
  if (health == "joining") {
    return "joining";
  }
  if (s.phase == status_phase::paused || s.paused_by_user) {
    return "paused";
  }
  return "online";
}

nlohmann::json state_json(const job_status& s) {
  json job{{"mode", to_string(s.mode)},
           {"phase", to_string(s.phase)},
           {"finished", s.finished()},
           {"elapsed_s", s.elapsed_s},
           {"train_s", s.train_s},
           {"loss", number(s.loss)},
           {"test_accuracy", s.test_accuracy >= 0 ? json(s.test_accuracy) : json(nullptr)},
           {"plan", s.plan},
           {"error", s.error},
           {"paused_by_user", s.paused_by_user},
           {"health", s.health},
           {"metrics_path", s.metrics_path},
           {"stopped", s.stopped},
           {"dead_nodes", s.dead_nodes},
           {"progress", progress(s)},
           {"stages", stages_json(s)}};
  job.update(mode_json(s));
  json nodes = json::array();
  for (auto& n : s.nodes) {
    nodes.push_back({{"name", n.name},
                     {"address", n.address},
                     {"state", node_state(n.health, s)},
                     {"health", n.health},
                     {"role", n.role},
                     {"emulation", n.emulation},
                     {"cpu_share", n.cpu_share},
                     {"speed", n.speed},
                     {"capacity", n.capacity},
                     {"memory_bytes", n.memory_bytes},
                     {"link_bytes_per_s", n.link_bytes_per_s},
                     {"link_latency_s", n.link_latency_s},
                     {"last_heartbeat_s", n.last_heartbeat_s}});
  }
  holdings(s, nodes);
  return json{{"job", std::move(job)}, {"nodes", std::move(nodes)}, {"sample", sample_json(s)}};
}

} // namespace salamander::apps
