// The secret handshake (actors/cluster/auth.cpp): the challenge and proof a
// peer sends. A node proves H(node, name, challenge) for any challenge a
// caller sends it, so what it signs must name one (role, name, challenge)
// only: were two (name, challenge) pairs signed alike, a node could be made
// to prove for another node's name.
//
// Input: secret \n name \n challenge \n proof (missing fields are empty).
#include "actors/cluster/auth.hpp"
#include "fuzz/fuzz_support.hpp"

#include <vector>

using namespace salamander;

namespace {

std::vector<std::string> fields(const std::string& text, size_t n) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t i = 0; i + 1 < n; ++i) {
    auto nl = text.find('\n', at);
    if (nl == std::string::npos) {
      out.push_back(text.substr(at));
      at = text.size();
      continue;
    }
    out.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  out.push_back(at < text.size() ? text.substr(at) : "");
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = fields(fuzz::as_string(data, size), 4);
  const auto& secret = f[0];
  const auto& name = f[1];
  const auto& challenge = f[2];
  const auto& proof = f[3];
  auto mine = actors::prove(secret, "node", name, challenge);
  // a proof is checked by value: only the one proof passes
  FUZZ_CHECK(actors::verify(secret, "node", name, challenge, proof) ==
                 (!mine.empty() && proof == mine),
             "verify disagrees with prove");
  if (!mine.empty()) {
    FUZZ_CHECK(actors::verify(secret, "node", name, challenge, mine), "own proof refused");
    FUZZ_CHECK(!actors::verify(secret, "supervisor", name, challenge, mine),
               "a node's proof passes as the supervisor's");
  }
  // the same signature for another split of name and challenge
  for (size_t cut = challenge.find(':'); cut != std::string::npos && !mine.empty();
       cut = challenge.find(':', cut + 1)) {
    auto other_name = name + ":" + challenge.substr(0, cut);
    auto other_challenge = challenge.substr(cut + 1);
    FUZZ_CHECK(!actors::verify(secret, "node", other_name, other_challenge, mine),
               "node '" + name + "' proving challenge '" + challenge +
                   "' also proves node '" + other_name + "' for challenge '" +
                   other_challenge + "'");
  }
  return 0;
}
