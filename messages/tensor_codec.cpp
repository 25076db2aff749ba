#include "messages/tensor_codec.hpp"
#include "messages/frame_pool.hpp"

#include "messages/capnp_tensor.hpp"

#include <capnp/serialize.h>

#include <cstring>
#include <limits>
#include <mutex>

namespace salamander::messages {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian; a big-endian port must swap bytes");

namespace {

struct dtype_entry {
  torch::ScalarType torch_type;
  wire::DType wire_type;
};

constexpr dtype_entry dtype_table[] = {
    {torch::kFloat32, wire::DType::FLOAT32}, {torch::kFloat64, wire::DType::FLOAT64},
    {torch::kFloat16, wire::DType::FLOAT16}, {torch::kBFloat16, wire::DType::BFLOAT16},
    {torch::kInt64, wire::DType::INT64},     {torch::kInt32, wire::DType::INT32},
    {torch::kInt16, wire::DType::INT16},     {torch::kInt8, wire::DType::INT8},
    {torch::kUInt8, wire::DType::UINT8},     {torch::kBool, wire::DType::BOOL},
};

wire::DType to_wire(torch::ScalarType t) {
  for (auto& e : dtype_table) {
    if (e.torch_type == t) {
      return e.wire_type;
    }
  }
  throw codec_error("tensors of dtype " + std::string(c10::toString(t)) +
                    " cannot be sent; supported: float32, float64, float16, bfloat16, int64, "
                    "int32, int16, int8, uint8, bool");
}

torch::ScalarType from_wire(wire::DType t, const std::string& what) {
  for (auto& e : dtype_table) {
    if (e.wire_type == t) {
      return e.torch_type;
    }
  }
  throw codec_error(what + " has unknown dtype code " + std::to_string(static_cast<int>(t)));
}

constexpr size_t max_rank = 16;

} // namespace

frame::frame(kj::Array<capnp::word> words)
    : words_(std::make_shared<kj::Array<capnp::word>>(kj::mv(words))), size_(words_->size()) {}

frame::frame(std::shared_ptr<kj::Array<capnp::word>> storage, size_t words)
    : words_(std::move(storage)), size_(words) {
  if (!words_ || words_->size() < size_) {
    throw std::logic_error("frame larger than its storage");
  }
}

std::shared_ptr<kj::Array<capnp::word>> frame::release_if_unique() {
  if (!words_ || words_.use_count() != 1) {
    return nullptr;
  }
  size_ = 0;
  return std::move(words_);
}

frame frame::from_bytes(const void* data, size_t size) {
  if (size % sizeof(capnp::word) != 0) {
    throw codec_error("message of " + std::to_string(size) +
                      " bytes is not a whole number of 8-byte words (truncated?)");
  }
  if (size > max_frame_bytes) {
    throw codec_error("message of " + std::to_string(size) + " bytes exceeds the limit of " +
                      std::to_string(max_frame_bytes));
  }
  auto words = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  if (size > 0) {
    std::memcpy(words.begin(), data, size);
  }
  return frame(kj::mv(words));
}

namespace {

struct word_pool {
  static constexpr size_t min_pooled_words = (size_t{256} << 10) / sizeof(capnp::word);
  static constexpr size_t max_buffers = 8;
  std::mutex mutex;
  std::vector<kj::Array<capnp::word>> free;
};

word_pool& pool() {
  static auto* p = new word_pool; // never destroyed: deleters may run at exit
  return *p;
}

} // namespace

std::shared_ptr<kj::Array<capnp::word>> acquire_words(size_t words) {
  if (words < word_pool::min_pooled_words) {
    return std::make_shared<kj::Array<capnp::word>>(kj::heapArray<capnp::word>(words));
  }
  auto& p = pool();
  kj::Array<capnp::word> array;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    size_t best = p.free.size();
    for (size_t i = 0; i < p.free.size(); ++i) {
      size_t have = p.free[i].size();
      if (have >= words && have <= 2 * words &&
          (best == p.free.size() || have < p.free[best].size())) {
        best = i;
      }
    }
    if (best < p.free.size()) {
      array = kj::mv(p.free[best]);
      p.free.erase(p.free.begin() + static_cast<std::ptrdiff_t>(best));
    }
  }
  if (array == nullptr) {
    array = kj::heapArray<capnp::word>(words);
  }
  return std::shared_ptr<kj::Array<capnp::word>>(
      new kj::Array<capnp::word>(kj::mv(array)), [](kj::Array<capnp::word>* a) {
        auto& p = pool();
        {
          std::lock_guard<std::mutex> lock(p.mutex);
          if (p.free.size() < word_pool::max_buffers) {
            p.free.push_back(kj::mv(*a));
          } else {
            p.free.erase(p.free.begin());
            p.free.push_back(kj::mv(*a));
          }
        }
        delete a;
      });
}

