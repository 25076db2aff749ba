#include "../support.hpp"

#include "messages/frame_pool.hpp"
#include "messages/schema/tensor.capnp.h"
#include "messages/tensor_codec.hpp"
#include "models/weights.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>

using namespace salamander;
using messages::codec_error;
using messages::decode_mode;

namespace {

torch::Tensor sample(torch::ScalarType dtype, std::vector<int64_t> shape) {
  torch::manual_seed(17);
  auto t = torch::randn(shape, torch::kFloat64) * 50;
  if (dtype == torch::kBool) {
    return t > 0;
  }
  return t.to(dtype);
}

bool same(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && torch::equal(a, b);
}

} // namespace

TEST_CASE("tensors round-trip for every dtype and shape, copied and aliased",
          "[unit][codec]") {
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {1}, {7}, {2, 0, 3}, {3, 4, 5}};
  for (auto dtype : messages::supported_dtypes()) {
    for (auto& shape : shapes) {
      INFO(c10::toString(dtype) << " " << models::to_string(shape));
      auto t = sample(dtype, shape);
      auto f = messages::encode_tensor(t);
      CHECK(f.byte_size() % 8 == 0);
      auto copied = messages::decode_tensor(f, decode_mode::copy);
      auto aliased = messages::decode_tensor(f, decode_mode::alias);
      CHECK(same(copied, t));
      CHECK(same(aliased, t));
      CHECK(copied.dim() == static_cast<int64_t>(shape.size()));
    }
  }
}

TEST_CASE("aliased decoding points into the frame and keeps it alive", "[unit][codec]") {
  auto t = torch::arange(1000, torch::kFloat32);
  torch::Tensor aliased;
  const char* begin = nullptr;
  size_t size = 0;
  {
    auto f = messages::encode_tensor(t);
    begin = f.bytes();
    size = f.byte_size();
    aliased = messages::decode_tensor(f, decode_mode::alias);
    auto copied = messages::decode_tensor(f, decode_mode::copy);
    auto* c = static_cast<const char*>(copied.data_ptr());
    CHECK((c < begin || c >= begin + size));
  }
  // the frame object is gone; the tensor still owns its bytes
  auto* p = static_cast<const char*>(aliased.data_ptr());
  CHECK(p >= begin);
  CHECK(p < begin + size);
  CHECK(torch::equal(aliased, t));
}

TEST_CASE("non-contiguous tensors are sent in row-major order", "[unit][codec]") {
  auto t = torch::arange(12, torch::kInt32).reshape({3, 4}).t();
  REQUIRE(!t.is_contiguous());
  CHECK(same(messages::decode_tensor(messages::encode_tensor(t)), t.contiguous()));
}

TEST_CASE("a tensor spread over several chunks decodes by copying", "[unit][codec]") {
  capnp::MallocMessageBuilder b;
  auto root = b.initRoot<wire::Tensor>();
  root.setDtype(wire::DType::INT16);
  root.initShape(1).set(0, 6);
  auto chunks = root.initChunks(3);
  int16_t values[6] = {1, -2, 3, -4, 5, -6};
  for (unsigned i = 0; i < 3; ++i) {
    chunks.set(i, capnp::Data::Reader(reinterpret_cast<const kj::byte*>(values + 2 * i), 4));
  }
  messages::frame f(capnp::messageToFlatArray(b));
  auto t = messages::decode_tensor(f, decode_mode::alias);
  CHECK(torch::equal(t, torch::tensor({1, -2, 3, -4, 5, -6}, torch::kInt16)));
}

namespace {

messages::frame hand_built(wire::DType dtype, std::vector<int64_t> shape, size_t bytes) {
  capnp::MallocMessageBuilder b;
  auto root = b.initRoot<wire::Tensor>();
  root.setDtype(dtype);
  auto s = root.initShape(static_cast<unsigned>(shape.size()));
  for (unsigned i = 0; i < shape.size(); ++i) {
    s.set(i, shape[i]);
  }
  root.initChunks(1).init(0, static_cast<unsigned>(bytes));
  return messages::frame(capnp::messageToFlatArray(b));
}

} // namespace

