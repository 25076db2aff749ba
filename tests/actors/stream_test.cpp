// Continual learning from a stream (actors/train/stream.hpp): samples from a
// file being appended to or a TCP producer become logged batches in arrival
// order; the log is read back exactly, pruned, and carried on from by a new
// stream over the same directory; bad records end the stream with why; and a
// pipeline training on a replayed stream whose middle stage crashes ends
// with the weights of one device trained on the logged batches, every batch
// once.
#include "reference.hpp"

#include "actors/node/system.hpp"
#include "actors/train/stream.hpp"

#include <arpa/inet.h>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace salamander;
namespace fs = std::filesystem;

using salamander::testing::temp_dir;

namespace {

constexpr size_t record = 1 + 28 * 28;

/// Records whose label is i % 10 and whose pixels are all (i * 7) % 256.
std::string records(size_t from, size_t count) {
  std::string out;
  for (size_t i = from; i < from + count; ++i) {
    out.push_back(static_cast<char>(i % 10));
    out.append(28 * 28, static_cast<char>((i * 7) % 256));
  }
  return out;
}

void append(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::app) << bytes;
}

/// Waits (bounded) until the stream has `n` batches or has ended.
bool wait_arrived(actors::sample_stream& s, uint64_t n) {
  for (int i = 0; i < 3000 && s.arrived() < n && !s.ended(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return s.arrived() >= n;
}

/// Sample i's label and first pixel, as the batch holds them.
void check_sample(const models::batch& b, int64_t row, size_t i) {
  CHECK(b.y[row].item<int64_t>() == static_cast<int64_t>(i % 10));
  auto expect = models::normalise_fashion_mnist(
      torch::full({1, 28, 28}, static_cast<int64_t>((i * 7) % 256), torch::kUInt8));
  CHECK(b.x[row].equal(expect[0]));
}

} // namespace

TEST_CASE("a file stream is logged in arrival order, read back, pruned and carried on from",
          "[actor][stream]") {
  temp_dir dir;
  auto file = (dir.path() / "samples.bin").string();
  append(file, records(0, 10)); // two batches of 4 and half of the third
  actors::stream_options opts;
  opts.source = "file:" + file;
  opts.log_dir = (dir.path() / "log").string();
  opts.batch_size = 4;
  opts.keep = 1;
  {
    actors::sample_stream s(opts);
    REQUIRE(wait_arrived(s, 2));
    CHECK(s.arrived() == 2); // the third is not complete
    CHECK_FALSE(s.get(2));
    auto b1 = s.get(1);
    REQUIRE(b1);
    CHECK(b1->x.sizes() == torch::IntArrayRef({4, 1, 28, 28}));
    for (int64_t r = 0; r < 4; ++r) {
      check_sample(*b1, r, 4 + static_cast<size_t>(r));
    }
    append(file, records(10, 6)); // completes batches 2 and 3
    REQUIRE(wait_arrived(s, 4));
    check_sample(*s.get(3), 3, 15);
    CHECK(fs::exists(fs::path(opts.log_dir) / "batch-000000000000.bin"));
    s.release_below(3); // keeps 1 behind: 0 and 1 go
    CHECK_FALSE(fs::exists(fs::path(opts.log_dir) / "batch-000000000000.bin"));
    CHECK_THROWS_WITH(s.get(0), Catch::Contains("no longer in the stream log"));
    CHECK(s.get(2));
    CHECK_FALSE(s.ended());
  }
  // a new stream over the same log carries on after batch 3, from where it
  // ended in the file: no sample twice, none skipped
  append(file, records(16, 4));
  actors::sample_stream again(opts);
  CHECK(again.arrived() == 4);
  REQUIRE(wait_arrived(again, 5));
  auto b4 = again.get(4);
  REQUIRE(b4);
  for (int64_t r = 0; r < 4; ++r) {
    check_sample(*b4, r, 16 + static_cast<size_t>(r));
  }
  check_sample(*again.get(3), 0, 12); // logged by the first stream, read by this one
}

TEST_CASE("a damaged log file or a bad record is named, not trained on", "[actor][stream]") {
  temp_dir dir;
  auto file = (dir.path() / "samples.bin").string();
  append(file, records(0, 4));
  actors::stream_options opts;
  opts.source = "file:" + file;
  opts.log_dir = (dir.path() / "log").string();
  opts.batch_size = 4;
  actors::sample_stream s(opts);
  REQUIRE(wait_arrived(s, 1));
  auto logged = fs::path(opts.log_dir) / "batch-000000000000.bin";
  {
    std::fstream f(logged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  CHECK_THROWS_WITH(s.get(0), Catch::Contains("fails its checksum"));
  std::string bad = records(4, 1);
  bad[0] = 12;
  append(file, bad);
  for (int i = 0; i < 3000 && !s.ended(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(s.ended());
  CHECK_THAT(s.failure(), Catch::Contains("sample 4 has label 12, not 0..9"));

  CHECK_THROWS_WITH(actors::check_stream_source("replay:fast"),
                    Catch::Contains("RATE must be a number"));
  CHECK_THROWS_WITH(actors::check_stream_source("kafka:topic"),
                    Catch::Contains("unknown source 'kafka'"));
  // a log whose newest batch is damaged is not carried on from
  CHECK_THROWS_WITH(actors::sample_stream(opts), Catch::Contains("fails its checksum"));
  opts.log_dir = (dir.path() / "fresh").string();
  opts.source = "file:" + (dir.path() / "missing.bin").string();
  CHECK_THROWS_WITH(actors::sample_stream(opts), Catch::Contains("does not exist"));
}

TEST_CASE("a TCP producer's records become batches; the stream ends when it is idle",
          "[actor][stream]") {
  temp_dir dir;
  int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  ::getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(probe); // a free port, for the stream to listen on
  actors::stream_options opts;
  opts.source = "tcp:127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  opts.log_dir = (dir.path() / "log").string();
  opts.batch_size = 8;
  opts.idle_end_s = 1.5;
  actors::sample_stream s(opts);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  auto bytes = records(0, 20);
  for (size_t at = 0; at < bytes.size();) { // in pieces that cut records
    auto n = ::send(fd, bytes.data() + at, std::min<size_t>(1000, bytes.size() - at), 0);
    REQUIRE(n > 0);
    at += static_cast<size_t>(n);
  }
  ::close(fd);
  REQUIRE(wait_arrived(s, 2));
  check_sample(*s.get(1), 7, 15);
  for (int i = 0; i < 3000 && !s.ended(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(s.ended());
  CHECK(s.failure().empty());
  CHECK(s.arrived() == 2); // the last 4 samples never made a batch
  CHECK(s.samples() == 20);
}

TEST_CASE("training on a replayed stream survives a crashed stage, exactly",
          "[actor][stream][recovery]") {
  torch::set_num_threads(1);
  temp_dir dir;
  auto jc = salamander::testing::recovery_job(24, 4);
  jc.dataset = "fashion-mnist";
  jc.evaluate = true; // the accuracy after each epoch of the stream
  jc.max_batches = 12; // an epoch of the stream: 12 batches; two of them
  jc.epochs = 2;
  actors::stream_options so;
  so.source = "replay:20000";
  so.log_dir = (dir.path() / "log").string();
  so.batch_size = jc.batch_size;
  so.seed = 5;
  jc.stream = std::make_shared<actors::sample_stream>(so);
  auto test = std::make_shared<models::dataset>(models::load_fashion_mnist(false));
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto opts = salamander::testing::watched();
  auto sup = std::make_shared<cluster_actor>();
  bool killed = false;
  opts.on_start = [sup](cluster_actor s) { *sup = std::move(s); };
  opts.on_status = [&](const job_status& st) {
    if (killed || st.training.committed < 7 || st.phase != status_phase::training) {
      return;
    }
    caf::scoped_actor self{sys};
    self->request(*sup, std::chrono::seconds(5), kill_atom_v, uint32_t{1})
        .receive([](std::string&) {}, [](caf::error&) {});
    killed = true;
  };
  auto r = actors::run_job(sys, jc, actors::local_nodes(sys, 3, 1), test, test, opts);
  INFO("phase " << r.status.phase << ", error '" << r.status.error << "'");
  REQUIRE(r.status.phase == status_phase::finished);
  CHECK(killed);
  CHECK(r.status.pipeline.recoveries == 1);
  salamander::testing::check_lineage(r.status, 24);
  REQUIRE(r.weights);
  // one device trained on the logged batches 0..23, in order
  models::layered_model m(models::describe(models::model_spec::parse(jc.model)), jc.seed);
  models::range_executor exec(m.all(), true, true);
  auto opt = models::make_optimizer({jc.optimizer, jc.lr, jc.momentum, 0.0},
                                    m.all()->parameters());
  for (uint64_t g = 0; g < 24; ++g) {
    auto b = jc.stream->get(g);
    REQUIRE(b);
    models::train_step(exec, *opt, *b, jc.micro_batches);
  }
  auto expect = models::capture(m, nullptr, "", 24);
  CHECK(salamander::testing::max_weight_diff(*r.weights, expect) <= 1e-5);
  CHECK(r.status.test_accuracy > 0.3); // 24 batches of real data learn something
}
