// A closed-loop load generator for the serving benchmark: the same C++
// driving `salamander serve` over HTTP/1.1 (kept-alive connections,
// TCP_NODELAY) and over gRPC (one channel, so one connection, per stream),
// so that the two transports are compared by one client. No LibTorch and no
// gRPC in this header (bench/load.cpp is the one unit that sees gRPC).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace salamander::bench {

struct load_result {
  double rps = 0;
  double p50_s = 0;
  double p99_s = 0;
  int64_t ok = 0;
  int64_t failed = 0;
  std::string error; ///< the first failure, "" when none
};

/// `connections` threads, each on its own kept-alive connection to
/// HOST:PORT, sending `request` (a whole HTTP/1.1 request, headers and body)
/// again as soon as the last answer came, for a one-second warm-up and then
/// `seconds`. An answer counts when its status is 200.
load_result http_load(const std::string& host, int port, const std::string& request,
                      int connections, double seconds);

/// The same over gRPC: ModelInfer of `model` with one FP32 input "input" of
/// `shape` whose values are `raw` (little-endian), on `streams` channels.
load_result grpc_load(const std::string& address, const std::string& model,
                      const std::vector<int64_t>& shape, const std::string& raw, int streams,
                      double seconds);

} // namespace salamander::bench