TEST_CASE("bad tensor messages are clear errors", "[unit][codec]") {
  CHECK_THROWS_WITH(messages::decode_tensor(hand_built(static_cast<wire::DType>(99), {2}, 8)),
                    Catch::Contains("unknown dtype"));
  CHECK_THROWS_WITH(messages::decode_tensor(hand_built(wire::DType::FLOAT32, {10}, 8)),
                    Catch::Contains("needs 40 bytes but carries 8"));
  CHECK_THROWS_WITH(messages::decode_tensor(hand_built(wire::DType::FLOAT32, {-1}, 0)),
                    Catch::Contains("negative dimension"));
  CHECK_THROWS_WITH(
      messages::decode_tensor(hand_built(wire::DType::FLOAT32, {1 << 30, 1 << 30, 1 << 30}, 0)),
      Catch::Contains("overflows"));
  CHECK_THROWS_WITH(messages::decode_tensor(hand_built(wire::DType::FLOAT32,
                                                      std::vector<int64_t>(17, 1), 4)),
                    Catch::Contains("rank 17"));
  CHECK_THROWS_AS(messages::decode_tensor(messages::frame()), codec_error);
  CHECK_THROWS_WITH(messages::frame::from_bytes("abc", 3), Catch::Contains("8-byte words"));
  CHECK_THROWS_WITH(messages::encode_tensor(torch::zeros({2}, torch::kComplexFloat)),
                    Catch::Contains("cannot be sent"));
}

TEST_CASE("every truncation of a tensor message is rejected", "[unit][codec]") {
  auto f = messages::encode_tensor(torch::randn({4, 5}));
  for (size_t words = 0; words < f.word_count(); ++words) {
    INFO(words << " of " << f.word_count() << " words");
    auto cut = messages::frame::from_bytes(f.bytes(), words * 8);
    CHECK_THROWS_AS(messages::decode_tensor(cut), codec_error);
  }
}

TEST_CASE("corrupted tensor messages never crash", "[unit][codec]") {
  auto original = torch::randn({3, 3});
  auto f = messages::encode_tensor(original);
  std::string bytes(f.bytes(), f.byte_size());
  int rejected = 0;
  // Flip each byte of the header and pointer region (the data region only
  // changes values, which no format can detect; checkpoints have a CRC).
  for (size_t i = 0; i < bytes.size() - 36; ++i) {
    auto bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0xff);
    auto g = messages::frame::from_bytes(bad.data(), bad.size());
    try {
      auto t = messages::decode_tensor(g);
      CHECK(t.nbytes() <= bytes.size()); // whatever parsed came from inside the message
    } catch (const codec_error&) {
      rejected++;
    }
  }
  CHECK(rejected > 0);
}

TEST_CASE("weight snapshots round-trip with optimizer state and stashed versions",
          "[unit][codec][weights]") {
  models::layered_model m(models::describe(models::model_spec::parse("cnn")), 4);
  auto net = m.all();
  auto opt = models::make_optimizer({}, net->parameters());
  net->forward(torch::randn({2, 1, 28, 28})).sum().backward();
  opt->step();
  auto snap = models::capture(m, opt.get(), "adam", 7);
  REQUIRE(snap.layers.size() == 4);
  REQUIRE(snap.layers[0].optimizer_state.size() == 6); // 2 params x (step, m, v)
  // the async schedule's version 6 of the first layer's weight
  auto without = snap.bytes();
  snap.layers[0].stashed = {{"weight@-1", torch::randn({2, 3})}};
  auto before = snap.bytes();
  CHECK(before == without + 6 * 4); // the stash counts
  auto f = messages::encode_snapshot(snap);
  for (auto mode : {decode_mode::copy, decode_mode::alias}) {
    auto back = messages::decode_snapshot(f, m.desc().fingerprint, mode);
    CHECK(back.version == 7);
    CHECK(back.fingerprint == snap.fingerprint);
    CHECK(back.model == "cnn");
    CHECK(back.optimizer == "adam");
    REQUIRE(back.layers.size() == snap.layers.size());
    for (size_t i = 0; i < snap.layers.size(); ++i) {
      auto& a = snap.layers[i];
      auto& b = back.layers[i];
      CHECK(a.name == b.name);
      CHECK(a.index == b.index);
      REQUIRE(a.params.size() == b.params.size());
      REQUIRE(a.optimizer_state.size() == b.optimizer_state.size());
      REQUIRE(a.stashed.size() == b.stashed.size());
      for (size_t j = 0; j < a.stashed.size(); ++j) {
        CHECK(a.stashed[j].name == b.stashed[j].name);
        CHECK(same(a.stashed[j].tensor, b.stashed[j].tensor));
      }
      for (size_t j = 0; j < a.params.size(); ++j) {
        CHECK(a.params[j].name == b.params[j].name);
        CHECK(same(a.params[j].tensor, b.params[j].tensor));
      }
      for (size_t j = 0; j < a.optimizer_state.size(); ++j) {
        CHECK(a.optimizer_state[j].name == b.optimizer_state[j].name);
        CHECK(same(a.optimizer_state[j].tensor, b.optimizer_state[j].tensor));
      }
    }
    CHECK(back.bytes() == before);
    CHECK(back.layers[0].stashed.size() == 1);
  }
  CHECK_THROWS_WITH(messages::decode_snapshot(f, "0123456789abcdef"),
                    Catch::Contains("expected fingerprint 0123456789abcdef"));
}

