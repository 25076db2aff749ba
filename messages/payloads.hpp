// Tensors and weight snapshots as messages. Inside one process CAF never
// serialises a message, so a payload is just a shared torch::Tensor (no copy
// at all). Between processes CAF calls inspect(): the tensor is encoded once
// into a Cap'n Proto frame (messages/tensor_codec.hpp) and written raw; the
// receiver reads it into an aligned frame and aliases the tensor out of it.
#pragma once

#include "messages/tensor_codec.hpp"

#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

namespace salamander {

struct tensor_payload {
  torch::Tensor tensor;
};

struct snapshot_payload {
  models::weight_snapshot snapshot;
};

namespace detail {

// Writes a message as (u64 length, raw bytes) straight from the tensors'
// memory; reads it back into an aligned frame that decoded tensors alias.
// Only binary (de)serialisers see the bytes; to_string sees a summary.
template <class Inspector, class Prepare, class Decode>
typename Inspector::result_type inspect_frame(Inspector& f, const char* name,
                                              Prepare&& prepare, Decode&& decode) {
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    messages::outgoing msg = prepare();
    uint64_t n = msg.byte_size();
    if (auto err = f(n)) {
      return err;
    }
    caf::error result;
    msg.write([&](const void* data, size_t size) {
      if (!result) {
        result = f.apply_raw(size, const_cast<void*>(data));
      }
    });
    return result;
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    uint64_t n = 0;
    if (auto err = f(n)) {
      return err;
    }
    if (n % sizeof(capnp::word) != 0 || n > messages::max_frame_bytes) {
      return caf::make_error(caf::sec::invalid_argument, std::string(name) +
                                                             ": bad frame length " +
                                                             std::to_string(n));
    }
    auto storage = messages::acquire_words(n / sizeof(capnp::word));
    if (n > 0) {
      if (auto err = f.apply_raw(n, storage->begin())) {
        return err;
      }
    }
    try {
      decode(messages::frame(std::move(storage), n / sizeof(capnp::word)));
    } catch (const std::exception& e) {
      return caf::make_error(caf::sec::invalid_argument,
                             std::string(name) + ": " + e.what());
    }
    return caf::error{};
  } else {
    std::string summary = name;
    return f(caf::meta::type_name(name), summary);
  }
}

} // namespace detail

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, tensor_payload& x) {
  return detail::inspect_frame(
      f, "tensor_payload", [&] { return messages::prepare_tensor(x.tensor); },
      [&](const messages::frame& fr) {
        x.tensor = messages::decode_tensor(fr, messages::decode_mode::alias);
      });
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, snapshot_payload& x) {
  return detail::inspect_frame(
      f, "snapshot_payload", [&] { return messages::prepare_snapshot(x.snapshot); },
      [&](const messages::frame& fr) { x.snapshot = messages::decode_snapshot(fr); });
}

} // namespace salamander
