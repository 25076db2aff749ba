// What a stream reads from outside: the --stream source text and the
// on-disk batch log (format in stream.hpp). Kept apart from the reader
// threads and from LibTorch so that it is checked alone, and fuzzed
// (fuzz/stream_fuzz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace salamander::actors::stream_format {

/// A batch log file that cannot be used; stream.cpp turns it into
/// models::data_error.
class log_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

constexpr size_t header_bytes = 40;
constexpr int64_t side = 28; ///< Fashion-MNIST-shaped samples
constexpr size_t sample_bytes = side * side;
constexpr size_t record_bytes = 1 + sample_bytes; ///< label, then pixels
constexpr int64_t classes = 10;

struct source {
  std::string kind; ///< replay, file, tcp
  double rate = 0;
  std::string path;
  std::string host;
  uint16_t port = 0;
};

/// Throws std::invalid_argument naming what is wrong with `text`.
source parse_source(const std::string& text);

struct log_header {
  uint64_t batch = 0;
  uint32_t samples = 0;
  uint32_t bytes_per_sample = 0;
  uint64_t position = 0;
  uint32_t crc = 0;
};

/// A log file: the header, then `body` (labels, then pixels, of `samples`
/// samples).
std::string encode_log(uint64_t batch, uint32_t samples, uint64_t position,
                       const std::string& body);

/// Checks a log file's header, size and checksum; throws log_error naming
/// `path`. On success the body is bytes[header_bytes, header_bytes +
/// samples * record_bytes).
log_header check_log(const std::string& path, const std::string& bytes);

/// File name of batch g: "batch-NNNNNNNNNNNN.bin".
std::string log_name(uint64_t g);

/// g for a name log_name(g) gives; nullopt for any other name.
std::optional<uint64_t> log_number(const std::string& name);

} // namespace salamander::actors::stream_format
