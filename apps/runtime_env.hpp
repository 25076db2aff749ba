// Process-wide settings every salamander command applies first: loggers,
// thread counts, and a check of which BLAS LibTorch is running on.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace salamander::apps {

/// Creates the named loggers (salamander, train, data, ...) writing to stderr.
void setup_logging(const std::string& level);

/// The logger of one subsystem, created on first use.
std::shared_ptr<spdlog::logger> logger(const std::string& name);

/// Sets LibTorch's intra-op threads and OpenBLAS's pool to `threads`
/// (0: leave LibTorch's default, one OpenBLAS thread per intra-op thread).
void set_threads(int threads);

/// Which BLAS library this process has loaded (a path), or "" if none yet.
std::string loaded_blas();

/// Warns once if LibTorch runs on the reference BLAS (about 40x slower).
void check_blas();

} // namespace salamander::apps
