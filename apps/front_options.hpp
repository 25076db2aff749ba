// Where and how a protocol front of `salamander serve` listens: the HTTP
// front (http_transport.hpp) and the gRPC front (grpc_front.hpp) take the
// same options, filled once from the command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace salamander::apps {

struct front_options {
  std::string host = "127.0.0.1";
  uint16_t port = 0; ///< 0: any free port
  size_t max_body_bytes = size_t{64} << 20; ///< a request (gRPC: a message) at most
  int threads = 64; ///< requests handled at once (each waits for its answer)
  /// TLS (1.2+) with this certificate and key (PEM files); empty: plaintext.
  std::string tls_cert;
  std::string tls_key;
  /// With TLS: clients must present a certificate this CA (PEM file) signed.
  std::string client_ca;

  bool tls() const { return !tls_cert.empty(); }
};

} // namespace salamander::apps
