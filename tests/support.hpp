// Shared test helpers. Torch comes before Catch2 (glog's CHECK would
// otherwise replace Catch2's, see ../shared/STACK.md).
#pragma once

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace salamander::testing {

/// One compute thread, as the CLI runs a device (apps/runtime_env.cpp,
/// set_threads): LibTorch's and OpenBLAS's own pool, which keeps its own
/// threads. Without the second, a client's thread CPU time misses the work
/// OpenBLAS's threads did, and an emulated slow client can measure fast.
inline void one_compute_thread() {
  torch::set_num_threads(1);
  using set_fn = void (*)(int);
  if (auto fn = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(1);
  }
}

/// A fresh directory under /tmp, removed with everything in it at scope end.
class temp_dir {
public:
  temp_dir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("salamander-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  if (a.numel() == 0) {
    return 0.0;
  }
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

/// The events of one kind in a job's metrics log (JSON lines), in order.
inline std::vector<nlohmann::json> events(const std::string& path, const std::string& kind) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("event", "") == kind) {
      out.push_back(std::move(j));
    }
  }
  return out;
}

} // namespace salamander::testing
