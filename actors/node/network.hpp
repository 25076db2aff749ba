// Publishing and dialling for every salamander process, plaintext or TLS:
// with CAF's OpenSSL module loaded (actors/node/tls.hpp) every port is
// published, and every peer dialled, through it and nothing goes through
// the plain middleman, so a TLS process never speaks plaintext.
#pragma once

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/openssl/remote_actor.hpp>

#include <cstdint>
#include <string>

namespace salamander::actors {

inline bool uses_tls(caf::actor_system& sys) {
  return sys.has_openssl_manager();
}

/// The middleman actor to send connect_atom / publish_atom requests to.
inline caf::io::middleman_actor network(caf::actor_system& sys) {
  return uses_tls(sys) ? sys.openssl_manager().actor_handle() : sys.middleman().actor_handle();
}

template <class Handle>
caf::expected<uint16_t> publish(const Handle& whom, uint16_t port, const std::string& host,
                                bool reuse = false) {
  auto& sys = whom.home_system();
  const char* in = host.empty() ? nullptr : host.c_str();
  if (uses_tls(sys)) {
    return caf::openssl::publish(whom, port, in, reuse);
  }
  return sys.middleman().publish(whom, port, in, reuse);
}

template <class Handle>
void unpublish(const Handle& whom, uint16_t port) {
  auto& sys = whom.home_system();
  if (uses_tls(sys)) {
    // caf::openssl::unpublish does not compile in 0.17.6 (it leaves out the
    // actor's address); this is the request it means to send
    caf::anon_send(sys.openssl_manager().actor_handle(), caf::unpublish_atom_v,
                   whom.address(), port);
  } else {
    sys.middleman().unpublish(whom, port);
  }
}

template <class Handle = caf::actor>
caf::expected<Handle> remote_actor(caf::actor_system& sys, const std::string& host,
                                   uint16_t port) {
  if (uses_tls(sys)) {
    return caf::openssl::remote_actor<Handle>(sys, host, port);
  }
  return sys.middleman().remote_actor<Handle>(host, port);
}

} // namespace salamander::actors
