#include "actors/node/tls.hpp"

#include "actors/logging.hpp"

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace salamander::actors {

tls_options tls_from(const std::string& flag) {
  tls_options out;
  if (flag == "none") {
    return out;
  }
  if (!flag.empty()) {
    out.dir = flag;
  } else if (const char* env = std::getenv("SALAMANDER_TLS"); env && *env && std::string{env} != "none") {
    out.dir = env;
  }
  while (out.dir.size() > 1 && out.dir.back() == '/') {
    out.dir.pop_back();
  }
  if (const char* env = std::getenv("SALAMANDER_TLS_HANDSHAKE_S"); env && *env) {
    char* end = nullptr;
    double s = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(s > 0 && s <= 3600)) {
      throw std::invalid_argument("SALAMANDER_TLS_HANDSHAKE_S=" + std::string{env} +
                                  ": seconds in (0, 3600]");
    }
    out.handshake_timeout = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  }
  return out;
}

namespace {

template <class T, void (*Free)(T*)>
struct openssl_deleter {
  void operator()(T* x) const {
    Free(x);
  }
};
using x509_ptr = std::unique_ptr<X509, openssl_deleter<X509, X509_free>>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, openssl_deleter<EVP_PKEY, EVP_PKEY_free>>;
using store_ptr = std::unique_ptr<X509_STORE, openssl_deleter<X509_STORE, X509_STORE_free>>;
using store_ctx_ptr =
    std::unique_ptr<X509_STORE_CTX, openssl_deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;

x509_ptr read_cert(const std::string& path) {
  x509_ptr out;
  if (auto* f = std::fopen(path.c_str(), "r")) {
    out.reset(PEM_read_X509(f, nullptr, nullptr, nullptr));
    std::fclose(f);
  }
  return out;
}

// Never prompts: a key that needs a passphrase reads as no key.
int no_passphrase(char*, int, int, void*) {
  return 0;
}

pkey_ptr read_key(const std::string& path) {
  pkey_ptr out;
  if (auto* f = std::fopen(path.c_str(), "r")) {
    out.reset(PEM_read_PrivateKey(f, nullptr, no_passphrase, nullptr));
    std::fclose(f);
  }
  return out;
}

bool readable(const std::string& path) {
  if (auto* f = std::fopen(path.c_str(), "r")) {
    std::fclose(f);
    return true;
  }
  return false;
}

} // namespace

std::string check_tls(const tls_options& opts) {
  const std::string hint = " (deploy/make-certs.sh makes DIR/ca.pem, cert.pem and key.pem)";
  for (const auto& f : {opts.ca_file(), opts.cert_file(), opts.key_file()}) {
    if (!readable(f)) {
      return "--tls " + opts.dir + ": cannot read " + f + hint;
    }
  }
  auto ca = read_cert(opts.ca_file());
  if (!ca) {
    return opts.ca_file() + " holds no PEM certificate";
  }
  auto cert = read_cert(opts.cert_file());
  if (!cert) {
    return opts.cert_file() + " holds no PEM certificate";
  }
  auto key = read_key(opts.key_file());
  if (!key) {
    ERR_clear_error();
    return opts.key_file() +
           " holds no unencrypted PEM private key (keys with a passphrase are not "
           "supported: a device restarts unattended)";
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return opts.key_file() + " is not the key of " + opts.cert_file();
  }
  store_ptr store{X509_STORE_new()};
  store_ctx_ptr ctx{X509_STORE_CTX_new()};
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca.get()) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr) != 1) {
    ERR_clear_error();
    return "cannot set up certificate verification (OpenSSL)";
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    auto err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return opts.cert_file() + " does not verify against " + opts.ca_file() + ": " +
           X509_verify_cert_error_string(err);
  }
  return {};
}

tls_options checked_tls(const std::string& flag) {
  auto out = tls_from(flag);
  if (out.enabled()) {
    if (auto what = check_tls(out); !what.empty()) {
      throw std::invalid_argument(what);
    }
  }
  return out;
}

