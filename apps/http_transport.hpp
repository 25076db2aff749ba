// The HTTP transport under `salamander serve`: cpp-httplib's request
// parsing over a connection loop of our own that bounds what one client may
// cost (time, rate, bytes, connections; README: "Hostile network input"),
// and HTTPS (TLS 1.2+) under the same bounds. It knows no routes: the
// protocol on top (http_front: KServe v2 and /metrics) adds its handlers to
// handlers() and words the refusals it cannot word itself.
#pragma once

#include "apps/front_options.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
struct Response;
} // namespace httplib

namespace salamander::apps {

// httplib 0.11 alone lets a client hold a handling thread for as long as it
// sends a byte every few seconds (its read timeout is per read), queues
// every connection it accepts, and reads a chunked body, or a POST without
// Content-Length, into memory without any limit. The server here keeps
// httplib's request parsing and replaces only the connection loop: a
// request must arrive within `grace` plus one second per `min_rate` bytes
// and never in more than `longest`; it may not exceed its byte budget; and
// past `connections_per_thread` connections per handling thread a new one is
// answered 503 at once instead of waiting in an unbounded queue.
struct http_limits {
  std::chrono::milliseconds first{2000};    ///< for a new connection's first request
  std::chrono::milliseconds idle{5000};     ///< for a kept-alive connection's next one
  std::chrono::milliseconds read{5000};     ///< between two packets of a request
  std::chrono::milliseconds write{5000};    ///< for the client to take the answer
  std::chrono::milliseconds grace{10000};   ///< a request's time before the rate rule
  double min_rate = 64 * 1024;              ///< bytes/s a request must keep after grace
  std::chrono::milliseconds longest{60000}; ///< no request takes longer to arrive
  size_t header_bytes = 64 * 1024;          ///< request line and headers
  size_t connections_per_thread = 4;        ///< handled + waiting, per handling thread
  size_t requests_per_connection = 1000;    ///< then a kept-alive connection closes
};

/// Why the bounded stream stopped reading a request.
enum class refusal { none, too_large, too_slow, over_budget };

/// The refusal of the request this thread is handling (for the error
/// handler, which runs on the same thread).
refusal refusal_of_request();

struct http_transport_options : front_options {
  bool https() const { return tls(); }
  /// POSTs to paths that start with one of these carry no body of note
  /// (Triton's repository calls, which `curl -X POST` sends without a
  /// length): without a length they are read as empty, and the connection
  /// closes after the answer, so bytes after the header are never read as
  /// the next request.
  std::vector<std::string> bodiless_posts;
};

class guarded_server;

/// The bounded server. A body is refused before it is read: one over
/// max_body_bytes gets status 413 (the protocol's error handler words it),
/// a POST whose length is not announced goes to `refuse(res, 411, why)`
/// (but see bodiless_posts); the connection then closes, the body unread.
class http_server {
public:
  using refuse_fn =
      std::function<void(httplib::Response&, int status, const std::string& why)>;

  http_server(http_transport_options opts, refuse_fn refuse);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Where the protocol on top adds its routes and handlers (before start()).
  httplib::Server& handlers();
  const http_limits& limits() const;

  /// Binds and serves on a thread of its own; the port it bound. Throws
  /// when it cannot bind, or (HTTPS) when the certificate or key do not load.
  int start();
  void stop();

  // What it refused so far (Prometheus counters).
  int64_t connections_turned_away() const; ///< answered 503 at once: at its cap
  int64_t too_slow() const;                ///< requests cut off: stalled, too slow
  /// TLS handshakes failed or cut off; none over plain HTTP.
  std::optional<int64_t> handshakes_refused() const;

private:
  http_transport_options opts_;
  std::unique_ptr<guarded_server> server_;
  std::thread thread_;
};

} // namespace salamander::apps
