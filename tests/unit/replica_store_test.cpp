// The store replica holders and stages keep their copies in
// (actors/replication/replica_store.hpp).
#include "../support.hpp"

#include "actors/replication/replica_store.hpp"

#include <thread>

using namespace salamander;

namespace {

// A snapshot of `layers` layers at `version`; each parameter is filled with
// the version, so a served copy shows which one it is.
models::weight_snapshot snapshot_at(uint64_t version, uint32_t first, uint32_t layers) {
  models::weight_snapshot s;
  s.fingerprint = "fp";
  s.model = "mlp";
  s.optimizer = "sgd";
  s.version = version;
  for (uint32_t l = first; l < first + layers; ++l) {
    models::layer_weights w;
    w.index = l;
    w.name = "fc" + std::to_string(l);
    w.params.push_back({"weight", torch::full({2}, static_cast<double>(version))});
    s.layers.push_back(std::move(w));
  }
  return s;
}

} // namespace

TEST_CASE("the replica store keeps the last versions of each layer and serves ranges",
          "[unit][replication]") {
  actors::replica_store store(2);
  store.add(snapshot_at(2, 0, 3));
  store.add(snapshot_at(4, 0, 3));
  store.add(snapshot_at(6, 1, 2)); // layers 1-2 only: layer 0 keeps 2 and 4
  auto inv = store.inventory();
  std::vector<std::pair<uint64_t, uint64_t>> held;
  for (size_t i = 0; i < inv.layers.size(); ++i) {
    held.emplace_back(inv.layers[i], inv.versions[i]);
  }
  std::vector<std::pair<uint64_t, uint64_t>> expect = {{0, 2}, {0, 4}, {1, 4},
                                                       {1, 6}, {2, 4}, {2, 6}};
  CHECK(held == expect);
  auto got = store.get(0, 3, 4);
  REQUIRE(got.snapshot);
  CHECK(got.snapshot->version == 4);
  CHECK(got.snapshot->fingerprint == "fp");
  REQUIRE(got.snapshot->layers.size() == 3);
  CHECK(got.snapshot->layers[2].index == 2);
  CHECK(got.snapshot->layers[1].params[0].tensor[0].item<double>() == 4.0);
}

TEST_CASE("the replica store names the first layer it does not hold",
          "[unit][replication]") {
  actors::replica_store store(2);
  store.add(snapshot_at(2, 0, 2));
  store.add(snapshot_at(4, 1, 1));
  store.add(snapshot_at(6, 1, 1)); // layer 1 at 2 is dropped
  auto got = store.get(0, 2, 2);
  CHECK_FALSE(got.snapshot);
  CHECK(got.missing == 1);
  CHECK(store.get(0, 3, 6).missing == 0);
  CHECK_FALSE(store.get(5, 6, 6).snapshot);
  CHECK(store.get(5, 6, 6).missing == 5);
}

namespace {

// A snapshot with random weights and optimizer state, as a stage sends.
models::weight_snapshot random_snapshot(uint64_t version) {
  auto s = snapshot_at(version, 0, 3);
  s.optimizer = "adam";
  for (auto& l : s.layers) {
    l.params[0].tensor = torch::randn({64, 33});
    l.buffers.push_back({"running_mean", torch::randn({33})});
    l.optimizer_state.push_back({"exp_avg", torch::randn({64, 33})});
  }
  return s;
}

void check_same(const models::weight_snapshot& a, const models::weight_snapshot& b) {
  CHECK(a.fingerprint == b.fingerprint);
  CHECK(a.model == b.model);
  CHECK(a.optimizer == b.optimizer);
  CHECK(a.version == b.version);
  REQUIRE(a.layers.size() == b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    CHECK(a.layers[i].index == b.layers[i].index);
    CHECK(a.layers[i].name == b.layers[i].name);
    CHECK(torch::equal(a.layers[i].params[0].tensor, b.layers[i].params[0].tensor));
    CHECK(torch::equal(a.layers[i].buffers[0].tensor, b.layers[i].buffers[0].tensor));
    CHECK(torch::equal(a.layers[i].optimizer_state[0].tensor,
                       b.layers[i].optimizer_state[0].tensor));
  }
}

// A random snapshot at `version` and its parts of at most `part_bytes`.
struct in_parts {
  models::weight_snapshot snap;
  std::vector<torch::Tensor> parts;
  uint64_t total = 0;

