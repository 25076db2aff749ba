#include "actors/job/job_core.hpp"
#include "actors/job/running.hpp"

#include "actors/job/metrics.hpp"
#include "actors/planning/capacity.hpp"

namespace salamander::actors {

void job_core::open_metrics(const std::string& path) {
  metrics = metrics_log::open(path);
  status.metrics_path = path;
}

void job_core::log_event(const std::string& kind, nlohmann::json fields) {
  if (fields.is_null() || !fields.is_object()) {
    fields = nlohmann::json::object();
  }
  if (kind == "batch" || kind == "serve") {
    // per batch, per second: the status carries these figures; in the ring
    // they would push out the failures and plans a timeline is for
    if (metrics) {
      metrics->write(kind, std::move(fields));
    }
    return;
  }
  // the timeline's copy first: the log takes the fields
  auto now = std::chrono::steady_clock::now();
  nlohmann::json line{
      {"seq", events->next()},
      {"t", started == std::chrono::steady_clock::time_point{}
                ? 0.0
                : std::chrono::duration<double>(now - started).count()},
      {"unix_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count()},
      {"event", kind}};
  for (auto& [key, value] : fields.items()) {
    if (!line.contains(key)) {
      line[key] = value;
    }
  }
  events->add(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (metrics) {
    metrics->write(kind, std::move(fields));
  }
}

void job_core::flush_metrics() {
  if (metrics) {
    metrics->flush();
  }
}

std::optional<std::string> job_core::pause_by_user() {
  if (user_paused) {
    return std::string("already paused; resume carries on");
  }
  user_paused = true;
  status.paused_by_user = true;
  return std::nullopt;
}

caf::expected<joined> job_core::node_joins(uint32_t n, const cluster_member& m,
                                           capacity_model* capacity) {
  auto how = accept_joined(nodes, status.dead_nodes, n, m);
  if (!how) {
    return how;
  }
  if (capacity && *how == joined::new_node) {
    capacity->add_node();
  }
  log_event("join", {{"node", m.name}});
  return how;
}

bool job_core::resume_by_user() {
  if (!user_paused) {
    return false;
  }
  user_paused = false;
  status.paused_by_user = false;
  return true;
}

std::optional<std::string> job_core::request_stop(const std::string& why) {
  if (!stop_requested.empty()) {
    return "already stopping (" + stop_requested + ")";
  }
  stop_requested = why.empty() ? std::string("stop") : why;
  return std::nullopt;
}

namespace lifecycle {

caf::result<std::string> pause(job_core& core, const job_hooks& hooks) {
  if (auto nothing = core.pause_by_user()) {
    return *nothing;
  }
  return hooks.paused();
}

caf::result<std::string> resume(job_core& core, const job_hooks& hooks) {
  if (!core.resume_by_user()) {
    return hooks.not_paused ? hooks.not_paused() : std::string("not paused");
  }
  return hooks.resumed();
}

caf::result<std::string> stop(job_core& core, const job_hooks& hooks,
                              const std::string& why) {
  if (auto nothing = core.request_stop(why)) {
    return *nothing;
  }
  return hooks.stopping();
}

caf::result<std::string> checkpoint(const job_hooks& hooks, const std::string& path) {
  if (path.empty()) {
    return caf::make_error(errc::bad_config, "checkpoint save needs a PATH");
  }
  return hooks.checkpoint(path);
}

} // namespace lifecycle

} // namespace salamander::actors