size_t release_frame_pool() {
  std::vector<kj::Array<capnp::word>> freed;
  {
    std::lock_guard<std::mutex> lock(pool().mutex);
    freed.swap(pool().free);
  }
  size_t bytes = 0;
  for (auto& a : freed) {
    bytes += a.size() * sizeof(capnp::word);
  }
  return bytes; // (freed outside the lock)
}

std::vector<torch::ScalarType> supported_dtypes() {
  std::vector<torch::ScalarType> out;
  for (auto& e : dtype_table) {
    out.push_back(e.torch_type);
  }
  return out;
}

namespace detail {

capnp::ReaderOptions reader_options(size_t words) {
  capnp::ReaderOptions opts;
  // Each word can be visited a bounded number of times by our readers; the
  // default 64 MiB limit would reject a legitimate 100 MB snapshot.
  uint64_t limit = static_cast<uint64_t>(words) * 4 + 1024;
  opts.traversalLimitInWords = limit;
  return opts;
}

void write_tensor(capnp::Orphanage orphanage, wire::Tensor::Builder b, const torch::Tensor& t,
                  std::vector<torch::Tensor>& keep) {
  auto c = t.detach().to(torch::kCPU).contiguous();
  b.setDtype(to_wire(c.scalar_type()));
  auto shape = b.initShape(static_cast<unsigned>(c.dim()));
  for (int64_t i = 0; i < c.dim(); ++i) {
    shape.set(static_cast<unsigned>(i), c.size(i));
  }
  // Cap'n Proto references external data in whole, aligned words: it would
  // read up to 7 bytes past a tensor whose size is not a multiple of 8 (a
  // heap over-read ASan found in fuzz/tensor_fuzz.cpp's round trip), and
  // refuses a misaligned one. Such a chunk is copied into the message; a
  // large one only in its last partial word.
  struct piece {
    const kj::byte* p;
    size_t len;
    bool reference;
  };
  constexpr size_t copy_whole_below = size_t{1} << 20;
  std::vector<piece> pieces;
  size_t total = c.nbytes();
  auto* base = static_cast<const kj::byte*>(c.data_ptr());
  for (size_t off = 0; off < total; off += max_chunk_bytes) {
    const kj::byte* p = base + off;
    size_t len = std::min(max_chunk_bytes, total - off);
    bool aligned = reinterpret_cast<uintptr_t>(p) % sizeof(capnp::word) == 0;
    size_t whole = len / sizeof(capnp::word) * sizeof(capnp::word);
    if (aligned && whole == len) {
      pieces.push_back({p, len, true});
    } else if (aligned && len >= copy_whole_below) {
      pieces.push_back({p, whole, true});
      pieces.push_back({p + whole, len - whole, false});
    } else {
      pieces.push_back({p, len, false});
    }
  }
  auto chunks = b.initChunks(static_cast<unsigned>(pieces.size()));
  for (unsigned i = 0; i < pieces.size(); ++i) {
    capnp::Data::Reader bytes(pieces[i].p, pieces[i].len);
    if (pieces[i].reference) {
      chunks.adopt(i, orphanage.referenceExternalData(bytes));
    } else {
      chunks.set(i, bytes);
    }
  }
  keep.push_back(std::move(c));
}

torch::Tensor read_tensor(wire::Tensor::Reader r, const std::shared_ptr<const void>& alias_owner,
                          const std::string& what) {
  auto dtype = from_wire(r.getDtype(), what);
  auto shape_r = r.getShape();
  if (shape_r.size() > max_rank) {
    throw codec_error(what + " has rank " + std::to_string(shape_r.size()) +
                      ", more than the supported " + std::to_string(max_rank));
  }
  std::vector<int64_t> shape;
  uint64_t numel = 1;
  for (unsigned i = 0; i < shape_r.size(); ++i) {
    int64_t d = shape_r[i];
    if (d < 0) {
      throw codec_error(what + " has a negative dimension " + std::to_string(d));
    }
    if (d > 0 && numel > (uint64_t{1} << 62) / static_cast<uint64_t>(d)) {
      throw codec_error(what + " has a shape whose size overflows");
    }
    numel *= static_cast<uint64_t>(d);
    shape.push_back(d);
  }
  // (numel may be up to 2^62: times the element size it can wrap round to
  // the 0 bytes an empty chunk list carries: fuzz/regressions/tensor/)
  if (numel > max_frame_bytes / c10::elementSize(dtype)) {
    throw codec_error(what + " of shape " + models::to_string(shape) + " and dtype " +
                      std::string(c10::toString(dtype)) + " claims more than " +
                      std::to_string(max_frame_bytes) + " bytes");
  }
  uint64_t expect = numel * c10::elementSize(dtype);
  auto chunks = r.getChunks();
  uint64_t have = 0;
  for (unsigned i = 0; i < chunks.size(); ++i) {
    have += chunks[i].size();
  }
  if (have != expect) {
    throw codec_error(what + " of shape " + models::to_string(shape) + " and dtype " +
                      std::string(c10::toString(dtype)) + " needs " + std::to_string(expect) +
                      " bytes but carries " + std::to_string(have));
  }
  auto options = torch::TensorOptions().dtype(dtype);
  if (alias_owner && chunks.size() == 1) {
    auto* p = const_cast<kj::byte*>(chunks[0].begin());
    if (reinterpret_cast<uintptr_t>(p) % c10::elementSize(dtype) == 0) {
      auto owner = alias_owner;
      return torch::from_blob(
          p, shape, [owner](void*) {}, options);
    }
  }
  auto t = torch::empty(shape, options);
  auto* dst = static_cast<kj::byte*>(t.data_ptr());
  for (unsigned i = 0; i < chunks.size(); ++i) {
    // one access per chunk: every chunks[i] counts the chunk's size against
    // the reader's traversal limit (4 times the frame's words)
    auto chunk = chunks[i];
    if (chunk.size() > 0) { // (an empty tensor's data_ptr is null: memcpy(null, ., 0) is UB)
      std::memcpy(dst, chunk.begin(), chunk.size());
      dst += chunk.size();
    }
  }
  return t;
}

namespace {

void write_named(capnp::Orphanage orphanage,
                 capnp::List<wire::NamedTensor>::Builder list,
                 const std::vector<models::named_tensor>& tensors,
                 std::vector<torch::Tensor>& keep) {
  for (unsigned i = 0; i < tensors.size(); ++i) {
    list[i].setName(tensors[i].name);
    write_tensor(orphanage, list[i].initTensor(), tensors[i].tensor, keep);
  }
}

std::vector<models::named_tensor> read_named(capnp::List<wire::NamedTensor>::Reader list,
                                             const std::shared_ptr<const void>& owner,
                                             const std::string& where) {
  std::vector<models::named_tensor> out;
  for (unsigned i = 0; i < list.size(); ++i) {
    std::string name = list[i].getName();
    if (name.empty()) {
      throw codec_error(where + " has a tensor with no name");
    }
    out.push_back({name, read_tensor(list[i].getTensor(), owner, where + " tensor " + name)});
  }
  return out;
}

} // namespace

void write_snapshot(capnp::Orphanage orphanage, wire::WeightSnapshot::Builder b,
                    const models::weight_snapshot& snap, std::vector<torch::Tensor>& keep) {
  b.setFingerprint(snap.fingerprint);
  b.setModel(snap.model);
  b.setVersion(snap.version);
  b.setOptimizer(snap.optimizer);
  auto layers = b.initLayers(static_cast<unsigned>(snap.layers.size()));
  for (unsigned i = 0; i < snap.layers.size(); ++i) {
    auto& lw = snap.layers[i];
    auto l = layers[i];
    l.setIndex(lw.index);
    l.setName(lw.name);
    write_named(orphanage, l.initParams(static_cast<unsigned>(lw.params.size())), lw.params,
                keep);
    write_named(orphanage, l.initBuffers(static_cast<unsigned>(lw.buffers.size())), lw.buffers,
                keep);
    write_named(orphanage,
                l.initOptimizerState(static_cast<unsigned>(lw.optimizer_state.size())),
                lw.optimizer_state, keep);
    write_named(orphanage, l.initStashed(static_cast<unsigned>(lw.stashed.size())),
                lw.stashed, keep);
  }
}

models::weight_snapshot read_snapshot(wire::WeightSnapshot::Reader r,
                                      const std::string& expect_fingerprint,
                                      const std::shared_ptr<const void>& owner) {
  models::weight_snapshot snap;
  snap.fingerprint = r.getFingerprint();
  snap.model = r.getModel();
  if (!expect_fingerprint.empty() && snap.fingerprint != expect_fingerprint) {
    throw codec_error("weights are for model " + snap.model + " (fingerprint " +
                      snap.fingerprint + "), expected fingerprint " + expect_fingerprint);
  }
  snap.version = r.getVersion();
  snap.optimizer = r.getOptimizer();
  auto layers = r.getLayers();
  for (unsigned i = 0; i < layers.size(); ++i) {
    models::layer_weights lw;
    lw.index = layers[i].getIndex();
    lw.name = layers[i].getName();
    std::string where = "layer " + std::to_string(lw.index) + " (" + lw.name + ")";
    lw.params = read_named(layers[i].getParams(), owner, where);
    lw.buffers = read_named(layers[i].getBuffers(), owner, where);
    lw.optimizer_state = read_named(layers[i].getOptimizerState(), owner, where);
    lw.stashed = read_named(layers[i].getStashed(), owner, where);
    snap.layers.push_back(std::move(lw));
  }
  return snap;
}

} // namespace detail