  in_parts(uint64_t version, size_t part_bytes)
      : snap(random_snapshot(version)), parts(actors::snapshot_parts(snap, part_bytes)) {
    total = offset(parts.size());
  }
  /// where part i starts (i = parts.size(): the end)
  uint64_t offset(size_t i) const {
    uint64_t n = 0;
    for (size_t j = 0; j < i; ++j) {
      n += static_cast<uint64_t>(parts[j].numel());
    }
    return n;
  }
  /// part i of transfer `transfer` from `from`, into `in`
  std::optional<models::weight_snapshot> send(actors::snapshot_assembler& in,
                                              const std::string& from, uint64_t transfer,
                                              size_t i) const {
    return in.add(from, transfer, offset(i), total, parts[i]);
  }
};

} // namespace

TEST_CASE("a snapshot sent in parts is put back together exactly",
          "[unit][replication]") {
  torch::manual_seed(3);
  in_parts s(12, 1006);
  // 1006 rounds down to whole words; every part but the last is that long
  REQUIRE(s.parts.size() == (s.total + 999) / 1000);
  for (size_t i = 0; i + 1 < s.parts.size(); ++i) {
    CHECK(s.parts[i].numel() == 1000);
  }
  CHECK(s.total == messages::encode_snapshot(s.snap).byte_size());
  actors::snapshot_assembler in(4);
  std::optional<models::weight_snapshot> got;
  for (size_t i = 0; i < s.parts.size(); ++i) {
    got = s.send(in, "stage0", 1, i);
    if (i + 1 < s.parts.size()) {
      REQUIRE_FALSE(got);
      CHECK(in.pending() == 1);
    }
  }
  REQUIRE(got);
  CHECK(in.pending() == 0);
  CHECK(in.last().bytes == s.total);
  CHECK(in.last().parts == s.parts.size());
  check_same(*got, s.snap);
  // one part is the whole snapshot when it is small enough
  CHECK(actors::snapshot_parts(s.snap, 1 << 30).size() == 1);
}

TEST_CASE("a snapshot's encoding is made once, by whichever thread asks first, and is "
          "the snapshot's parts",
          "[unit][replication]") {
  torch::manual_seed(9);
  in_parts s(3, 4096);
  auto enc = std::make_shared<const actors::snapshot_encoding>(s.snap, 4096);
  std::vector<const std::vector<torch::Tensor>*> seen(4);
  std::vector<std::thread> askers;
  for (size_t i = 0; i < seen.size(); ++i) {
    askers.emplace_back([&, i] { seen[i] = &enc->parts(); });
  }
  for (auto& t : askers) {
    t.join();
  }
  for (auto* p : seen) {
    CHECK(p == seen[0]); // one encoding, shared
  }
  REQUIRE(seen[0]->size() == s.parts.size());
  for (size_t i = 0; i < s.parts.size(); ++i) {
    CHECK(torch::equal((*seen[0])[i], s.parts[i]));
  }
  actors::snapshot_assembler in(4);
  std::optional<models::weight_snapshot> got;
  uint64_t offset = 0;
  for (auto& part : *seen[0]) {
    got = in.add("stage0", 1, offset, s.total, part);
    offset += static_cast<uint64_t>(part.numel());
  }
  REQUIRE(got);
  check_same(*got, s.snap);
  // parts at hand are taken as they are
  actors::snapshot_encoding ready(s.parts);
  CHECK(ready.parts().size() == s.parts.size());
  CHECK(ready.parts()[0].data_ptr() == s.parts[0].data_ptr());
}