std::string tls_name(const tls_options& opts) {
  auto cert = read_cert(opts.cert_file());
  if (!cert) {
    return {};
  }
  char buf[256] = {};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, buf,
                                sizeof(buf)) < 0) {
    return {};
  }
  return buf;
}

// ---- watching handshakes ----------------------------------------------------
//
// CAF's module makes its SSL objects itself and logs failures only through
// CAF's own logger (compiled out in Debian's build), and it has no bound on
// how long a handshake may take. salamander interposes libssl entry points
// (the executable's definitions come before libssl's in the dynamic lookup)
// to attach a verify and an info callback to each SSL object, log refusals
// with the peer's address, and cut a peer whose handshake is not done in
// time.
//
// It also fixes a CAF 0.17 bug that makes TLS unusable with more than one
// peer: OpenSSL reports errors through a per-thread queue that must be empty
// before each SSL_read/SSL_write/SSL_connect/SSL_accept (SSL_get_error reads
// it first), and CAF never empties it. One failed connection (a console that
// exits, a refused peer) left its error in the network thread's queue, and
// the next SSL_read on every other link reported it as its own failure:
// every link of the process dropped at once. The interposers of those four
// calls empty the queue first, as OpenSSL's documentation asks.

namespace {

using clock = std::chrono::steady_clock;

struct watched {
  int fd = -1;
  ino_t inode = 0;
  std::string peer;
  clock::time_point deadline;
  bool done = false;     ///< handshake finished
  bool reported = false; ///< a refusal was logged for it (log once)
  const char* dir = "with"; ///< "from" (we accepted) or "to" (we dialled), once known
};

struct watch_state {
  std::mutex mtx;
  std::condition_variable cv;
  std::unordered_map<const SSL*, watched> ssls;
  std::atomic<bool> active{false};
  std::chrono::milliseconds timeout{10000};
  std::atomic<size_t> refusals{0};
  bool thread_started = false;
};

// Never destroyed: SSL objects are freed by CAF's network thread as late as
// the actor system's destructor.
watch_state& watch() {
  static auto* s = new watch_state;
  return *s;
}

std::string peer_of(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return "an unknown peer";
  }
  char host[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* in = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
    port = ntohs(in->sin6_port);
  }
  return std::string{host} + ":" + std::to_string(port);
}

const char* role(const SSL* ssl) {
  return SSL_is_server(const_cast<SSL*>(ssl)) ? "from" : "to";
}

// Marks `ssl` reported; false when it already was (or is not watched). A
// refusal can come after the handshake is done on this side (TLS 1.3: the
// server checks the client's certificate after the client has finished).
bool report_once(const SSL* ssl, std::string& peer, bool even_if_done = false) {
  auto& w = watch();
  std::lock_guard<std::mutex> guard{w.mtx};
  auto i = w.ssls.find(ssl);
  if (i == w.ssls.end() || i->second.reported || (i->second.done && !even_if_done)) {
    return false;
  }
  i->second.reported = true;
  peer = i->second.peer;
  w.refusals++;
  return true;
}

std::string last_ssl_error() {
  auto code = ERR_peek_last_error();
  if (code == 0) {
    return "connection closed";
  }
  const char* reason = ERR_reason_error_string(code);
  return reason ? reason : "error " + std::to_string(code);
}

// Reasons a peer that does not speak TLS causes.
bool looks_plaintext(const std::string& reason) {
  for (const char* s : {"wrong version number", "packet length too long", "http request",
                        "record layer failure", "unexpected eof", "connection closed",
                        "record too long"}) {
    if (reason.find(s) != std::string::npos) {
      return true;
    }
  }
  return false;
}

