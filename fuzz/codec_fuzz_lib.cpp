// The decoders of tensor and snapshot frames and checkpoint files, and the
// checks their harnesses make. A unity build: the codec's sources are
// compiled here, in the one translation unit that pays for <torch/torch.h>.
#include "messages/tensor_codec.cpp"
#include "messages/checkpoint.cpp"

#include "fuzz/codec_fuzz.hpp"
#include "fuzz/fuzz_support.hpp"

namespace salamander::fuzz {

namespace {

using messages::codec_error;
using messages::decode_mode;
using messages::frame;

// Every byte of a decoded tensor, read (ASan sees a read past its storage,
// e.g. of a tensor aliasing a frame that is too short).
std::string bytes_of(const torch::Tensor& t) {
  auto c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

bool same(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         bytes_of(a) == bytes_of(b);
}

bool same(const std::vector<models::named_tensor>& a,
          const std::vector<models::named_tensor>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || !same(a[i].tensor, b[i].tensor)) {
      return false;
    }
  }
  return true;
}

bool same(const models::weight_snapshot& a, const models::weight_snapshot& b) {
  if (a.fingerprint != b.fingerprint || a.model != b.model || a.version != b.version ||
      a.optimizer != b.optimizer || a.layers.size() != b.layers.size()) {
    return false;
  }
  for (size_t i = 0; i < a.layers.size(); ++i) {
    auto& x = a.layers[i];
    auto& y = b.layers[i];
    if (x.index != y.index || x.name != y.name || !same(x.params, y.params) ||
        !same(x.buffers, y.buffers) || !same(x.optimizer_state, y.optimizer_state) ||
        !same(x.stashed, y.stashed)) {
      return false;
    }
  }
  return true;
}

// Frames are whole 8-byte words: the input's tail beyond one is dropped
// (from_bytes' refusal of it is checked on its own).
frame frame_of(const uint8_t* data, size_t size) {
  try {
    frame::from_bytes(data, size);
  } catch (const codec_error&) {
  }
  return frame::from_bytes(data, size - size % sizeof(capnp::word));
}

models::weight_snapshot sample_snapshot() {
  models::weight_snapshot s;
  s.fingerprint = "cnn:3f2a";
  s.model = "cnn";
  s.version = 7;
  s.optimizer = "adam";
  torch::manual_seed(1);
  models::layer_weights conv{0, "conv", {}, {}, {}};
  conv.params = {{"weight", torch::randn({2, 1, 3, 3})}, {"bias", torch::randn({2})}};
  conv.optimizer_state = {{"weight.exp_avg", torch::zeros({2, 1, 3, 3})},
                          {"step", torch::tensor(int64_t{3})}};
  conv.stashed = {{"weight@-1", torch::randn({2, 1, 3, 3})}};
  models::layer_weights norm{1, "norm", {}, {}, {}};
  norm.params = {{"weight", torch::ones({2})}};
  norm.buffers = {{"running_mean", torch::zeros({2}, torch::kFloat64)},
                  {"num_batches_tracked", torch::tensor(int64_t{5})}};
  s.layers = {conv, norm};
  return s;
}

std::string text_of(const frame& f) {
  return std::string(f.bytes(), f.byte_size());
}

} // namespace

int fuzz_tensor(const uint8_t* data, size_t size) {
  auto f = frame_of(data, size);
  for (auto mode : {decode_mode::copy, decode_mode::alias}) {
    try {
      auto t = messages::decode_tensor(f, mode);
      auto again = messages::decode_tensor(messages::encode_tensor(t));
      FUZZ_CHECK(same(t, again), "a decoded tensor does not survive encode and decode");
    } catch (const codec_error&) {
    }
  }
  return 0;
}

int fuzz_snapshot(const uint8_t* data, size_t size) {
  auto f = frame_of(data, size);
  for (auto mode : {decode_mode::copy, decode_mode::alias}) {
    try {
      auto s = messages::decode_snapshot(f, "", mode);
      auto again = messages::decode_snapshot(messages::encode_snapshot(s));
      FUZZ_CHECK(same(s, again), "a decoded snapshot does not survive encode and decode");
    } catch (const codec_error&) {
    }
  }
  try {
    messages::decode_snapshot(f, "cnn:3f2a");
  } catch (const codec_error&) {
  }
  return 0;
}

// When bit 0 of the reserved word at byte 12 is set, the right CRC of the
// body is written in first: the fuzzer reaches the body's checks instead of
// stopping at the checksum.
int fuzz_checkpoint(const uint8_t* data, size_t size) {
  auto bytes = as_string(data, size);
  if (bytes.size() >= messages::header_bytes && (bytes[12] & 1)) {
    auto c = messages::crc32_of(bytes.data() + messages::header_bytes,
                                bytes.size() - messages::header_bytes);
    std::memcpy(&bytes[24], &c, sizeof c);
  }
  try {
    auto ck = messages::parse_checkpoint(bytes, "fuzz.ckpt");
    auto again = messages::parse_checkpoint(messages::serialize_checkpoint(ck), "again");
    FUZZ_CHECK(same(ck.snapshot, again.snapshot) &&
                   ck.created_unix_ms == again.created_unix_ms && ck.seed == again.seed &&
                   ck.epoch == again.epoch && ck.batches_in_epoch == again.batches_in_epoch &&
                   ck.note == again.note,
               "a checkpoint does not survive serialize and parse");
  } catch (const codec_error&) {
  }
  return 0;
}

void write_codec_seeds(const std::string& kind, const std::string& dir) {
  if (kind == "tensor") {
    torch::manual_seed(1);
    std::vector<std::pair<std::string, torch::Tensor>> tensors = {
        {"float32", torch::randn({2, 3})},
        {"float64", torch::randn({1, 1, 1, 2}, torch::kFloat64)},
        {"float16", torch::randn({2, 2}).to(torch::kFloat16)},
        {"bfloat16", torch::tensor(1.5).to(torch::kBFloat16)},
        {"int64", torch::arange(4)},
        {"int32", torch::arange(3, torch::kInt32)},
        {"int16", torch::arange(2, torch::kInt16)},
        {"int8", torch::arange(5, torch::kInt8)},
        {"uint8", torch::zeros({0, 5}, torch::kUInt8)},
        {"bool", torch::tensor({true, false, true}).reshape({3, 1})},
    };
    for (auto& [name, t] : tensors) {
      write_seed(dir, name, text_of(messages::encode_tensor(t)));
    }
  } else if (kind == "snapshot") {
    auto s = sample_snapshot();
    write_seed(dir, "snapshot", text_of(messages::encode_snapshot(s)));
    s.layers.resize(1);
    s.layers[0].optimizer_state.clear();
    write_seed(dir, "one-layer", text_of(messages::encode_snapshot(s)));
    write_seed(dir, "empty", text_of(messages::encode_snapshot(models::weight_snapshot{})));
  } else if (kind == "checkpoint") {
    messages::checkpoint ck;
    ck.snapshot = sample_snapshot();
    ck.snapshot.layers.resize(1);
    ck.created_unix_ms = 1796138604159;
    ck.seed = 1;
    ck.epoch = 2;
    ck.batches_in_epoch = 17;
    ck.note = "console: checkpoint save";
    auto bytes = messages::serialize_checkpoint(ck);
    write_seed(dir, "checkpoint", bytes);
    bytes[12] = 1; // the harness fixes the CRC up
    write_seed(dir, "checkpoint-crc", bytes);
    write_seed(dir, "empty", messages::serialize_checkpoint(messages::checkpoint{}));
  }
}

} // namespace salamander::fuzz
