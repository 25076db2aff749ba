// The bounded HTTP server (http_transport.hpp): httplib's request parsing,
// our connection loop, the connection cap, and HTTPS.
#include "apps/http_transport.hpp"

#include "actors/logging.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

namespace salamander::apps {

namespace {


// Why the bounded stream stopped reading a request; set on the handling
// thread, read by the error handler on the same thread.
thread_local refusal refused_as = refusal::none;
// Set while the pool runs a connection only to turn it away.
thread_local bool turning_away = false;
// Set by the pre-routing handler when the body is left unread: the
// connection cannot carry another request.
thread_local bool must_close = false;

// Waits for `events` on `sock`; false on a timeout.
bool wait_for(socket_t sock, short events, std::chrono::milliseconds timeout) {
  pollfd p{sock, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, timeout.count())));
  } while (r < 0 && errno == EINTR);
  return r > 0 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
}

// One TLS call on a non-blocking socket, retried as OpenSSL asks until it
// is done or `timeout` passes without progress: a peer that sends half a
// record cannot hold the thread. >0 done, 0 closed, -1 failed, -2 timed out.
template <class Call>
int tls_call(SSL* ssl, std::chrono::milliseconds timeout, Call call) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ERR_clear_error(); // SSL_get_error reads this thread's queue
    int n = call();
    if (n > 0) {
      return n;
    }
    int err = SSL_get_error(ssl, n);
    short events = err == SSL_ERROR_WANT_READ    ? POLLIN
                   : err == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                 : 0;
    if (events == 0) {
      return err == SSL_ERROR_ZERO_RETURN ? 0 : -1;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !wait_for(SSL_get_fd(ssl), events, left)) {
      return -2;
    }
  }
}

// A socket stream (httplib's SocketStream is not in Debian's header) that
// enforces the limits above, over TCP or (with `ssl`) TLS. Reads are
// buffered: httplib reads headers one byte at a time.
class bounded_stream : public httplib::Stream {
public:
  bounded_stream(socket_t sock, SSL* ssl, const http_limits& lim, size_t max_bytes,
                 std::atomic<int64_t>& in_flight, int64_t budget)
      : sock_(sock), ssl_(ssl), lim_(lim), max_bytes_(max_bytes), in_flight_(in_flight),
        budget_(budget), start_(std::chrono::steady_clock::now()) {}
  ~bounded_stream() override { in_flight_ -= static_cast<int64_t>(received_); }
  bounded_stream(const bounded_stream&) = delete;
  bounded_stream& operator=(const bounded_stream&) = delete;