int on_verify(int ok, X509_STORE_CTX* ctx) {
  if (ok) {
    return ok;
  }
  auto* ssl = static_cast<SSL*>(
      X509_STORE_CTX_get_ex_data(ctx, SSL_get_ex_data_X509_STORE_CTX_idx()));
  std::string peer;
  if (ssl && report_once(ssl, peer)) {
    // the peer's own certificate, not the chain element that failed
    char subject[256] = "?", issuer[256] = "?";
    if (auto* cert = X509_STORE_CTX_get0_cert(ctx)) {
      X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof(subject));
      X509_NAME_oneline(X509_get_issuer_name(cert), issuer, sizeof(issuer));
    }
    subsystem_log("cluster")->warn(
        "TLS: refused the connection {} {}: its certificate ({}, issued by {}) does not "
        "verify: {} (not signed by this cluster's CA?)",
        role(ssl), peer, subject, issuer,
        X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
  }
  return ok;
}

void on_info(const SSL* ssl, int where, int ret) {
  if (where & SSL_CB_HANDSHAKE_START) {
    auto& w = watch();
    std::lock_guard<std::mutex> guard{w.mtx};
    if (auto i = w.ssls.find(ssl); i != w.ssls.end()) {
      i->second.dir = role(ssl);
    }
  }
  if (where & SSL_CB_HANDSHAKE_DONE) {
    auto& w = watch();
    std::string peer;
    {
      std::lock_guard<std::mutex> guard{w.mtx};
      if (auto i = w.ssls.find(ssl); i != w.ssls.end()) {
        i->second.done = true;
        peer = i->second.peer;
      }
    }
    subsystem_log("cluster")->debug("TLS: link {} {} up ({}, {})", role(ssl), peer,
                                    SSL_get_version(ssl),
                                    SSL_CIPHER_get_name(SSL_get_current_cipher(ssl)));
    return;
  }
  std::string peer;
  if ((where & SSL_CB_ALERT) && (where & SSL_CB_READ) && (ret >> 8) == SSL3_AL_FATAL) {
    if (report_once(ssl, peer, true)) {
      subsystem_log("cluster")->warn(
          "TLS: {} refused this process: {} (is this process's certificate signed by the "
          "cluster's CA?)",
          peer, SSL_alert_desc_string_long(ret));
    }
    return;
  }
  if ((where & SSL_CB_EXIT) && ret <= 0 && SSL_want(ssl) == SSL_NOTHING) {
    auto reason = last_ssl_error();
    if (report_once(ssl, peer)) {
      subsystem_log("cluster")->warn(
          "TLS: handshake {} {} failed: {}{}", role(ssl), peer, reason,
          looks_plaintext(reason) ? " (the peer does not speak TLS: started without --tls?)"
                                  : "");
    }
  }
}

// Cuts handshakes that are not done by their deadline.
void watchdog() {
  auto& w = watch();
  std::unique_lock<std::mutex> lock{w.mtx};
  for (;;) {
    auto next = clock::time_point::max();
    auto now = clock::now();
    for (auto& [ssl, e] : w.ssls) {
      static_cast<void>(ssl);
      if (e.done || e.reported) {
        continue;
      }
      if (e.deadline <= now) {
        struct stat st {};
        // the same socket still (not a descriptor reused after a close)
        if (::fstat(e.fd, &st) == 0 && st.st_ino == e.inode) {
          ::shutdown(e.fd, SHUT_RDWR);
        }
        e.reported = true;
        w.refusals++;
        subsystem_log("cluster")->warn(
            "TLS: the connection {} {} did not finish its handshake within {:.1f} s: cut "
            "off (a silent or plaintext peer?)",
            e.dir, e.peer, std::chrono::duration<double>(w.timeout).count());
      } else {
        next = std::min(next, e.deadline);
      }
    }
    if (next == clock::time_point::max()) {
      w.cv.wait(lock);
    } else {
      w.cv.wait_until(lock, next);
    }
  }
}

template <class Fn>
Fn real(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

} // namespace