struct outgoing::impl {
  capnp::MallocMessageBuilder message;
  std::vector<torch::Tensor> keep;
};

outgoing::outgoing() : impl_(std::make_unique<impl>()) {}
outgoing::outgoing(outgoing&&) noexcept = default;
outgoing& outgoing::operator=(outgoing&&) noexcept = default;
outgoing::~outgoing() = default;

size_t outgoing::byte_size() const {
  return capnp::computeSerializedSizeInWords(impl_->message) * sizeof(capnp::word);
}

void outgoing::write(const sink& out) const {
  // The flat-array format of capnp/serialize.h: a table (segment count - 1,
  // then each segment's size in words, padded to a word), then the segments.
  auto segments = impl_->message.getSegmentsForOutput();
  std::vector<uint32_t> table(segments.size() + 1 + (segments.size() + 1) % 2, 0);
  table[0] = static_cast<uint32_t>(segments.size() - 1);
  for (size_t i = 0; i < segments.size(); ++i) {
    table[i + 1] = static_cast<uint32_t>(segments[i].size());
  }
  out(table.data(), table.size() * sizeof(uint32_t));
  for (auto& seg : segments) {
    if (seg.size() > 0) {
      out(seg.begin(), seg.size() * sizeof(capnp::word));
    }
  }
}

