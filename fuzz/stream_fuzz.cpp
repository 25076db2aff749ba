// What a continual-learning stream reads from outside
// (actors/train/stream_format.cpp): the --stream source, the batch log's
// files (a log directory survives restarts and may hold anything), and the
// names of the files in that directory.
//
// The log's CRC would stop the fuzzer at the checksum: when bit 0 of the
// reserved word (byte 36) is set, the harness first writes the right CRC
// of the body in, so that the checks behind it are reached too.
#include "actors/train/stream_format.hpp"
#include "fuzz/fuzz_support.hpp"
#include "messages/crc.hpp"

#include <cstring>

using namespace salamander;
namespace sf = actors::stream_format;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto dir = fuzz::seed_dir();
  if (dir.empty()) {
    return 0;
  }
  // batch logs as sample_stream writes them: 1 and 3 samples of labels 0..9
  for (uint32_t n : {1u, 3u}) {
    std::string body;
    for (uint32_t i = 0; i < n; ++i) {
      body.push_back(static_cast<char>(i % 10));
    }
    for (uint32_t i = 0; i < n * sf::sample_bytes; ++i) {
      body.push_back(static_cast<char>((i * 7) & 0xff));
    }
    auto file = sf::encode_log(n, n, 1000 * n, body);
    fuzz::write_seed(dir, "log-" + std::to_string(n), file);
    file[36] = 1; // the harness rewrites the CRC
    fuzz::write_seed(dir, "log-crc-" + std::to_string(n), file);
  }
  fuzz::write_seed(dir, "name", sf::log_name(42));
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto text = fuzz::as_string(data, size);
  try {
    auto s = sf::parse_source(text);
    FUZZ_CHECK(s.kind == "replay" || s.kind == "file" || s.kind == "tcp", s.kind);
    if (s.kind == "replay") {
      FUZZ_CHECK(s.rate > 0 && s.rate <= 1e7, text);
    } else if (s.kind == "tcp") {
      FUZZ_CHECK(s.port > 0 && !s.host.empty(), text);
    } else {
      FUZZ_CHECK(!s.path.empty(), text);
    }
  } catch (const std::invalid_argument&) {
  }

  auto bytes = text;
  if (bytes.size() >= sf::header_bytes && (bytes[36] & 1)) {
    uint32_t samples = 0;
    std::memcpy(&samples, bytes.data() + 16, 4);
    uint64_t body = uint64_t{samples} * sf::record_bytes;
    if (body <= bytes.size() - sf::header_bytes) {
      auto crc = messages::crc32_of(bytes.data() + sf::header_bytes, body);
      std::memcpy(&bytes[32], &crc, 4);
    }
  }
  try {
    auto h = sf::check_log("fuzz.bin", bytes);
    // what was accepted is what the writer would have written
    auto again = sf::encode_log(h.batch, h.samples, h.position,
                                bytes.substr(sf::header_bytes));
    FUZZ_CHECK(again.size() == bytes.size() &&
                   std::memcmp(again.data(), bytes.data(), 36) == 0 &&
                   again.compare(sf::header_bytes, std::string::npos, bytes,
                                 sf::header_bytes) == 0,
               "a log file the writer would not write was accepted");
  } catch (const sf::log_error&) {
  }

  auto g = sf::log_number(text);
  if (g) {
    FUZZ_CHECK(sf::log_name(*g) == text, "'" + text + "' read as batch " + std::to_string(*g));
  }
  return 0;
}
