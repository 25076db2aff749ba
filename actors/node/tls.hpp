// TLS between salamander processes: CAF's OpenSSL module, with certificates
// from a cluster CA (deploy/make-certs.sh). With TLS configured, a process
// publishes and dials only through the module, which requires both sides to
// present a certificate the cluster CA signed; plaintext peers and peers of
// another CA fail their handshake and are logged here, on the side that
// refused them. A handshake that does not finish within a bound (a silent or
// slow peer) is cut.
#pragma once

#include <caf/actor_system_config.hpp>

#include <chrono>
#include <string>

namespace salamander::actors {

/// One process's TLS material: the directory `deploy/make-certs.sh` makes
/// for one name, holding ca.pem (the cluster CA), cert.pem and key.pem.
struct tls_options {
  std::string dir; ///< empty: plaintext
  /// A peer that has not finished its TLS handshake by then is cut off
  /// ($SALAMANDER_TLS_HANDSHAKE_S overrides it).
  std::chrono::milliseconds handshake_timeout{10000};

  bool enabled() const {
    return !dir.empty();
  }
  std::string ca_file() const {
    return dir + "/ca.pem";
  }
  std::string cert_file() const {
    return dir + "/cert.pem";
  }
  std::string key_file() const {
    return dir + "/key.pem";
  }
};

/// `--tls DIR`, else $SALAMANDER_TLS, else plaintext; "none" turns TLS off
/// even where the environment names a directory.
tls_options tls_from(const std::string& flag);

/// tls_from and check_tls together: throws std::invalid_argument saying what
/// is wrong with the material (a command's clear error, before any connection).
tls_options checked_tls(const std::string& flag);

/// Checks the material before any connection needs it (CAF would throw on
/// the network thread): the three files readable, the key the certificate's,
/// the certificate signed by the CA and valid today. Returns what is wrong,
/// or an empty string.
std::string check_tls(const tls_options& opts);

/// The certificate's subject common name (the name make-certs.sh gave it),
/// or "" when the file cannot be read.
std::string tls_name(const tls_options& opts);

/// Sets CAF's OpenSSL keys, loads its module and starts watching handshakes;
/// nothing when `opts` is not enabled. Call after configure(), before the
/// actor_system is made.
void configure_tls(caf::actor_system_config& cfg, const tls_options& opts);

/// TLS handshakes this process refused or cut since it started (tests,
/// diagnostics).
size_t tls_refusals();

} // namespace salamander::actors