outgoing prepare_tensor(const torch::Tensor& t) {
  outgoing o;
  auto& m = o.impl_->message;
  detail::write_tensor(m.getOrphanage(), m.initRoot<wire::Tensor>(), t, o.impl_->keep);
  return o;
}

outgoing prepare_snapshot(const models::weight_snapshot& snap) {
  outgoing o;
  auto& m = o.impl_->message;
  detail::write_snapshot(m.getOrphanage(), m.initRoot<wire::WeightSnapshot>(), snap,
                         o.impl_->keep);
  return o;
}

frame encode_tensor(const torch::Tensor& t, frame reuse) {
  capnp::MallocMessageBuilder message;
  std::vector<torch::Tensor> keep;
  detail::write_tensor(message.getOrphanage(), message.initRoot<wire::Tensor>(), t, keep);
  size_t words = capnp::computeSerializedSizeInWords(message);
  auto storage = reuse.release_if_unique();
  if (!storage || storage->size() < words) {
    return frame(capnp::messageToFlatArray(message));
  }
  kj::ArrayOutputStream out(storage->asBytes());
  capnp::writeMessage(out, message);
  return frame(std::move(storage), words);
}

torch::Tensor decode_tensor(const frame& f, decode_mode mode) {
  return detail::guarded("tensor message", [&] {
    capnp::FlatArrayMessageReader reader(f.view(), detail::reader_options(f.word_count()));
    auto owner = mode == decode_mode::alias ? f.keep_alive() : nullptr;
    return detail::read_tensor(reader.getRoot<wire::Tensor>(), owner, "tensor");
  });
}

frame encode_snapshot(const models::weight_snapshot& snap) {
  capnp::MallocMessageBuilder message;
  std::vector<torch::Tensor> keep;
  detail::write_snapshot(message.getOrphanage(), message.initRoot<wire::WeightSnapshot>(), snap,
                         keep);
  return frame(capnp::messageToFlatArray(message));
}

models::weight_snapshot decode_snapshot(const frame& f, const std::string& expect_fingerprint,
                                        decode_mode mode) {
  return detail::guarded("weight snapshot", [&] {
    capnp::FlatArrayMessageReader reader(f.view(), detail::reader_options(f.word_count()));
    auto owner = mode == decode_mode::alias ? f.keep_alive() : nullptr;
    return detail::read_snapshot(reader.getRoot<wire::WeightSnapshot>(), expect_fingerprint,
                                 owner);
  });
}

} // namespace salamander::messages
