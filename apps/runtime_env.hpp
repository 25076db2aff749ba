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

/// SIGINT and SIGTERM, read on a thread of the caller's: the handler only
/// writes the signal's number to a pipe (threads that OpenBLAS starts
/// before main() would take a blocked signal's default action; a handler
/// runs on any of them). next_stop_signal() blocks for the next one and
/// returns 0 once end_stop_watch() was called (which restores the defaults).
void watch_stop_signals();
int next_stop_signal();
void end_stop_watch();

} // namespace salamander::apps
