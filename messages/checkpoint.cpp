#include "messages/checkpoint.hpp"

#include "messages/capnp_tensor.hpp"
#include "messages/crc.hpp"
#include "messages/schema/checkpoint.capnp.h"

#include <capnp/serialize.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unistd.h>

namespace salamander::messages {

namespace {

constexpr char magic[8] = {'S', 'A', 'L', 'M', 'C', 'K', 'P', 'T'};
constexpr size_t header_bytes = 32;

template <class T> void put(std::string& out, size_t at, T v) {
  std::memcpy(&out[at], &v, sizeof v);
}

template <class T> T get(const std::string& in, size_t at) {
  T v;
  std::memcpy(&v, &in[at], sizeof v);
  return v;
}

// The length of the Cap'n Proto message at `p` by its segment table (a
// count, then each segment's size in words, padded to a word), or nullopt
// when not even the table is there.
std::optional<uint64_t> message_bytes(const char* p, uint64_t n) {
  if (n < 8) {
    return std::nullopt;
  }
  uint32_t count = 0;
  std::memcpy(&count, p, sizeof count);
  uint64_t segments = uint64_t{count} + 1;
  uint64_t table = (4 + 4 * segments + 7) / 8 * 8;
  if (segments > 512 || table > n) {
    return std::nullopt;
  }
  uint64_t words = 0;
  for (uint64_t i = 0; i < segments; ++i) {
    uint32_t size = 0;
    std::memcpy(&size, p + 4 + 4 * i, sizeof size);
    words += size;
  }
  return table + 8 * words;
}

} // namespace

std::string serialize_checkpoint(const checkpoint& ckpt) {
  capnp::MallocMessageBuilder message;
  std::vector<torch::Tensor> keep;
  auto root = message.initRoot<wire::Checkpoint>();
  detail::write_snapshot(message.getOrphanage(), root.initSnapshot(), ckpt.snapshot,
                         keep);
  root.setCreatedUnixMs(ckpt.created_unix_ms);
  root.setSeed(ckpt.seed);
  root.setEpoch(ckpt.epoch);
  root.setBatchesInEpoch(ckpt.batches_in_epoch);
  root.setNote(ckpt.note);
  root.setTrainSeconds(ckpt.train_s);
  auto words = capnp::messageToFlatArray(message);
  auto body = words.asChars();
  std::string out(header_bytes + body.size(), '\0');
  std::memcpy(&out[0], magic, sizeof magic);
  put<uint32_t>(out, 8, checkpoint_format_version);
  put<uint64_t>(out, 16, body.size());
  put<uint32_t>(out, 24, crc32_of(body.begin(), body.size()));
  std::memcpy(&out[header_bytes], body.begin(), body.size());
  return out;
}

checkpoint parse_checkpoint(const std::string& bytes, const std::string& origin,
                            const std::string& expect_fingerprint, uint64_t max_bytes) {
  if (bytes.size() < header_bytes) {
    throw codec_error(origin + " is not a salamander checkpoint: " +
                      std::to_string(bytes.size()) + " bytes, shorter than the header");
  }
  if (std::memcmp(bytes.data(), magic, sizeof magic) != 0) {
    throw codec_error(origin + " is not a salamander checkpoint (bad magic)");
  }
  auto version = get<uint32_t>(bytes, 8);
  if (version != checkpoint_format_version) {
    throw codec_error(origin + " has checkpoint format " + std::to_string(version) +
                      "; this salamander reads format " +
                      std::to_string(checkpoint_format_version));
  }
  auto body_len = get<uint64_t>(bytes, 16);
  uint64_t present = bytes.size() - header_bytes;
  if (body_len != present) {
    // The body's own segment table says how long it is: it tells a file cut
    // short (or with bytes appended) from a damaged length field.
    auto own = message_bytes(bytes.data() + header_bytes, present);
    if (own && *own == present) {
      throw codec_error(
          origin + " is corrupt: its header gives the body length as " +
          std::to_string(body_len) + " bytes, but the body holds " +
          std::to_string(present) +
          " bytes, as its own segment table says (the length field is damaged)");
    }
    if (present < body_len) {
      throw codec_error(origin + " is truncated: " + std::to_string(present) + " of " +
                        std::to_string(body_len) + " body bytes present");
    }
    if (own && *own == body_len) {
      throw codec_error(origin + " has " + std::to_string(present - body_len) +
                        " bytes of trailing data after the checkpoint");
    }
    throw codec_error(origin + " is inconsistent: its header gives the body length as " +
                      std::to_string(body_len) + " bytes, the file holds " +
                      std::to_string(present) + " (trailing data, or a damaged header)");
  }
  if (body_len > max_bytes) {
    throw codec_error(origin + " has a body of " + std::to_string(body_len) +
                      " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  if (crc32_of(bytes.data() + header_bytes, body_len) != get<uint32_t>(bytes, 24)) {
    throw codec_error(origin + " fails its checksum: the file is corrupt");
  }
  auto body = frame::from_bytes(bytes.data() + header_bytes, body_len);
  return detail::guarded(origin, [&] {
    capnp::FlatArrayMessageReader reader(body.view(),
                                         detail::reader_options(body.word_count()));
    auto root = reader.getRoot<wire::Checkpoint>();
    checkpoint ckpt;
    try {
      ckpt.snapshot =
          detail::read_snapshot(root.getSnapshot(), expect_fingerprint, nullptr);
    } catch (const codec_error& e) {
      throw codec_error(origin + ": " + e.what());
    }
    ckpt.created_unix_ms = root.getCreatedUnixMs();
    ckpt.seed = root.getSeed();
    ckpt.epoch = root.getEpoch();
    ckpt.batches_in_epoch = root.getBatchesInEpoch();
    ckpt.note = root.getNote();
    ckpt.train_s = root.getTrainSeconds();
    return ckpt;
  });
}

void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::string& what) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp")).string();
  auto failed = [&](int err) {
    return codec_error("cannot write " + what + " " + path + ": " + std::strerror(err));
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw failed(errno);
  }
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw failed(err);
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw failed(err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw failed(err);
  }
}

void save_checkpoint(const std::string& path, const checkpoint& ckpt) {
  write_file_atomically(path, serialize_checkpoint(ckpt), "checkpoint");
}

checkpoint load_checkpoint(const std::string& path, const std::string& expect_fingerprint,
                           uint64_t max_bytes) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    throw codec_error("cannot read checkpoint " + path + ": " + ec.message());
  }
  if (size > max_bytes + header_bytes) {
    throw codec_error("checkpoint " + path + " is " + std::to_string(size) +
                      " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size, '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) {
    throw codec_error("cannot read checkpoint " + path);
  }
  return parse_checkpoint(bytes, "checkpoint " + path, expect_fingerprint, max_bytes);
}

} // namespace salamander::messages
