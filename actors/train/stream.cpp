#include "actors/train/stream.hpp"

#include "actors/train/stream_format.hpp"
#include "algorithms/sampling.hpp"
#include "messages/checkpoint.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace salamander::actors {

namespace {

namespace fs = std::filesystem;
using models::data_error;

using stream_format::header_bytes;
using stream_format::sample_bytes;
using stream_format::side;
using stream_format::classes;

/// Checks a log file's header and checksum; throws data_error naming it.
stream_format::log_header check_log(const std::string& path, const std::string& bytes) {
  try {
    return stream_format::check_log(path, bytes);
  } catch (const stream_format::log_error& e) {
    throw data_error(e.what());
  }
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw data_error("stream log " + path + " cannot be read");
  }
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

} // namespace

void check_stream_source(const std::string& source) {
  stream_format::parse_source(source);
}

sample_stream::sample_stream(stream_options opts) : opts_(std::move(opts)) {
  auto src = stream_format::parse_source(opts_.source);
  if (opts_.batch_size <= 0) {
    throw std::invalid_argument("a stream needs a batch size above 0");
  }
  record_bytes_ = stream_format::record_bytes;
  std::error_code ec;
  fs::create_directories(opts_.log_dir, ec);
  if (ec) {
    throw data_error("cannot create the stream log " + opts_.log_dir + ": " + ec.message());
  }
  // carry on from the batches a previous run logged
  uint64_t lowest = UINT64_MAX;
  uint64_t highest = 0;
  bool any = false;
  for (auto& e : fs::directory_iterator(opts_.log_dir)) {
    auto number = stream_format::log_number(e.path().filename().string());
    if (!number) {
      continue;
    }
    uint64_t g = *number;
    lowest = std::min(lowest, g);
    highest = std::max(highest, g);
    any = true;
  }
  if (any) {
    auto path = batch_path(highest);
    auto h = check_log(path, read_all(path));
    if (h.samples != static_cast<uint32_t>(opts_.batch_size)) {
      throw data_error("stream log " + opts_.log_dir + " holds batches of " +
                       std::to_string(h.samples) + " samples, not --batch-size " +
                       std::to_string(opts_.batch_size) + " (give another log directory)");
    }
    arrived_ = highest + 1;
    deleted_below_ = lowest;
    resume_position_ = h.position;
    samples_ = arrived_ * static_cast<uint64_t>(opts_.batch_size);
  }
  position_ = resume_position_;
  if (src.kind == "file" && !fs::exists(src.path)) {
    throw std::invalid_argument("--stream " + opts_.source + ": " + src.path +
                                " does not exist (create it, then append records to it)");
  }
  if (src.kind == "tcp") {
    // bind now: a port in use is said at once, not from the reader thread
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(src.port);
    if (::inet_pton(AF_INET, src.host == "localhost" ? "127.0.0.1" : src.host.c_str(),
                    &addr.sin_addr) != 1 ||
        ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 1) != 0) {
      int err = errno;
      ::close(listen_fd_);
      listen_fd_ = -1;
      throw std::invalid_argument("--stream " + opts_.source + ": cannot listen there: " +
                                  std::strerror(err));
    }
  }
  thread_ = std::thread([this] { run(); });
}

sample_stream::~sample_stream() {
  stop_ = true;
  wake_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
  }
}

std::string sample_stream::failure() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return failure_;
}

std::string sample_stream::batch_path(uint64_t g) const {
  return (fs::path(opts_.log_dir) / stream_format::log_name(g)).string();
}

void sample_stream::wait_for(double seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return stopping(); });
}

void sample_stream::run() {
  try {
    auto src = stream_format::parse_source(opts_.source);
    if (src.kind == "replay") {
      read_replay(src.rate);
    } else if (src.kind == "file") {
      read_file(src.path);
    } else {
      read_tcp(src.host, src.port);
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> guard(mutex_);
    failure_ = e.what();
  }
  ended_ = true;
}

void sample_stream::take(const unsigned char* data, size_t n, uint64_t position) {
  pending_.append(reinterpret_cast<const char*>(data), n);
  size_t whole = pending_.size() / record_bytes_;
  for (; checked_ < whole; ++checked_) {
    auto label = static_cast<unsigned char>(pending_[checked_ * record_bytes_]);
    if (label >= classes) {
      throw data_error("stream " + opts_.source + ": sample " +
                       std::to_string(arrived_.load() * static_cast<uint64_t>(opts_.batch_size) +
                                      checked_) +
                       " has label " + std::to_string(label) + ", not 0..9");
    }
  }
  auto batch = static_cast<size_t>(opts_.batch_size);
  uint64_t start = position - pending_.size(); // source position of pending_[0]
  while (checked_ >= batch) {
    position_ = start + batch * record_bytes_;
    log_batch();
    pending_.erase(0, batch * record_bytes_);
    checked_ -= batch;
    start = position_;
  }
  samples_ = arrived_.load() * static_cast<uint64_t>(opts_.batch_size) + checked_;
}

void sample_stream::log_batch() {
  auto n = static_cast<size_t>(opts_.batch_size);
  std::string body;
  body.reserve(n * record_bytes_);
  for (size_t r = 0; r < n; ++r) {
    body.push_back(pending_[r * record_bytes_]);
  }
  for (size_t r = 0; r < n; ++r) {
    body.append(pending_, r * record_bytes_ + 1, sample_bytes);
  }
  uint64_t g = arrived_.load();
  auto file = stream_format::encode_log(g, static_cast<uint32_t>(n), position_, body);
  messages::write_file_atomically(batch_path(g), file, "stream log");
  arrived_ = g + 1; // only now may training ask for it
}

std::optional<models::batch> sample_stream::get(uint64_t g) {
  if (g >= arrived_.load()) {
    return std::nullopt;
  }
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (g < deleted_below_) {
      throw data_error("batch " + std::to_string(g) + " is no longer in the stream log " +
                       opts_.log_dir + " (it keeps " + std::to_string(opts_.keep) +
                       " batches behind the oldest still needed)");
    }
  }
  auto path = batch_path(g);
  auto bytes = read_all(path);
  auto h = check_log(path, bytes);
  auto n = static_cast<int64_t>(h.samples);
  auto labels = torch::empty({n}, torch::kUInt8);
  std::memcpy(labels.data_ptr(), bytes.data() + header_bytes, static_cast<size_t>(n));
  auto pixels = torch::empty({n, side, side}, torch::kUInt8);
  std::memcpy(pixels.data_ptr(), bytes.data() + header_bytes + static_cast<size_t>(n),
              static_cast<size_t>(n) * sample_bytes);
  return models::batch{models::normalise_fashion_mnist(pixels), labels.to(torch::kInt64)};
}

