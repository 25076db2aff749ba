#include "actors/job/metrics.hpp"

#include <cmath>
#include <filesystem>
#include <stdexcept>

namespace salamander::actors {

metrics_log::metrics_log(const std::string& path)
    : path_(path), opened_(std::chrono::steady_clock::now()), flushed_(opened_) {
  auto dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty()) {
    std::filesystem::create_directories(dir, ec);
  }
  out_.open(path, std::ios::trunc);
  if (!out_) {
    throw std::invalid_argument("cannot write the metrics log " + path +
                                (ec ? " (" + ec.message() + ")" : ""));
  }
}

void metrics_log::write(const std::string& kind, nlohmann::json fields) {
  auto now = std::chrono::steady_clock::now();
  nlohmann::json line = nlohmann::json::object();
  line["t"] =
      std::round(std::chrono::duration<double>(now - opened_).count() * 1e4) / 1e4;
  line["event"] = kind;
  for (auto& [k, v] : fields.items()) {
    line[k] = v;
  }
  // A path or a node name need not be UTF-8 (Linux file names are bytes);
  // JSON must be. Replace what is not rather than lose the line (dump()
  // would throw in the middle of a job's reply, e.g. `checkpoint save`).
  out_ << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  if (kind != "batch" || now - flushed_ > std::chrono::seconds(1)) {
    flush();
  }
}

std::shared_ptr<metrics_log> metrics_log::open(const std::string& path) {
  return path.empty() ? nullptr : std::make_shared<metrics_log>(path);
}

void metrics_log::flush() {
  out_.flush();
  flushed_ = std::chrono::steady_clock::now();
}

std::string check_lineage(const std::vector<uint64_t>& lineage) {
  for (size_t i = 0; i < lineage.size(); ++i) {
    if (lineage[i] != i) {
      for (size_t j = 0; j < i; ++j) {
        if (lineage[j] == lineage[i]) {
          return "batch " + std::to_string(lineage[i]) + " appears twice (positions " +
                 std::to_string(j) + " and " + std::to_string(i) + ")";
        }
      }
      return "position " + std::to_string(i) + " holds batch " +
             std::to_string(lineage[i]) + ", expected " + std::to_string(i) +
             " (a batch is missing or out of order)";
    }
  }
  return "";
}

} // namespace salamander::actors