  bool is_readable() const override {
    return (ssl_ && SSL_pending(ssl_) > 0) || wait(POLLIN, lim_.read);
  }
  bool is_writable() const override {
    return wait(POLLOUT, lim_.write);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < end_) {
      auto n = std::min(size, end_ - pos_);
      std::memcpy(ptr, buf_.data() + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    if (received_ >= max_bytes_) {
      refused_as = refusal::too_large;
      return -1;
    }
    auto now = std::chrono::steady_clock::now();
    auto earned = std::chrono::milliseconds(
        static_cast<int64_t>(1000.0 * static_cast<double>(received_) / lim_.min_rate));
    auto deadline = start_ + std::min(lim_.grace + earned, lim_.longest);
    if (now >= deadline) {
      refused_as = refusal::too_slow;
      return -1;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    auto patience = std::min(lim_.read, left + std::chrono::milliseconds(1));
    auto want = std::min(buf_.size(), max_bytes_ - received_);
    ssize_t n;
    if (ssl_) {
      n = tls_call(ssl_, patience, [&] {
        return SSL_read(ssl_, buf_.data(), static_cast<int>(want));
      });
      if (n == -2) {
        refused_as = refusal::too_slow;
        return -1;
      }
    } else {
      if (!wait(POLLIN, patience)) {
        refused_as = refusal::too_slow; // nothing for `read`, or past the deadline
        return -1;
      }
      do {
        n = ::recv(sock_, buf_.data(), want, 0);
      } while (n < 0 && errno == EINTR);
    }
    if (n <= 0) {
      return n < 0 ? -1 : 0;
    }
    received_ += static_cast<size_t>(n);
    if ((in_flight_ += n) > budget_) {
      refused_as = refusal::over_budget;
      return -1;
    }
    pos_ = 0;
    end_ = static_cast<size_t>(n);
    return read(ptr, size);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (ssl_) {
      if (size == 0) {
        return 0;
      }
      int n = tls_call(ssl_, lim_.write, [&] {
        return SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
      });
      return n > 0 ? n : -1;
    }
    if (!is_writable()) {
      return -1;
    }
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(::getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

private:
  bool wait(short events, std::chrono::milliseconds timeout) const {
    return wait_for(sock_, events, timeout);
  }
  template <class Getter>
  void address(Getter get, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    char host[NI_MAXHOST] = "";
    char serv[NI_MAXSERV] = "";
    if (get(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        ::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv,
                      sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host;
      port = std::atoi(serv);
    }
  }

  socket_t sock_;
  SSL* ssl_; ///< null: plain TCP
  const http_limits& lim_;
  size_t max_bytes_;
  std::atomic<int64_t>& in_flight_;
  int64_t budget_;
  std::chrono::steady_clock::time_point start_;
  size_t received_ = 0;
  std::array<char, 4096> buf_{};
  size_t pos_ = 0;
  size_t end_ = 0;
};

std::string peer_of(socket_t sock) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  char host[NI_MAXHOST] = "?";
  char serv[NI_MAXSERV] = "?";
  if (::getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    ::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv,
                  sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV);
  }
  return std::string{host} + ":" + serv;
}

// At most a few refusal lines a second: a flood of bad handshakes must not
// become a flood of log lines (the metric counts them all).
bool may_log_refusal() {
  static std::mutex m;
  static auto second = std::chrono::steady_clock::time_point{};
  static int lines = 0;
  std::lock_guard<std::mutex> lock(m);
  auto now = std::chrono::steady_clock::now();
  if (now - second >= std::chrono::seconds(1)) {
    second = now;
    lines = 0;
  }
  return ++lines <= 5;
}

using ssl_ctx_ptr = std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)>;

// The server side of HTTPS, made once: TLS 1.2 or later, the certificate
// and key of the process's --tls material, and optionally a CA whose
// certificate every client must present.
ssl_ctx_ptr make_server_ctx(const http_transport_options& o) {
  auto fail = [](const std::string& what) {
    std::string reason;
    if (auto code = ERR_peek_last_error(); code != 0) {
      const char* r = ERR_reason_error_string(code);
      reason = std::string{": "} + (r ? r : "OpenSSL error " + std::to_string(code));
    }
    ERR_clear_error();
    return std::runtime_error("HTTPS: " + what + reason);
  };
  ERR_clear_error();
  ssl_ctx_ptr ctx{SSL_CTX_new(TLS_server_method()), &SSL_CTX_free};
  if (!ctx) {
    throw fail("cannot make a TLS context");
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // renegotiation is a client's way to make the server compute for free
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), o.tls_cert.c_str()) != 1) {
    throw fail("cannot use the certificate " + o.tls_cert);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), o.tls_key.c_str(), SSL_FILETYPE_PEM) != 1) {
    throw fail("cannot use the key " + o.tls_key);
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    throw fail(o.tls_key + " is not the key of " + o.tls_cert);
  }
  if (!o.client_ca.empty()) {
    auto* names = SSL_load_client_CA_file(o.client_ca.c_str());
    if (!names || SSL_CTX_load_verify_locations(ctx.get(), o.client_ca.c_str(), nullptr) != 1) {
      if (names) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
      }
      throw fail("--https-client-ca " + o.client_ca + " holds no PEM CA certificate");
    }
    SSL_CTX_set_client_CA_list(ctx.get(), names); // named to clients in the handshake
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       nullptr);
  }
  return ctx;
}

// httplib's thread pool with a bound on the connections it holds (handled
// and waiting): past it, the accepting thread answers 503 itself.
class bounded_pool : public httplib::TaskQueue {
public:
  bounded_pool(size_t threads, size_t max_connections) : max_(max_connections) {
    for (size_t i = 0; i < threads; ++i) {
      workers_.emplace_back([this] { work(); });
    }
  }
  ~bounded_pool() override { shutdown(); }
  bounded_pool(const bounded_pool&) = delete;
  bounded_pool& operator=(const bounded_pool&) = delete;

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (jobs_.size() + busy_ < max_) {
        jobs_.push_back(std::move(fn));
        ready_.notify_one();
        return;
      }
    }
    turning_away = true;
    fn();
    turning_away = false;
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) {
        return;
      }
      stopping_ = true;
    }
    ready_.notify_all();
    for (auto& t : workers_) {
      t.join();
    }
  }

private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) {
          return; // stopping, and nothing left: connections still queued run first
        }
        fn = std::move(jobs_.front());
        jobs_.pop_front();
        ++busy_;
      }
      fn();
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_;
    }
  }

  size_t max_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  size_t busy_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

} // namespace

