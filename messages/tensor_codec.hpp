// torch::Tensor and weight snapshots <-> Cap'n Proto (schema/tensor.capnp).
//
// Why Cap'n Proto: its flat-array form is the in-memory form, so a receiver
// can alias a tensor straight out of the message buffer instead of parsing
// it (2-3 us regardless of size, ../shared/STACK.md). Encoding references the
// tensor's bytes instead of copying them into a builder, then writes the
// message once into its frame: one copy per hop, which is the copy onto the
// wire anyway.
//
// Every decode validates before it trusts: dtype, rank, shape, byte counts,
// traversal limits. Bad input becomes a codec_error with a message a user
// can act on, never a crash and never an out-of-bounds read.
#pragma once

#include "models/weights.hpp"

#include <capnp/common.h>
#include <kj/array.h>
#include <torch/torch.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace salamander::messages {

class codec_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// One Cap'n Proto message in flat-array form: 8-byte aligned words, shared
/// so that tensors decoded by aliasing can keep it alive.
class frame {
public:
  frame() = default;
  explicit frame(kj::Array<capnp::word> words);
  /// A frame of `words` words whose storage may be larger (a reused buffer).
  frame(std::shared_ptr<kj::Array<capnp::word>> storage, size_t words);

  /// Copies `size` bytes into a new aligned frame. Throws codec_error if
  /// size is not a whole number of 8-byte words.
  static frame from_bytes(const void* data, size_t size);

  const capnp::word* words() const { return words_ ? words_->begin() : nullptr; }
  size_t word_count() const { return size_; }
  size_t byte_size() const { return word_count() * sizeof(capnp::word); }
  const char* bytes() const { return reinterpret_cast<const char*>(words()); }
  kj::ArrayPtr<const capnp::word> view() const { return {words(), word_count()}; }
  bool empty() const { return word_count() == 0; }
  /// Shares ownership of the bytes (for tensors that alias them).
  std::shared_ptr<const void> keep_alive() const { return words_; }

  /// The storage, if nobody else holds it (no aliasing tensor, no copy of
  /// this frame), so that the next encode can write into it.
  std::shared_ptr<kj::Array<capnp::word>> release_if_unique();

private:
  std::shared_ptr<kj::Array<capnp::word>> words_;
  size_t size_ = 0;
};

/// Storage for a received frame of `words` words. Large buffers come from a
/// small pool of recently freed ones: a fresh multi-megabyte allocation costs
/// a page fault per 4 KiB, which on a stream of activations is most of the
/// receive time.
std::shared_ptr<kj::Array<capnp::word>> acquire_words(size_t words);

/// How decoded tensors relate to the frame.
enum class decode_mode {
  copy,  ///< tensors own their bytes; the frame may go away
  alias, ///< tensors point into the frame (kept alive by them) where safe
};

/// Upper bound on what one frame may claim to hold; larger claims are
/// rejected as corrupt before anything is allocated.
constexpr size_t max_frame_bytes = size_t{8} << 30;

/// The largest chunk a tensor's bytes are split into (Data holds < 2^29).
constexpr size_t max_chunk_bytes = size_t{1} << 28;

/// Encodes `t`. Passing the previous frame of a sender as `reuse` writes
/// into its storage when it is large enough and no longer shared, which saves
/// the allocation and page faults of a fresh buffer per message.
frame encode_tensor(const torch::Tensor& t, frame reuse = {});
torch::Tensor decode_tensor(const frame& f, decode_mode mode = decode_mode::copy);

frame encode_snapshot(const models::weight_snapshot& snap);
/// `expect_fingerprint`, when not empty, must match the snapshot's.
models::weight_snapshot decode_snapshot(const frame& f,
                                        const std::string& expect_fingerprint = "",
                                        decode_mode mode = decode_mode::copy);

/// A message built but not yet flattened: its tensor bytes are still the
/// tensors' own memory. write() hands the flat-array form to a sink piece by
/// piece (segment table, small segments, then the tensor bytes straight from
/// the tensors), so a transport that has its own buffer pays one copy, not
/// two. The tensors are kept alive by this object.
class outgoing {
public:
  using sink = std::function<void(const void*, size_t)>;
  outgoing(outgoing&&) noexcept;
  outgoing& operator=(outgoing&&) noexcept;
  ~outgoing();
  size_t byte_size() const;
  void write(const sink& out) const;

private:
  friend outgoing prepare_tensor(const torch::Tensor& t);
  friend outgoing prepare_snapshot(const models::weight_snapshot& snap);
  outgoing();
  struct impl;
  std::unique_ptr<impl> impl_;
};

outgoing prepare_tensor(const torch::Tensor& t);
outgoing prepare_snapshot(const models::weight_snapshot& snap);

/// Names of the dtypes the codec carries, for messages and tests.
std::vector<torch::ScalarType> supported_dtypes();

} // namespace salamander::messages
