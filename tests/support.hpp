// Shared test helpers. Torch comes before Catch2 (glog's CHECK would
// otherwise replace Catch2's, see ../shared/STACK.md).
#pragma once

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <random>
#include <string>

namespace salamander::testing {

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

} // namespace salamander::testing
