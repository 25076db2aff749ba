// Activation transfer between two processes on loopback: a tensor sent as a
// CAF remote message (encoded once into a Cap'n Proto frame, see
// messages/messages.hpp) against the same bytes over a raw TCP socket, in the
// same run. Each message is acknowledged before the next is sent, as a
// stage's activation is consumed before the next one matters.
// Goal: CAF at least 50% of raw TCP throughput. The same CAF messages over a
// TLS link (CAF's OpenSSL module, certificates from deploy/make-certs.sh)
// are timed in the same rounds: tls_over_plain_16mb.
#include "actors/node/network.hpp"
#include "actors/node/system.hpp"
#include "actors/node/tls.hpp"
#include "bench/benches.hpp"
#include "bench/report.hpp"
#include "messages/messages.hpp"

#include <caf/io/middleman.hpp>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace salamander::bench {

namespace {

bool read_all(int fd, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r <= 0) {
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const void* buf, size_t n) {
  auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r <= 0) {
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

int listen_any(uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::listen(fd, 1);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return fd;
}

void tcp_server(int listener) {
  int fd = ::accept(listener, nullptr, nullptr);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> buf;
  uint64_t n = 0;
  while (read_all(fd, &n, sizeof n)) {
    buf.resize(n);
    if (!read_all(fd, buf.data(), n)) {
      break;
    }
    if (!write_all(fd, &n, sizeof n)) {
      break;
    }
  }
  ::close(fd);
}

caf::behavior echo(caf::event_based_actor*) {
  return {[](echo_atom, const tensor_payload& t) { return static_cast<int64_t>(t.tensor.numel()); }};
}

[[noreturn]] void child(int report_fd, const std::string& tls_dir) {
  uint16_t tcp_port = 0;
  int listener = listen_any(tcp_port);
  std::thread tcp(tcp_server, listener);
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto e = sys.spawn(echo);
  auto caf_port = sys.middleman().publish(e, 0, "127.0.0.1");
  caf::actor_system_config tls_cfg;
  actors::configure(tls_cfg);
  actors::configure_tls(tls_cfg, actors::checked_tls(tls_dir));
  caf::actor_system tls_sys{tls_cfg};
  auto tls_e = tls_sys.spawn(echo);
  auto tls_port = actors::publish(tls_e, 0, "127.0.0.1");
  uint16_t ports[3] = {tcp_port, caf_port ? *caf_port : uint16_t{0},
                       tls_port ? *tls_port : uint16_t{0}};
  write_all(report_fd, ports, sizeof ports);
  ::close(report_fd);
  tcp.join();
  // The parent kills us when done; wait for that.
  for (;;) {
    ::pause();
  }
}

} // namespace

int transfer(const bench_args& args) {
  bench_certs certs({"server", "client"});
  int fds[2];
  if (::pipe(fds) != 0) {
    throw std::runtime_error("pipe failed");
  }
  pid_t pid = ::fork(); // before any actor system or thread pool exists here
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1], certs.of("server"));
  }
  ::close(fds[1]);
  uint16_t ports[3] = {0, 0, 0};
  read_all(fds[0], ports, sizeof ports);
  ::close(fds[0]);
  struct reaper {
    pid_t pid;
    ~reaper() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reap{pid};

  int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(ports[0]);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(tcp, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::runtime_error("cannot connect to the TCP echo server");
  }
  int one = 1;
  ::setsockopt(tcp, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto peer = sys.middleman().remote_actor("127.0.0.1", ports[1]);
  if (!peer) {
    throw std::runtime_error("cannot reach the CAF echo actor: " + sys.render(peer.error()));
  }
  caf::actor_system_config tls_cfg;
  actors::configure(tls_cfg);
  actors::configure_tls(tls_cfg, actors::checked_tls(certs.of("client")));
  caf::actor_system tls_sys{tls_cfg};
  auto tls_peer = actors::remote_actor(tls_sys, "127.0.0.1", ports[2]);
  if (!tls_peer) {
    throw std::runtime_error("cannot reach the CAF echo actor over TLS: " +
                             tls_sys.render(tls_peer.error()));
  }
  report rep("transfer");
  rep.detail("emulation", "two processes on one host, loopback TCP");
  double headline = 0, tls_headline = 0;
  caf::scoped_actor self{sys};
  caf::scoped_actor tls_self{tls_sys};
  // `reps` echoes of `t` through `peer`; seconds
  auto echo_caf = [](caf::scoped_actor& from, const caf::actor& to, const torch::Tensor& t,
                     int reps) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) {
      bool ok = false;
      from->request(to, std::chrono::seconds(30), echo_atom_v, tensor_payload{t})
          .receive([&](int64_t n) { ok = n == t.numel(); }, [&](caf::error&) {});
      if (!ok) {
        throw std::runtime_error("CAF echo failed");
      }
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (int64_t mb : {1, 4, 16}) {
    auto t = torch::randn({mb * 1024 * 1024 / 4});
    int reps = args.quick ? 3 : (mb == 16 ? 10 : 30);
    double caf_s = 1e30, tls_s = 1e30, tcp_s = 1e30;
    for (int round = 0; round < 3; ++round) {
      caf_s = std::min(caf_s, echo_caf(self, *peer, t, reps));
      tls_s = std::min(tls_s, echo_caf(tls_self, *tls_peer, t, reps));
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) {
        uint64_t n = t.nbytes(), ack = 0;
        if (!write_all(tcp, &n, sizeof n) || !write_all(tcp, t.data_ptr(), n) ||
            !read_all(tcp, &ack, sizeof ack) || ack != n) {
          throw std::runtime_error("TCP echo failed");
        }
      }
      tcp_s = std::min(tcp_s, std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                           start).count());
    }
    double bytes = static_cast<double>(t.nbytes()) * reps;
    double caf_mbps = bytes / caf_s / 1e6, tcp_mbps = bytes / tcp_s / 1e6;
    double tls_mbps = bytes / tls_s / 1e6;
    std::string k = std::to_string(mb) + "mb";
    rep.detail("caf_mbps_" + k, caf_mbps);
    rep.detail("tcp_mbps_" + k, tcp_mbps);
    rep.detail("tls_mbps_" + k, tls_mbps);
    rep.detail("caf_over_tcp_" + k, caf_mbps / tcp_mbps);
    rep.detail("tls_over_plain_" + k, tls_mbps / caf_mbps);
    std::fprintf(stderr,
                 "%2lld MB: CAF %6.0f MB/s, CAF over TLS %6.0f MB/s, raw TCP %6.0f MB/s\n",
                 static_cast<long long>(mb), caf_mbps, tls_mbps, tcp_mbps);
    if (mb == 16) {
      headline = caf_mbps / tcp_mbps;
      tls_headline = tls_mbps / caf_mbps;
    }
  }
  ::close(tcp);
  rep.detail("tls", "CAF OpenSSL module, TLS 1.3, EC P-256 certificates of one CA");
  rep.headline("caf_over_tcp_16mb", headline);
  rep.headline("tls_over_plain_16mb", tls_headline);
  rep.finish(args.out);
  return 0;
}

} // namespace salamander::bench