TEST_CASE("a sender's previous frame is reused only when nobody holds it", "[unit][codec]") {
  auto a = torch::arange(256, torch::kFloat32);
  auto b = torch::arange(256, torch::kFloat32) * 2;
  auto f1 = messages::encode_tensor(a);
  const char* storage = f1.bytes();
  auto f2 = messages::encode_tensor(b, std::move(f1));
  CHECK(f2.bytes() == storage); // written in place
  CHECK(torch::equal(messages::decode_tensor(f2), b));

  auto held = messages::decode_tensor(f2, decode_mode::alias);
  auto f3 = messages::encode_tensor(a, std::move(f2));
  CHECK(f3.bytes() != storage); // an aliasing tensor still reads the old bytes
  CHECK(torch::equal(held, b));
  CHECK(torch::equal(messages::decode_tensor(f3), a));

  auto small = messages::encode_tensor(torch::zeros({2}));
  auto big = messages::encode_tensor(torch::zeros({1000}), std::move(small));
  CHECK(torch::equal(messages::decode_tensor(big), torch::zeros({1000})));
}

TEST_CASE("a prepared message writes the same bytes as the flat frame", "[unit][codec]") {
  auto t = torch::randn({3, 1000});
  std::string written;
  auto msg = messages::prepare_tensor(t);
  msg.write([&](const void* p, size_t n) { written.append(static_cast<const char*>(p), n); });
  CHECK(written.size() == msg.byte_size());
  auto f = messages::frame::from_bytes(written.data(), written.size());
  CHECK(torch::equal(messages::decode_tensor(f), t));
  auto empty = messages::prepare_tensor(torch::zeros({0}));
  std::string e;
  empty.write([&](const void* p, size_t n) { e.append(static_cast<const char*>(p), n); });
  CHECK(messages::decode_tensor(messages::frame::from_bytes(e.data(), e.size())).numel() == 0);
}

TEST_CASE("large receive buffers are reused once freed", "[unit][codec]") {
  size_t words = (size_t{4} << 20) / 8;
  const capnp::word* first = nullptr;
  {
    auto a = messages::acquire_words(words);
    first = a->begin();
    REQUIRE(a->size() >= words);
  }
  auto b = messages::acquire_words(words);
  CHECK(b->begin() == first);
  auto c = messages::acquire_words(words); // b is still held: a new buffer
  CHECK(c->begin() != first);
  auto small = messages::acquire_words(4);
  CHECK(small->size() == 4);
}

TEST_CASE("a node's release of the receive buffer pool frees what it kept",
          "[unit][codec]") {
  size_t words = (size_t{4} << 20) / 8;
  messages::release_frame_pool(); // whatever earlier cases left
  {
    auto a = messages::acquire_words(words);
    auto b = messages::acquire_words(words);
  } // both kept for reuse
  CHECK(messages::release_frame_pool() == 2 * words * sizeof(capnp::word));
  CHECK(messages::release_frame_pool() == 0);
  // still a working pool afterwards: a freed buffer is reused again
  const capnp::word* again = nullptr;
  {
    auto c = messages::acquire_words(words);
    again = c->begin();
  }
  auto d = messages::acquire_words(words);
  CHECK(d->begin() == again);
}
