#include "models/blas_memory.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

namespace salamander::models {

namespace {

// No more than an OpenBLAS buffer (BUFFER_SIZE) on the machines this runs
// for: 128 MB on x86-64 since 0.3 (32 MB before), 32 MB on arm64 in 0.3.21
// (16-20 MB in other releases). A build option can make it smaller, and
// other machines have smaller ones (2 MB on PPC440), where the advice would
// run on into the next mapping: there nothing is released.
constexpr size_t discarded_bytes = size_t{16} << 20;
#if defined(__x86_64__) || defined(__aarch64__)
constexpr bool known_machine = true;
#else
constexpr bool known_machine = false;
#endif

// enough for every caller that could have computed at once; OpenBLAS's
// pool holds at least 50 and past its end 0.3.21 corrupts its heap on the
// free, so this must stay far below that
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
  if (!known_machine) {
    return 0;
  }
  // OpenBLAS's own pool (driver/others/memory.c), looked up at run time:
  // LibTorch may run on another BLAS, which has none
  using alloc_fn = void* (*)(int);
  using free_fn = void (*)(void*);
  auto take = reinterpret_cast<alloc_fn>(dlsym(RTLD_DEFAULT, "blas_memory_alloc"));
  auto give = reinterpret_cast<free_fn>(dlsym(RTLD_DEFAULT, "blas_memory_free"));
  if (take == nullptr || give == nullptr) {
    return 0;
  }
  // The buffers the pool handed out before: it hands out its first free one,
  // so every one used since is among these, or the first new one (a product
  // that ran during a release gets one past those the release held).
  static std::mutex seen_mutex;
  static std::set<void*> seen;
  std::lock_guard<std::mutex> lock(seen_mutex);
  auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<void*> taken;
  size_t released = 0;
  for (int i = 0; i < max_taken; ++i) {
    auto* p = take(0);
    if (p == nullptr) {
      break;
    }
    taken.push_back(p);
    if (reinterpret_cast<uintptr_t>(p) % page != 0) {
      break; // not a mapping of its own (malloc's, or a thread's table)
    }
    bool known = !seen.insert(p).second;
    if (resident_bytes(p, page, page) == 0) {
      if (!known) {
        break; // new: no product used it, nor any buffer after it
      }
      continue; // given back before and not used since
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

size_t release_onednn_primitives() {
  // oneDNN's API (dnnl.h), looked up at run time: LibTorch may be built
  // without it; the size is its testing API's (dnnl::impl, exported)
  using capacity_fn = int (*)(int*);
  using set_capacity_fn = int (*)(int);
  auto get_capacity = reinterpret_cast<capacity_fn>(
      dlsym(RTLD_DEFAULT, "dnnl_get_primitive_cache_capacity"));
  auto set_capacity = reinterpret_cast<set_capacity_fn>(
      dlsym(RTLD_DEFAULT, "dnnl_set_primitive_cache_capacity"));
  auto get_size = reinterpret_cast<capacity_fn>(
      dlsym(RTLD_DEFAULT, "_ZN4dnnl4impl24get_primitive_cache_sizeEPi"));
  constexpr int dnnl_success = 0;
  int capacity = 0;
  if (get_capacity == nullptr || set_capacity == nullptr ||
      get_capacity(&capacity) != dnnl_success || capacity == 0) {
    return 0;
  }
  int entries = 0;
  if (get_size == nullptr || get_size(&entries) != dnnl_success) {
    entries = 0;
  }
  // a capacity of 0 evicts every entry; a primitive in use stays alive
  // with its user (the cache holds shared pointers)
  if (set_capacity(0) != dnnl_success) {
    return 0;
  }
  set_capacity(capacity);
  return static_cast<size_t>(entries);
}

} // namespace salamander::models
