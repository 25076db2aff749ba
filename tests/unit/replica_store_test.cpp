// The store replica holders and stages keep their copies in
// (actors/replication/replica_store.hpp).
#include "../support.hpp"

#include "actors/replication/replica_store.hpp"

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
