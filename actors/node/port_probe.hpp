// A non-blocking probe of a TCP port, for what dials peers that may be
// down: CAF 0.17's connect blocks its caller (and the middleman's actor)
// for as long as the kernel retries a SYN, two minutes while a link is
// down. Dial only a port that accepts.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace salamander::actors {

// Whether something accepts TCP connections at host:port within `timeout`
// (a non-blocking connect): a link that is down costs the timeout, not the
// minutes of a blocking connect's SYN retries.
inline bool port_accepts(const std::string& host, uint16_t port,
                         std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
    return false;
  }
  bool ok = false;
  for (auto* a = found; a && !ok; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      a->ai_protocol);
    if (fd < 0) {
      continue;
    }
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(timeout.count())) == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        ok = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return ok;
}

// The address of this host that the kernel routes to `peer` from (a UDP
// "connect" sends nothing; it only picks the route and the source
// address), or "" without a route. A node listening on 0.0.0.0 tells the
// supervisor it joins this address, so that the supervisor can dial it
// again after the node restarts or its link comes back.
inline std::string outward_address(const std::string& peer, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(peer.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
    return "";
  }
  std::string out;
  for (auto* a = found; a && out.empty(); a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) {
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    char text[INET6_ADDRSTRLEN] = {0};
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* where = local.ss_family == AF_INET
                              ? static_cast<const void*>(
                                    &reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                              : static_cast<const void*>(
                                    &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (::inet_ntop(local.ss_family, where, text, sizeof text)) {
        out = text;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return out;
}

} // namespace salamander::actors