// httplib's connection loop (keep-alive, one request after another) over a
// bounded stream; a connection the pool turns away gets a 503 and is closed.
// (process_and_close_socket is private in httplib::Server but virtual, and
// process_request protected: this is the seam httplib's SSLServer uses; its
// own SSLServer cannot be reused, its override being private.)
//
// Over HTTPS the same loop runs over TLS: the first byte must come within
// `first`, the handshake must be done within `read` of it (a plaintext
// client is answered 400 in plaintext, other failures are logged and
// closed), and a turned-away connection gets its 503 from a thread of its
// own (a handshake takes a round trip the accepting thread cannot wait for).
class guarded_server : public httplib::Server {
public:
  http_limits limits;
  size_t max_request_bytes = 0; ///< headers + the largest body
  int64_t budget = 0;           ///< request bytes held at once, all connections
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> turned_away{0};
  std::atomic<int64_t> too_slow{0};
  std::atomic<int64_t> handshakes_refused{0};
  ssl_ctx_ptr tls{nullptr, &SSL_CTX_free}; ///< null: plain HTTP

  ~guarded_server() override { stop_refuser(); }
  guarded_server() = default;
  guarded_server(const guarded_server&) = delete;
  guarded_server& operator=(const guarded_server&) = delete;

  void start_refuser() {
    refuser_ = std::thread([this] { refuse_loop(); });
  }
  void stop_refuser() {
    {
      std::lock_guard<std::mutex> lock(refuse_mutex_);
      refuse_stopping_ = true;
    }
    refuse_ready_.notify_all();
    if (refuser_.joinable()) {
      refuser_.join();
    }
    for (auto sock : refuse_queue_) {
      ::close(sock);
    }
    refuse_queue_.clear();
  }

  /// httplib listens with a backlog of 5: a burst of connections has its
  /// SYNs dropped and retried after 1, 3, 7 s. Listening again on the bound
  /// socket raises it (Linux takes a second listen() as an update).
  void widen_backlog(int n) { ::listen(svr_sock_, n); }

private:
  static const std::string& busy_answer() {
    static const std::string body = R"({"error": "too many connections; try again"})";
    static const std::string text =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    return text;
  }

