#include "apps/runtime_env.hpp"

#include "actors/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <torch/torch.h>

#include <dlfcn.h>
#include <fstream>

namespace salamander::apps {

namespace {
spdlog::level::level_enum g_level = spdlog::level::info;
}

void setup_logging(const std::string& level) {
  g_level = spdlog::level::from_str(level);
  // the actors log through the default logger: to stderr, like the rest
  spdlog::set_default_logger(spdlog::stderr_color_mt("actors"));
  spdlog::set_pattern("%H:%M:%S.%e %^%-5l%$ [%n] %v");
  spdlog::set_level(g_level);
  for (auto name : actors::log_subsystems) {
    logger(name);
  }
}

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
  if (auto existing = spdlog::get(name)) {
    return existing;
  }
  auto log = spdlog::stderr_color_mt(name);
  log->set_level(g_level);
  return log;
}

void set_threads(int threads) {
  if (threads > 0) {
    torch::set_num_threads(threads);
  }
  // OpenBLAS keeps its own pool beside LibTorch's; several node processes on
  // one host would oversubscribe the cores (../shared/STACK.md).
  using set_fn = void (*)(int);
  if (auto fn = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(threads > 0 ? threads : torch::get_num_threads());
  }
}

std::string loaded_blas() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::string found;
  while (std::getline(maps, line)) {
    auto slash = line.find('/');
    if (slash == std::string::npos) {
      continue;
    }
    auto path = line.substr(slash);
    if (path.find("blas") != std::string::npos) {
      found = path;
      if (path.find("openblas") != std::string::npos) {
        return path;
      }
    }
  }
  return found;
}

void check_blas() {
  auto path = loaded_blas();
  if (path.empty() || path.find("openblas") != std::string::npos ||
      path.find("mkl") != std::string::npos || path.find("blis") != std::string::npos) {
    logger("salamander")->debug("BLAS: {}", path.empty() ? "(none loaded)" : path);
    return;
  }
  logger("salamander")
      ->warn("LibTorch runs on {} (the reference BLAS, ~40x slower); install "
             "libopenblas0-pthread (deploy/install-deps.sh does)",
             path);
}

} // namespace salamander::apps