void configure_tls(caf::actor_system_config& cfg, const tls_options& opts) {
  if (!opts.enabled()) {
    return;
  }
  subsystem_log("cluster")->info("TLS: this process is {} (certificate from {}); every peer "
                                 "must present a certificate of the same CA",
                                 tls_name(opts), opts.dir);
  cfg.openssl_certificate = opts.cert_file();
  cfg.openssl_key = opts.key_file();
  cfg.openssl_cafile = opts.ca_file();
  cfg.load<caf::openssl::manager>();
  auto& w = watch();
  std::lock_guard<std::mutex> guard{w.mtx};
  w.timeout = opts.handshake_timeout;
  w.active = true;
  if (!w.thread_started) {
    std::thread{watchdog}.detach();
    w.thread_started = true;
  }
  if (::dlsym(RTLD_DEFAULT, "SSL_new") != reinterpret_cast<void*>(&SSL_new)) {
    subsystem_log("cluster")->warn("TLS: refused handshakes will not be logged and slow ones "
                                   "not cut (libssl's SSL_new is not interposed)");
  }
}

size_t tls_refusals() {
  return watch().refusals.load();
}

} // namespace salamander::actors

// ---- the interposed libssl entry points --------------------------------------

extern "C" {

SSL* SSL_new(SSL_CTX* ctx) {
  using fn = SSL* (*)(SSL_CTX*);
  static const auto next = salamander::actors::real<fn>("SSL_new");
  SSL* ssl = next(ctx);
  if (ssl && salamander::actors::watch().active) {
    SSL_set_verify(ssl, SSL_get_verify_mode(ssl), salamander::actors::on_verify);
    SSL_set_info_callback(ssl, salamander::actors::on_info);
  }
  return ssl;
}

int SSL_set_fd(SSL* ssl, int fd) {
  using fn = int (*)(SSL*, int);
  static const auto next = salamander::actors::real<fn>("SSL_set_fd");
  int ok = next(ssl, fd);
  auto& w = salamander::actors::watch();
  if (ok == 1 && w.active) {
    salamander::actors::watched e;
    e.fd = fd;
    struct stat st {};
    if (::fstat(fd, &st) == 0) {
      e.inode = st.st_ino;
    }
    e.peer = salamander::actors::peer_of(fd);
    std::lock_guard<std::mutex> guard{w.mtx};
    e.deadline = salamander::actors::clock::now() + w.timeout;
    w.ssls[ssl] = std::move(e);
    w.cv.notify_one();
  }
  return ok;
}

// The four I/O calls: the caller's thread's error queue emptied first.
int SSL_read(SSL* ssl, void* buf, int num) {
  using fn = int (*)(SSL*, void*, int);
  static const auto next = salamander::actors::real<fn>("SSL_read");
  ERR_clear_error();
  return next(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  using fn = int (*)(SSL*, const void*, int);
  static const auto next = salamander::actors::real<fn>("SSL_write");
  ERR_clear_error();
  return next(ssl, buf, num);
}

int SSL_connect(SSL* ssl) {
  using fn = int (*)(SSL*);
  static const auto next = salamander::actors::real<fn>("SSL_connect");
  ERR_clear_error();
  return next(ssl);
}

int SSL_accept(SSL* ssl) {
  using fn = int (*)(SSL*);
  static const auto next = salamander::actors::real<fn>("SSL_accept");
  ERR_clear_error();
  return next(ssl);
}

void SSL_free(SSL* ssl) {
  using fn = void (*)(SSL*);
  static const auto next = salamander::actors::real<fn>("SSL_free");
  auto& w = salamander::actors::watch();
  if (ssl && w.active) {
    std::string peer;
    bool silent = false;
    {
      std::lock_guard<std::mutex> guard{w.mtx};
      if (auto i = w.ssls.find(ssl); i != w.ssls.end()) {
        silent = !i->second.done && !i->second.reported;
        peer = i->second.peer;
        if (silent) {
          w.refusals++;
        }
        w.ssls.erase(i);
      }
    }
    if (silent) {
      salamander::actors::subsystem_log("cluster")->warn(
          "TLS: the connection {} {} closed before its TLS handshake (a plaintext peer?)",
          salamander::actors::role(ssl), peer);
    }
  }
  next(ssl);
}

} // extern "C"
