// One named logger per subsystem (cluster, job, recovery, stage, node,
// replication): `salamander` creates them at start-up with the process's
// level and sinks (apps/runtime_env.cpp); where nobody did (tests), the
// default logger stands in.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>

namespace salamander::actors {

/// The subsystems that log (their loggers are made at start-up), the HTTP
/// transport's and the dashboard's among them.
inline constexpr const char* log_subsystems[] = {"cluster", "job",         "recovery",
                                                 "stage",   "node",        "replication",
                                                 "serve",   "dashboard"};

inline std::shared_ptr<spdlog::logger> subsystem_log(const char* name) {
  if (auto log = spdlog::get(name)) {
    return log;
  }
  return spdlog::default_logger();
}

} // namespace salamander::actors
