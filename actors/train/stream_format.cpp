// The stream's outside formats, see stream_format.hpp.
#include "actors/train/stream_format.hpp"

#include "messages/crc.hpp"

#include <charconv>
#include <cstring>
#include <string_view>

namespace salamander::actors::stream_format {

namespace {

constexpr char magic[8] = {'S', 'A', 'L', 'M', 'S', 'T', 'R', 'M'};

void put_u32(std::string& out, uint32_t v) {
  out.append(reinterpret_cast<const char*>(&v), 4);
}
void put_u64(std::string& out, uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), 8);
}
template <class T> T get(const std::string& in, size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

} // namespace

source parse_source(const std::string& text) {
  auto colon = text.find(':');
  source p;
  p.kind = text.substr(0, colon);
  std::string rest = colon == std::string::npos ? "" : text.substr(colon + 1);
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument("--stream " + text + ": " + why +
                                " (give replay:RATE, file:PATH or tcp:HOST:PORT)");
  };
  if (p.kind == "replay") {
    try {
      size_t used = 0;
      p.rate = std::stod(rest, &used);
      if (used != rest.size()) {
        bad("RATE must be a number of samples per second");
      }
    } catch (const std::logic_error&) {
      bad("RATE must be a number of samples per second");
    }
    if (!(p.rate > 0 && p.rate <= 1e7)) {
      bad("RATE must be above 0 and at most 1e7 samples per second");
    }
  } else if (p.kind == "file") {
    if (rest.empty()) {
      bad("no PATH");
    }
    p.path = rest;
  } else if (p.kind == "tcp") {
    auto c = rest.rfind(':');
    if (c == std::string::npos || c == 0) {
      bad("no HOST:PORT");
    }
    p.host = rest.substr(0, c);
    int port = 0;
    try {
      port = std::stoi(rest.substr(c + 1));
    } catch (const std::logic_error&) {
      bad("PORT must be a number");
    }
    if (port <= 0 || port > 65535) {
      bad("PORT must be 1 to 65535");
    }
    p.port = static_cast<uint16_t>(port);
  } else {
    bad("unknown source '" + p.kind + "'");
  }
  return p;
}

std::string encode_log(uint64_t batch, uint32_t samples, uint64_t position,
                       const std::string& body) {
  std::string file(magic, 8);
  put_u64(file, batch);
  put_u32(file, samples);
  put_u32(file, static_cast<uint32_t>(sample_bytes));
  put_u64(file, position);
  put_u32(file, messages::crc32_of(body.data(), body.size()));
  put_u32(file, 0);
  return file + body;
}

log_header check_log(const std::string& path, const std::string& bytes) {
  if (bytes.size() < header_bytes || std::memcmp(bytes.data(), magic, 8) != 0) {
    throw log_error("stream log " + path + " is not a salamander stream batch");
  }
  log_header h{get<uint64_t>(bytes, 8), get<uint32_t>(bytes, 16), get<uint32_t>(bytes, 20),
               get<uint64_t>(bytes, 24), get<uint32_t>(bytes, 32)};
  size_t body = static_cast<size_t>(h.samples) * (1 + h.bytes_per_sample);
  if (h.bytes_per_sample != sample_bytes || bytes.size() != header_bytes + body) {
    throw log_error("stream log " + path + " is truncated or of another shape");
  }
  if (messages::crc32_of(bytes.data() + header_bytes, body) != h.crc) {
    throw log_error("stream log " + path + " fails its checksum: the file is corrupt");
  }
  return h;
}

std::string log_name(uint64_t g) {
  char name[40];
  std::snprintf(name, sizeof name, "batch-%012llu.bin", static_cast<unsigned long long>(g));
  return name;
}

std::optional<uint64_t> log_number(const std::string& name) {
  // only the names log_name gives: "batch-0000.bin" or "batch-x.bin" in the
  // directory is someone else's file, and "batch-99999999999999999999.bin"
  // must not throw out of the stream's constructor
  if (name.size() < 10 || name.rfind("batch-", 0) != 0 ||
      name.compare(name.size() - 4, 4, ".bin") != 0) {
    return std::nullopt;
  }
  uint64_t g = 0;
  auto digits = std::string_view(name).substr(6, name.size() - 10);
  auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), g);
  if (err != std::errc() || end != digits.data() + digits.size() || log_name(g) != name) {
    return std::nullopt;
  }
  return g;
}

} // namespace salamander::actors::stream_format
