// What LibTorch alone costs a process: loads it, runs one small matmul (so
// its allocator, BLAS and thread pool are up, as in a node that has done
// nothing yet), prints "ready" and waits to be killed. bench/footprint.cpp
// compares a node process with it.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <unistd.h>

int main() {
  at::set_num_threads(1);
  auto t = at::ones({64, 64});
  auto u = t.mm(t);
  std::printf("ready %g\n", u.sum().item<double>());
  std::fflush(stdout);
  for (;;) {
    ::pause();
  }
}
