// The job's metrics as JSON lines: one object per committed batch and one
// per event (failure, recovery phases, re-plan, join, pause, evaluation,
// end). README.md ("Metrics") documents the fields; `salamander plot` and
// `salamander audit` read them back.
//
// Why JSON lines: a crash mid-run leaves every line before it readable, a
// long run can be followed with `tail -f`, and any tool reads it.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>

namespace salamander::actors {

class metrics_log {
public:
  /// Creates (truncates) `path`, making its directory. Throws with the path
  /// in the message when it cannot.
  explicit metrics_log(const std::string& path);

  /// Appends {"t": seconds since the log opened, "event": kind, ...fields}.
  /// Events are flushed at once; batches at most once a second.
  void write(const std::string& kind, nlohmann::json fields = nlohmann::json::object());

  /// The log at `path`, or null when `path` is "" (no metrics asked for).
  static std::shared_ptr<metrics_log> open(const std::string& path);

  void flush();
  const std::string& path() const { return path_; }

private:
  std::string path_;
  std::ofstream out_;
  std::chrono::steady_clock::time_point opened_;
  std::chrono::steady_clock::time_point flushed_;
};

/// Checks that `lineage` lists batches 0..n-1 each exactly once, in order;
/// "" when it does, else what is wrong (the first duplicate or gap).
std::string check_lineage(const std::vector<uint64_t>& lineage);

} // namespace salamander::actors
