#include "actors/cluster/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>

namespace salamander::actors {

namespace {

std::string hex(const unsigned char* data, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[data[i] >> 4];
    out[2 * i + 1] = digits[data[i] & 15];
  }
  return out;
}

} // namespace

std::string make_challenge() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    throw std::runtime_error("no random bytes for an authentication challenge");
  }
  return hex(bytes, sizeof bytes);
}

bool is_challenge(const std::string& text) {
  return text.size() == 32 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::string prove(const std::string& secret, const std::string& role, const std::string& name,
                  const std::string& challenge) {
  if (!is_challenge(challenge)) {
    // "role:name:challenge" must split one way only: a challenge with a ':'
    // would let a node named "a" prove for one named "a:b"
    return "";
  }
  // a fixed prefix keeps the key non-empty for an open cluster
  std::string key = "salamander-cluster:" + secret;
  std::string msg = role + ":" + name + ":" + challenge;
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &len)) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return hex(out, len);
}

bool verify(const std::string& secret, const std::string& role, const std::string& name,
            const std::string& challenge, const std::string& proof) {
  auto expect = prove(secret, role, name, challenge);
  return !expect.empty() && proof.size() == expect.size() &&
         CRYPTO_memcmp(proof.data(), expect.data(), expect.size()) == 0;
}

std::optional<std::string> load_secret(const std::string& file) {
  std::string secret;
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      throw std::invalid_argument("cannot read the cluster secret file " + file);
    }
    std::stringstream text;
    text << in.rdbuf();
    secret = text.str();
  } else if (const char* env = std::getenv("SALAMANDER_SECRET")) {
    secret = env;
  } else {
    return std::nullopt;
  }
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) {
    secret.pop_back();
  }
  if (secret.empty()) {
    throw std::invalid_argument(file.empty() ? "SALAMANDER_SECRET is set but empty"
                                             : "the cluster secret file " + file + " is empty");
  }
  return secret;
}

std::string secret_file_warning(const std::string& file) {
  struct stat s {};
  if (file.empty() || ::stat(file.c_str(), &s) != 0) {
    return "";
  }
  if ((s.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return "the cluster secret file " + file +
           " is readable by others; chmod 600 it";
  }
  return "";
}

bool same_secret(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string bearer_token(const std::string& authorization) {
  const std::string prefix = "Bearer ";
  return authorization.rfind(prefix, 0) == 0 ? authorization.substr(prefix.size())
                                             : std::string{};
}

} // namespace salamander::actors