void sample_stream::release_below(uint64_t g) {
  if (g <= opts_.keep) {
    return;
  }
  uint64_t below = g - opts_.keep;
  std::lock_guard<std::mutex> guard(mutex_);
  for (; deleted_below_ < below && deleted_below_ < arrived_.load(); ++deleted_below_) {
    std::error_code ec;
    fs::remove(batch_path(deleted_below_), ec);
  }
}

// Fashion-MNIST's training split, pass p in the order of a permutation seeded
// by (seed, p); sample k of the stream is pass k / N, position k % N. Each
// sample is released at start + k / rate.
void sample_stream::read_replay(double rate) {
  auto raw = models::read_fashion_mnist_bytes(true, opts_.data_dir);
  auto images = raw.x.contiguous();
  auto labels = raw.y.contiguous();
  auto n = static_cast<uint64_t>(labels.size(0));
  auto* pix = images.data_ptr<uint8_t>();
  auto* lab = labels.data_ptr<uint8_t>();
  uint64_t k = resume_position_ / record_bytes_;
  uint64_t first = k;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int64_t> order;
  uint64_t order_pass = UINT64_MAX;
  std::string chunk;
  while (!stopping()) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto due = first + static_cast<uint64_t>(elapsed * rate);
    chunk.clear();
    for (; k < due && chunk.size() < (1u << 20); ++k) {
      uint64_t pass = k / n;
      if (pass != order_pass) {
        auto gen = at::detail::createCPUGenerator(algorithms::mix_seed(opts_.seed, pass, 0x57e));
        auto perm = at::randperm(static_cast<int64_t>(n), gen, torch::kInt64);
        order.assign(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + n);
        order_pass = pass;
      }
      auto i = static_cast<size_t>(order[k % n]);
      chunk.push_back(static_cast<char>(lab[i]));
      chunk.append(reinterpret_cast<const char*>(pix + i * sample_bytes), sample_bytes);
    }
    if (!chunk.empty()) {
      take(reinterpret_cast<const unsigned char*>(chunk.data()), chunk.size(),
           k * record_bytes_);
    } else {
      wait_for(std::min(0.05, 1.0 / rate));
    }
  }
}

void sample_stream::read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw data_error("stream file " + path + " cannot be read");
  }
  in.seekg(static_cast<std::streamoff>(resume_position_));
  uint64_t pos = resume_position_;
  std::vector<char> buf(1 << 16);
  auto last_data = std::chrono::steady_clock::now();
  while (!stopping()) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    auto got = static_cast<size_t>(in.gcount());
    if (got > 0) {
      pos += got;
      take(reinterpret_cast<const unsigned char*>(buf.data()), got, pos);
      last_data = std::chrono::steady_clock::now();
    }
    if (in.eof()) {
      in.clear(); // the writer may append more
      if (opts_.idle_end_s > 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - last_data).count() >
              opts_.idle_end_s) {
        return; // the stream ended
      }
      if (got == 0) {
        wait_for(0.02);
      }
    } else if (!in) {
      throw data_error("stream file " + path + " cannot be read further");
    }
  }
}

void sample_stream::read_tcp(const std::string&, uint16_t) {
  uint64_t pos = resume_position_;
  std::vector<unsigned char> buf(1 << 16);
  auto last_data = std::chrono::steady_clock::now();
  auto idle_over = [&] {
    return opts_.idle_end_s > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - last_data)
                   .count() > opts_.idle_end_s;
  };
  while (!stopping() && !idle_over()) {
    pollfd accept_poll{listen_fd_, POLLIN, 0};
    if (::poll(&accept_poll, 1, 50) <= 0) {
      continue;
    }
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      continue;
    }
    while (!stopping() && !idle_over()) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) {
        continue;
      }
      ssize_t got = ::recv(fd, buf.data(), buf.size(), 0);
      if (got <= 0) {
        break; // the producer left: wait for the next one
      }
      pos += static_cast<uint64_t>(got);
      take(buf.data(), static_cast<size_t>(got), pos);
      last_data = std::chrono::steady_clock::now();
    }
    ::close(fd);
  }
}

} // namespace salamander::actors
