// Cluster secret: nodes and supervisor prove to each other that they know
// it, without sending it.
//
//   supervisor ── hello(protocol, c_s) ──────────────> node
//   supervisor <── node_info{proof = H(node, c_s), c_n} ─ node
//   supervisor ── auth(H(supervisor, c_n), "") ──────> node   (or auth("", why))
//
// H(role, c) = HMAC-SHA256(secret, role ":" name ":" c) in hex, c a fresh
// random challenge. A node whose proof is wrong is refused (and logged on
// both sides); it never gets a stage, so never receives weights. A node
// refuses spawn, profile, slow and kill until a supervisor proved the
// secret, so a stranger cannot make it work either. With no secret on either
// side the proofs match (an open cluster), and both log a warning.
#pragma once

#include <optional>
#include <string>

namespace salamander::actors {

/// 16 random bytes in hex.
std::string make_challenge();

/// Whether `text` is what make_challenge() gives (32 lowercase hex digits):
/// a peer's challenge is signed only then.
bool is_challenge(const std::string& text);

/// H(role, challenge) under `secret` for the node called `name`; "" (no
/// proof) when `challenge` is not a challenge.
std::string prove(const std::string& secret, const std::string& role, const std::string& name,
                  const std::string& challenge);

/// Constant-time check of `proof` against what `secret` gives; false for a
/// malformed challenge.
bool verify(const std::string& secret, const std::string& role, const std::string& name,
            const std::string& challenge, const std::string& proof);

/// Whether two secrets (or tokens) are equal, in a time that does not depend
/// on where they differ.
bool same_secret(const std::string& a, const std::string& b);

/// The token of an `Authorization` header's value `Bearer TOKEN` ("" when it
/// is not one).
std::string bearer_token(const std::string& authorization);

/// The cluster secret: the file's content (trailing newline stripped) when
/// `file` is given, else $SALAMANDER_SECRET, else none. Throws when the file
/// cannot be read or is empty.
std::optional<std::string> load_secret(const std::string& file);

/// "" when the secret file's permissions are fine, else a warning to log
/// (readable by group or others).
std::string secret_file_warning(const std::string& file);

} // namespace salamander::actors
