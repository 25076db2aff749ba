// The three LibTorch harnesses share one translation unit
// (codec_fuzz_lib.cpp): this header, free of torch, is what their entry
// points call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace salamander::fuzz {

/// A tensor frame (messages/tensor_codec.cpp, decode_tensor).
int fuzz_tensor(const uint8_t* data, size_t size);
/// A weight snapshot frame (decode_snapshot).
int fuzz_snapshot(const uint8_t* data, size_t size);
/// A checkpoint file (messages/checkpoint.cpp, parse_checkpoint).
int fuzz_checkpoint(const uint8_t* data, size_t size);

/// Writes seeds for `kind` (tensor, snapshot, checkpoint) made with the
/// project's own encoders.
void write_codec_seeds(const std::string& kind, const std::string& dir);

} // namespace salamander::fuzz
