#include "models/blas_memory.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace salamander::models {

namespace {

// no more than BUFFER_SIZE in any OpenBLAS build (x86-64: 128 MB since
// 0.3, 32 MB before; arm64: 16 or 20 MB)
constexpr size_t discarded_bytes = size_t{16} << 20;

// enough for every caller that could have computed at once (OpenBLAS's
// pool holds twice its MAX_THREADS; it aborts past that)
constexpr int max_taken = 16;

size_t resident_bytes(void* p, size_t bytes, size_t page) {
  std::vector<unsigned char> pages((bytes + page - 1) / page);
  if (mincore(p, bytes, pages.data()) != 0) {
    return 0;
  }
  size_t n = 0;
  for (auto v : pages) {
    n += v & 1U;
  }
  return n * page;
}

} // namespace

size_t release_blas_buffers() {
  // OpenBLAS's own pool (driver/others/memory.c), looked up at run time:
  // LibTorch may run on another BLAS, which has none
  using alloc_fn = void* (*)(int);
  using free_fn = void (*)(void*);
  auto take = reinterpret_cast<alloc_fn>(dlsym(RTLD_DEFAULT, "blas_memory_alloc"));
  auto give = reinterpret_cast<free_fn>(dlsym(RTLD_DEFAULT, "blas_memory_free"));
  if (take == nullptr || give == nullptr) {
    return 0;
  }
  auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // the pool hands out its first free buffer: take them until one was
  // never touched (or is new), so that every used one is held here
  std::vector<void*> taken;
  size_t released = 0;
  for (int i = 0; i < max_taken; ++i) {
    auto* p = take(0);
    if (p == nullptr) {
      break;
    }
    taken.push_back(p);
    if (reinterpret_cast<uintptr_t>(p) % page != 0 ||
        resident_bytes(p, page, page) == 0) {
      break;
    }
    auto bytes = resident_bytes(p, discarded_bytes, page);
    if (madvise(p, discarded_bytes, MADV_DONTNEED) == 0) {
      released += bytes;
    }
  }
  for (auto it = taken.rbegin(); it != taken.rend(); ++it) {
    give(*it);
  }
  return released;
}

} // namespace salamander::models
