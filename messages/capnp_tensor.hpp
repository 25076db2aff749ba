// Builder/reader level helpers shared by the tensor, snapshot and checkpoint
// codecs. Only messages/*.cpp include this (it pulls in generated headers).
#pragma once

#include "messages/schema/tensor.capnp.h"
#include "messages/tensor_codec.hpp"

#include <capnp/message.h>

namespace salamander::messages::detail {

/// Writes `t` into `b`, referencing its bytes (no copy). The bytes must stay
/// alive until the message is flattened: `keep` receives what must be held.
void write_tensor(capnp::Orphanage orphanage, wire::Tensor::Builder b,
                  const torch::Tensor& t, std::vector<torch::Tensor>& keep);

/// Reads and validates a tensor. With a non-null `alias_owner`, a tensor held
/// in one suitably aligned chunk aliases the message's bytes and keeps the
/// owner alive; otherwise it is copied. `what` names it in errors.
torch::Tensor read_tensor(wire::Tensor::Reader r,
                          const std::shared_ptr<const void>& alias_owner,
                          const std::string& what);

void write_snapshot(capnp::Orphanage orphanage, wire::WeightSnapshot::Builder b,
                    const models::weight_snapshot& snap,
                    std::vector<torch::Tensor>& keep);

models::weight_snapshot read_snapshot(wire::WeightSnapshot::Reader r,
                                      const std::string& expect_fingerprint,
                                      const std::shared_ptr<const void>& alias_owner);

/// Reader options sized for a message of `words` words: the traversal limit
/// grows with the message instead of capnp's fixed 64 MiB default.
capnp::ReaderOptions reader_options(size_t words);

/// Runs `fn`, turning Cap'n Proto's exceptions into codec_error.
template <class F> auto guarded(const std::string& what, F&& fn) -> decltype(fn());

} // namespace salamander::messages::detail

#include <kj/exception.h>

namespace salamander::messages::detail {

template <class F> auto guarded(const std::string& what, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const kj::Exception& e) {
    throw codec_error(what + " is corrupt: " + std::string(e.getDescription().cStr()));
  }
}

} // namespace salamander::messages::detail
