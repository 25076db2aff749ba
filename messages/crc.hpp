// CRC-32 (zlib's) of a byte range of any length: the check word of the
// checkpoint files and of the stream's batch log.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace salamander::messages {

inline uint32_t crc32_of(const char* p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  while (n > 0) { // zlib takes at most a uInt per call
    auto step = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    c = crc32(c, reinterpret_cast<const Bytef*>(p), step);
    p += step;
    n -= step;
  }
  return static_cast<uint32_t>(c);
}

} // namespace salamander::messages
