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