TEST_CASE("snapshots in parts from several senders at once are kept apart",
          "[unit][replication]") {
  torch::manual_seed(4);
  in_parts a(5, 4096), b(6, 4096);
  actors::snapshot_assembler in(4);
  std::optional<models::weight_snapshot> ga, gb;
  for (size_t i = 0; i < std::max(a.parts.size(), b.parts.size()); ++i) {
    if (i < a.parts.size()) {
      ga = a.send(in, "stage0", 7, i);
    }
    if (i < b.parts.size()) {
      // the same transfer id from another sender is another transfer
      gb = b.send(in, "stage1", 7, i);
    }
  }
  REQUIRE(ga);
  REQUIRE(gb);
  check_same(*ga, a.snap);
  check_same(*gb, b.snap);
}

TEST_CASE("a part that does not continue its transfer drops it", "[unit][replication]") {
  torch::manual_seed(5);
  in_parts s(2, 2048);
  auto& parts = s.parts;
  auto total = s.total;
  REQUIRE(parts.size() >= 3);
  auto first = s.offset(1);
  actors::snapshot_assembler in(4);
  SECTION("a part skipped") {
    REQUIRE_FALSE(s.send(in, "s", 1, 0));
    CHECK_THROWS_AS(s.send(in, "s", 1, 2), messages::codec_error);
    CHECK(in.pending() == 0);
    // what comes after it belongs to no transfer
    CHECK_THROWS_AS(s.send(in, "s", 1, 1), messages::codec_error);
  }
  SECTION("another total") {
    REQUIRE_FALSE(s.send(in, "s", 1, 0));
    CHECK_THROWS_AS(in.add("s", 1, first, total + 8, parts[1]), messages::codec_error);
    CHECK(in.pending() == 0);
  }
  SECTION("a total no frame can have") {
    CHECK_THROWS_AS(in.add("s", 1, 0, total + 3, parts[0]), messages::codec_error);
    CHECK_THROWS_AS(in.add("s", 1, 0, 0, parts[0]), messages::codec_error);
    CHECK(in.pending() == 0);
  }
  SECTION("not bytes") {
    CHECK_THROWS_AS(in.add("s", 1, 0, total, torch::zeros({8})), messages::codec_error);
  }
  SECTION("corrupt bytes") {
    auto bad = s;
    for (auto& p : bad.parts) {
      p = torch::full_like(p, 0xff);
    }
    for (size_t i = 0; i + 1 < bad.parts.size(); ++i) {
      REQUIRE_FALSE(bad.send(in, "s", 1, i));
    }
    CHECK_THROWS_AS(bad.send(in, "s", 1, bad.parts.size() - 1), messages::codec_error);
    CHECK(in.pending() == 0);
  }
}

TEST_CASE("past its bound of unfinished transfers, the assembler drops the oldest",
          "[unit][replication]") {
  torch::manual_seed(6);
  in_parts s(3, 4096);
  REQUIRE(s.parts.size() >= 2);
  actors::snapshot_assembler in(2);
  // a sender that died after its first part, then two that go on
  REQUIRE_FALSE(s.send(in, "dead", 1, 0));
  REQUIRE_FALSE(s.send(in, "s1", 1, 0));
  REQUIRE_FALSE(s.send(in, "s2", 1, 0));
  CHECK(in.pending() == 2);
  CHECK_THROWS_AS(s.send(in, "dead", 1, 1), messages::codec_error);
  std::optional<models::weight_snapshot> got;
  for (size_t i = 1; i < s.parts.size(); ++i) {
    got = s.send(in, "s1", 1, i);
  }
  REQUIRE(got);
  check_same(*got, s.snap);
  CHECK(in.pending() == 1);
}
