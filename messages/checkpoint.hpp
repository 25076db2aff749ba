// Checkpoint files: a weight snapshot plus training progress, with an
// integrity check.
//
// Layout (little-endian):
//   0  8 bytes  magic "SALMCKPT"
//   8  u32      format version (1)
//  12  u32      reserved, 0
//  16  u64      body length in bytes (a multiple of 8)
//  24  u32      CRC-32 of the body
//  28  u32      reserved, 0
//  32  body     Cap'n Proto Checkpoint message (schema/checkpoint.capnp)
//
// Writes go to a temporary file in the same directory, are fsync'ed, then
// renamed over the target: a crash mid-save leaves the old checkpoint intact.
#pragma once

#include "messages/tensor_codec.hpp"

#include <string>
#include <string_view>

namespace salamander::messages {

struct checkpoint {
  models::weight_snapshot snapshot;
  int64_t created_unix_ms = 0;
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t batches_in_epoch = 0;
  std::string note;
  /// Training time of the runs that wrote it, so a resumed run's time
  /// budget goes on from there (0 in files from before it was kept).
  double train_s = 0;
};

constexpr uint32_t checkpoint_format_version = 1;

/// Writes `bytes` to a temporary file beside `path`, fsyncs it and renames it
/// over `path`. Throws codec_error ("cannot write WHAT PATH: reason") if that
/// fails; the target is then untouched.
void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::string& what);

/// Throws codec_error if the file cannot be written (the target is untouched).
void save_checkpoint(const std::string& path, const checkpoint& ckpt);

/// Throws codec_error naming the path and what is wrong: missing, not a
/// checkpoint, newer format, truncated, checksum mismatch, corrupt body,
/// larger than `max_bytes`, or (when given) a different model fingerprint.
checkpoint load_checkpoint(const std::string& path,
                           const std::string& expect_fingerprint = "",
                           uint64_t max_bytes = max_frame_bytes);

/// The same, from bytes in memory (what load_checkpoint reads).
checkpoint parse_checkpoint(const std::string& bytes, const std::string& origin,
                            const std::string& expect_fingerprint = "",
                            uint64_t max_bytes = max_frame_bytes);
std::string serialize_checkpoint(const checkpoint& ckpt);

} // namespace salamander::messages
