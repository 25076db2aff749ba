// What a node gives back of OpenBLAS's buffers after a job
// (models/blas_memory.hpp).
#include "models/blas_memory.hpp"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <dlfcn.h>

using salamander::models::release_blas_buffers;

TEST_CASE("what OpenBLAS's products touched is given back, and products stay exact",
          "[unit][memory]") {
#if !defined(__x86_64__) && !defined(__aarch64__)
  WARN("skipped: buffers are given back on x86-64 and arm64 only");
  return;
#endif
  if (dlsym(RTLD_DEFAULT, "blas_memory_alloc") == nullptr) {
    WARN("skipped: LibTorch's BLAS here is not OpenBLAS");
    return;
  }
  torch::manual_seed(1);
  auto a = torch::randn({512, 1024});
  auto b = torch::randn({1024, 768});
  auto before = torch::mm(a, b);
  CHECK(release_blas_buffers() > 0);
  CHECK(release_blas_buffers() == 0); // nothing resident any more
  CHECK(torch::equal(torch::mm(a, b), before));
  CHECK(release_blas_buffers() > 0); // the product touched them again
}

TEST_CASE("oneDNN's cached primitives are dropped with its capacity kept and "
          "convolutions exact",
          "[unit][memory]") {
  using capacity_fn = int (*)(int*);
  auto get_capacity = reinterpret_cast<capacity_fn>(
      dlsym(RTLD_DEFAULT, "dnnl_get_primitive_cache_capacity"));
  auto get_size = reinterpret_cast<capacity_fn>(
      dlsym(RTLD_DEFAULT, "_ZN4dnnl4impl24get_primitive_cache_sizeEPi"));
  if (get_capacity == nullptr || get_size == nullptr) {
    WARN("skipped: LibTorch here runs without oneDNN, or one that does not say its "
         "cache's size");
    return;
  }
  int capacity = 0;
  REQUIRE(get_capacity(&capacity) == 0);
  salamander::models::release_onednn_primitives(); // what earlier tests made
  torch::manual_seed(1);
  // the CNN's first convolution, batch 32: LibTorch runs it on oneDNN
  auto x = torch::randn({32, 1, 28, 28});
  auto w = torch::randn({16, 1, 3, 3});
  auto before = torch::conv2d(x, w, {}, 1, 1);
  int made = 0;
  REQUIRE(get_size(&made) == 0);
  if (made == 0) {
    WARN("skipped: this LibTorch made no oneDNN primitive for a convolution");
    return;
  }
  CHECK(salamander::models::release_onednn_primitives() == static_cast<size_t>(made));
  int left = -1;
  REQUIRE(get_size(&left) == 0);
  CHECK(left == 0);
  int after = 0;
  REQUIRE(get_capacity(&after) == 0);
  CHECK(after == capacity);
  CHECK(torch::equal(torch::conv2d(x, w, {}, 1, 1), before));
  CHECK(salamander::models::release_onednn_primitives() > 0); // made again
}