  bool process_and_close_socket(socket_t sock) override {
    // httplib writes an answer's headers and body in two writes: with
    // Nagle's algorithm the body waits for the client's delayed ACK of the
    // headers (40 ms on Linux) on every kept-alive request
    int yes = 1;
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    if (turning_away) {
      ++turned_away;
      if (tls) {
        hand_to_refuser(sock);
        return false;
      }
      auto& text = busy_answer();
      // never blocks the accepting thread: the socket's buffer is empty
      (void)::send(sock, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      close_gently(sock);
      return false;
    }
    if (!tls) {
      bool ret = serve_connection(sock, nullptr);
      close_gently(sock);
      return ret;
    }
    bool ret = false;
    if (SSL* ssl = handshake(sock, limits.first, limits.read)) {
      ret = serve_connection(sock, ssl);
      ERR_clear_error();
      SSL_shutdown(ssl); // close_notify, not waiting for the client's
      SSL_free(ssl);
    }
    close_gently(sock);
    return ret;
  }

  // A TLS session over `sock` (made non-blocking), or null when the client
  // sent nothing within `first`, did not finish the handshake within
  // `patience` of its first byte, or failed it: logged, counted, the socket
  // left to close.
  SSL* handshake(socket_t sock, std::chrono::milliseconds first,
                 std::chrono::milliseconds patience) {
    if (!wait_for(sock, POLLIN, first)) {
      ++too_slow;
      return nullptr;
    }
    int flags = ::fcntl(sock, F_GETFL, 0);
    ::fcntl(sock, F_SETFL, flags | O_NONBLOCK);
    SSL* ssl = SSL_new(tls.get());
    BIO* bio = ssl ? BIO_new_socket(sock, BIO_NOCLOSE) : nullptr;
    if (!bio) {
      SSL_free(ssl);
      ERR_clear_error();
      return nullptr;
    }
    // not a cluster link: salamander's libssl interposer (actors/node/tls.cpp)
    // watches those through SSL_set_fd and these callbacks; this one is
    // bounded and logged here
    SSL_set_info_callback(ssl, nullptr);
    SSL_set_verify(ssl, SSL_get_verify_mode(ssl), nullptr);
    SSL_set_bio(ssl, bio, bio);
    int r = tls_call(ssl, patience, [ssl] { return SSL_accept(ssl); });
    if (r > 0) {
      return ssl;
    }
    ++handshakes_refused;
    auto code = ERR_peek_last_error();
    std::string why;
    if (r == -2) {
      why = fmt::format("no TLS handshake within {} s (a silent client?)",
                        patience.count() / 1000.0);
    } else if (ERR_GET_REASON(code) == SSL_R_HTTP_REQUEST) {
      why = "a plaintext HTTP request (answered 400: use https://)";
      static const std::string body =
          R"x({"error": "this port speaks HTTPS: use https:// (curl --cacert CA.pem https://...)"})x";
      auto text = "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                  "Connection: close\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body;
      (void)::send(sock, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    } else if (auto v = SSL_get_verify_result(ssl); v != X509_V_OK) {
      why = std::string{"its certificate does not verify: "} +
            X509_verify_cert_error_string(v);
    } else if (code != 0) {
      const char* reason = ERR_reason_error_string(code);
      why = reason ? reason : "OpenSSL error " + std::to_string(code);
    } else {
      why = "closed during the handshake";
    }
    ERR_clear_error();
    if (may_log_refusal()) {
      actors::subsystem_log("serve")->warn("HTTPS: refused the connection from {}: {}", peer_of(sock), why);
    }
    SSL_free(ssl);
    return nullptr;
  }

  bool serve_connection(socket_t sock, SSL* ssl) {
    bool ret = false;
    for (auto count = keep_alive_max_count_; svr_sock_ != INVALID_SOCKET && count > 0;
         --count) {
      // a silent connection holds a handling thread for `first` at most
      auto wait = count == keep_alive_max_count_ ? limits.first : limits.idle;
      if (!(ssl && SSL_pending(ssl) > 0) && !wait_for(sock, POLLIN, wait)) {
        break;
      }
      bounded_stream strm(sock, ssl, limits, max_request_bytes, in_flight, budget);
      refused_as = refusal::none;
      must_close = false;
      bool closed = false;
      ret = process_request(strm, count == 1, closed, nullptr);
      if (refused_as == refusal::too_slow) {
        ++too_slow;
      }
      if (!ret || closed || must_close || refused_as != refusal::none) {
        break;
      }
    }
    return ret;
  }

  // HTTPS connections past the bound wait here for their 503, one at a
  // time, each for a second at most; past `refuse_queue_max` waiting they
  // are closed at once (a flood costs a bounded queue, not the accepting
  // thread).
  static constexpr size_t refuse_queue_max = 64;

  void hand_to_refuser(socket_t sock) {
    {
      std::lock_guard<std::mutex> lock(refuse_mutex_);
      if (!refuse_stopping_ && refuse_queue_.size() < refuse_queue_max) {
        refuse_queue_.push_back(sock);
        refuse_ready_.notify_one();
        return;
      }
    }
    close_gently(sock);
  }

  void refuse_loop() {
    for (;;) {
      socket_t sock;
      {
        std::unique_lock<std::mutex> lock(refuse_mutex_);
        refuse_ready_.wait(lock, [this] { return refuse_stopping_ || !refuse_queue_.empty(); });
        if (refuse_stopping_) {
          return;
        }
        sock = refuse_queue_.front();
        refuse_queue_.pop_front();
      }
      auto second = std::chrono::milliseconds(1000);
      if (SSL* ssl = handshake(sock, second, second)) {
        auto& text = busy_answer();
        tls_call(ssl, std::chrono::milliseconds(1000), [&] {
          return SSL_write(ssl, text.data(), static_cast<int>(text.size()));
        });
        ERR_clear_error();
        SSL_shutdown(ssl);
        SSL_free(ssl);
      }
      close_gently(sock);
    }
  }

  // Reads what is already there before closing, so that the answer is not
  // lost to a reset (unread data at close makes the kernel send RST).
  static void close_gently(socket_t sock) {
    ::shutdown(sock, SHUT_WR);
    char sink[4096];
    for (int i = 0; i < 16 && ::recv(sock, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
    }
    ::close(sock);
  }

  std::thread refuser_;
  std::mutex refuse_mutex_;
  std::condition_variable refuse_ready_;
  std::deque<socket_t> refuse_queue_;
  bool refuse_stopping_ = false;
};

refusal refusal_of_request() {
  return refused_as;
}

http_server::http_server(http_transport_options opts, refuse_fn refuse)
    : opts_(std::move(opts)), server_(std::make_unique<guarded_server>()) {
  auto threads = static_cast<size_t>(std::max(1, opts_.threads));
  auto& server = *server_;
  auto& lim = server.limits;
  auto max_connections = threads * lim.connections_per_thread;
  server.new_task_queue = [threads, max_connections] {
    return new bounded_pool(threads, max_connections);
  };
  server.set_payload_max_length(opts_.max_body_bytes);
  server.max_request_bytes = opts_.max_body_bytes + lim.header_bytes;
  server.budget = static_cast<int64_t>(std::max(4 * server.max_request_bytes, size_t{64} << 20));
  // httplib sets these on each accepted socket (SO_RCVTIMEO, SO_SNDTIMEO)
  // and announces the keep-alive timeout; the bounded stream enforces them
  server.set_keep_alive_timeout(lim.idle.count() / 1000);
  // httplib closes a kept-alive connection after 5 requests; clients keep
  // one open for thousands (as nginx's default, 1000)
  server.set_keep_alive_max_count(lim.requests_per_connection);
  server.set_read_timeout(lim.read);
  server.set_write_timeout(lim.write);
  // A body is refused before it is read: one over the limit (413), one
  // whose length is not announced (411; a chunked body is counted as it
  // arrives). The connection then closes, the body unread.
  auto too_large = [max = opts_.max_body_bytes](const httplib::Request& req) {
    return req.has_header("Content-Length") &&
           req.get_header_value<uint64_t>("Content-Length") > max;
  };
  server.set_expect_100_continue_handler(
      [too_large](const httplib::Request& req, httplib::Response& res) {
        if (too_large(req)) {
          must_close = true;
          res.status = 413; // httplib answers with `res` (the error handler words it)
          return 413;
        }
        return 100;
      });
  server.set_pre_routing_handler([too_large, refuse = std::move(refuse),
                                  bodiless =
                                      opts_.bodiless_posts](const httplib::Request& req,
                                                            httplib::Response& res) {
    auto chunked =
        ::strcasecmp(req.get_header_value("Transfer-Encoding").c_str(), "chunked") == 0;
    if (too_large(req)) {
      must_close = true;
      res.status = 413; // the error handler words it
      return httplib::Server::HandlerResponse::Handled;
    }
    // httplib reads the body of a POST, PUT or PATCH without a length until
    // the connection closes: the client would wait out the read timeout
    bool has_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
    if (has_body && !chunked && !req.has_header("Content-Length")) {
      must_close = true;
      auto empty =
          std::any_of(bodiless.begin(), bodiless.end(), [&](const std::string& p) {
            return req.method == "POST" && req.path.rfind(p, 0) == 0;
          });
      if (empty) {
        // RFC 9112 6.3: no length and no chunks is an empty request body
        const_cast<httplib::Request&>(req).headers.emplace("Content-Length", "0");
        return httplib::Server::HandlerResponse::Unhandled;
      }
      refuse(res, 411, "a request body needs a Content-Length (or chunked encoding)");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // httplib's default also sets SO_REUSEPORT, which lets a second server
  // bind the same port and take half the connections: only SO_REUSEADDR
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
}

http_server::~http_server() {
  stop();
}

httplib::Server& http_server::handlers() {
  return *server_;
}

const http_limits& http_server::limits() const {
  return server_->limits;
}

int http_server::start() {
  auto& o = opts_;
  auto& server = *server_;
  if (o.https() && !server.tls) {
    server.tls = make_server_ctx(o);
    server.start_refuser();
  }
  int port = o.port;
  if (port == 0) {
    port = server.bind_to_any_port(o.host);
  } else if (!server.bind_to_port(o.host, port)) {
    port = -1;
  }
  if (port < 0) {
    throw std::runtime_error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                             " (in use, or not an address of this machine)");
  }
  auto threads = static_cast<size_t>(std::max(1, o.threads));
  server.widen_backlog(static_cast<int>(threads * server.limits.connections_per_thread));
  thread_ = std::thread([&server] { server.listen_after_bind(); });
  // httplib's stop() does nothing before the loop runs: wait for it
  for (int i = 0; i < 500 && !server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return port;
}

void http_server::stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
  server_->stop_refuser();
}

int64_t http_server::connections_turned_away() const {
  return server_->turned_away.load();
}

int64_t http_server::too_slow() const {
  return server_->too_slow.load();
}

std::optional<int64_t> http_server::handshakes_refused() const {
  if (!server_->tls) {
    return std::nullopt;
  }
  return server_->handshakes_refused.load();
}

} // namespace salamander::apps
