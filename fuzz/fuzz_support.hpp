// What every harness shares: a property check that aborts (so libFuzzer
// records the input), and writing seed inputs.
//
// A harness passes an input when its decoder returns a value, or throws the
// error type the decoder documents. Anything else is a finding: a crash, a
// sanitizer report, another exception escaping (libFuzzer reports it as a
// deadly signal), or a FUZZ_CHECK that fails.
//
// Seeds: SALAMANDER_FUZZ_WRITE_SEEDS=DIR ./NAME_fuzz writes the harness's
// generated seed inputs (those made with the project's own encoders) to DIR
// and exits; fuzz/build.sh seeds does that for all of them.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#define FUZZ_CHECK(cond, what)                                                           \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n  (%s)\n", __FILE__,        \
                   __LINE__, #cond, std::string(what).c_str());                         \
      std::abort();                                                                      \
    }                                                                                    \
  } while (false)

namespace salamander::fuzz {

/// Where to write seeds, or "" when not asked to.
inline std::string seed_dir() {
  const char* dir = std::getenv("SALAMANDER_FUZZ_WRITE_SEEDS");
  return dir ? dir : "";
}

inline void write_seed(const std::string& dir, const std::string& name,
                       const std::string& bytes) {
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}

inline std::string as_string(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

} // namespace salamander::fuzz
