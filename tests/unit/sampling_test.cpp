#include "algorithms/sampling.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

using namespace salamander::algorithms;

namespace {

bool is_permutation_of_range(std::vector<int64_t> v, int64_t n) {
  std::sort(v.begin(), v.end());
  std::vector<int64_t> expect(static_cast<size_t>(n));
  std::iota(expect.begin(), expect.end(), 0);
  return v == expect;
}

} // namespace

TEST_CASE("epoch permutation is a permutation and depends only on seed and epoch",
          "[unit][sampling]") {
  auto a = epoch_permutation(7, 3, 1000);
  CHECK(is_permutation_of_range(a, 1000));
  CHECK(a == epoch_permutation(7, 3, 1000));
  CHECK(a != epoch_permutation(7, 4, 1000));
  CHECK(a != epoch_permutation(8, 3, 1000));
  CHECK(epoch_permutation(1, 0, 0).empty());
  CHECK_THROWS_AS(epoch_permutation(1, 0, -1), std::invalid_argument);
}

TEST_CASE("epoch permutation is the same on every machine", "[unit][sampling]") {
  // Replay after recovery may run on another device than the original batch:
  // the order is pinned by our own generator, not by the standard library.
  // These values were computed once; a change here breaks resuming old jobs.
  std::vector<int64_t> pinned = {2, 4, 1, 9, 3, 8, 6, 5, 0, 7};
  auto now = epoch_permutation(1, 0, 10);
  CHECK(is_permutation_of_range(now, 10));
  CHECK(now == pinned);
}

TEST_CASE("batches tile the epoch exactly once", "[unit][sampling]") {
  const int64_t n = 103, bs = 10;
  REQUIRE(batches_per_epoch(n, bs, false) == 11);
  REQUIRE(batches_per_epoch(n, bs, true) == 10);
  std::vector<int64_t> all;
  for (int64_t b = 0; b < 11; ++b) {
    auto idx = batch_indices(5, 2, b, n, bs, false);
    CHECK(static_cast<int64_t>(idx.size()) == (b == 10 ? 3 : 10));
    CHECK(idx == batch_indices(5, 2, b, n, bs, false));
    all.insert(all.end(), idx.begin(), idx.end());
  }
  CHECK(is_permutation_of_range(all, n));
  CHECK(all == epoch_permutation(5, 2, n));
}

TEST_CASE("batch ids outside the epoch are rejected", "[unit][sampling]") {
  CHECK_THROWS_AS(batch_indices(1, 0, 10, 100, 10, false), std::out_of_range);
  CHECK_THROWS_AS(batch_indices(1, 0, -1, 100, 10, false), std::out_of_range);
  CHECK_THROWS_AS(batch_indices(1, 0, 10, 103, 10, true), std::out_of_range);
  CHECK_THROWS_AS(batches_per_epoch(10, 0, false), std::invalid_argument);
}

TEST_CASE("bounded draws are unbiased enough to pass a chi-square test", "[unit][sampling]") {
  splitmix64 g(42);
  const int buckets = 7, draws = 70000;
  std::vector<int> count(buckets);
  for (int i = 0; i < draws; ++i) {
    count[static_cast<size_t>(g.below(buckets))]++;
  }
  double expect = static_cast<double>(draws) / buckets, chi2 = 0;
  for (int c : count) {
    chi2 += (c - expect) * (c - expect) / expect;
  }
  CHECK(chi2 < 22.46); // p = 0.001 for 6 degrees of freedom
}

TEST_CASE("gamma samples have the right mean", "[unit][sampling]") {
  splitmix64 g(3);
  for (double shape : {0.1, 0.5, 1.0, 4.0}) {
    double sum = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      double x = g.gamma(shape);
      REQUIRE(x >= 0.0);
      sum += x;
    }
    CHECK(sum / n == Approx(shape).epsilon(0.05));
  }
  CHECK_THROWS_AS(g.gamma(0.0), std::invalid_argument);
}

TEST_CASE("IID partition places every example once in near-equal shards",
          "[unit][sampling][federated]") {
  auto shards = partition_iid(9, 1001, 4);
  REQUIRE(shards.size() == 4);
  std::vector<int64_t> all;
  for (auto& s : shards) {
    CHECK((s.size() == 250 || s.size() == 251));
    all.insert(all.end(), s.begin(), s.end());
  }
  CHECK(is_permutation_of_range(all, 1001));
  CHECK_THROWS_AS(partition_iid(9, 10, 0), std::invalid_argument);
}

namespace {

// Mean over clients of the largest share one label takes of that client.
double mean_dominant_label_share(const std::vector<std::vector<int64_t>>& shards,
                                 const std::vector<int64_t>& labels, int classes) {
  double total = 0;
  int counted = 0;
  for (auto& s : shards) {
    if (s.empty()) {
      continue;
    }
    std::vector<int> per(static_cast<size_t>(classes));
    for (auto i : s) {
      per[static_cast<size_t>(labels[static_cast<size_t>(i)])]++;
    }
    total += static_cast<double>(*std::max_element(per.begin(), per.end())) /
             static_cast<double>(s.size());
    counted++;
  }
  return total / counted;
}

} // namespace

TEST_CASE("Dirichlet partition places every example once and alpha controls skew",
          "[unit][sampling][federated]") {
  std::vector<int64_t> labels;
  for (int i = 0; i < 5000; ++i) {
    labels.push_back(i % 10);
  }
  auto skewed = partition_dirichlet(1, labels, 8, 0.1);
  auto mild = partition_dirichlet(1, labels, 8, 100.0);
  for (auto* p : {&skewed, &mild}) {
    std::vector<int64_t> all;
    for (auto& s : *p) {
      all.insert(all.end(), s.begin(), s.end());
    }
    CHECK(is_permutation_of_range(all, 5000));
  }
  double skew_small_alpha = mean_dominant_label_share(skewed, labels, 10);
  double skew_large_alpha = mean_dominant_label_share(mild, labels, 10);
  CHECK(skew_small_alpha > 0.4);
  CHECK(skew_large_alpha < 0.2);
  CHECK(partition_dirichlet(1, labels, 8, 0.1) == skewed);
  CHECK_THROWS_AS(partition_dirichlet(1, labels, 8, 0.0), std::invalid_argument);
  CHECK_THROWS_AS(partition_dirichlet(1, labels, 0, 1.0), std::invalid_argument);
}

TEST_CASE(
    "classes apart: the last clients alone hold the last classes, every example once",
    "[unit][sampling][federated]") {
  std::vector<int64_t> labels;
  for (int i = 0; i < 5000; ++i) {
    labels.push_back(i % 10);
  }
  for (double alpha : {0.5, 0.0}) {
    auto shards = partition_apart(3, labels, 10, 3, alpha);
    REQUIRE(shards.size() == 10);
    std::vector<int64_t> all;
    for (size_t c = 0; c < shards.size(); ++c) {
      all.insert(all.end(), shards[c].begin(), shards[c].end());
      for (auto i : shards[c]) {
        // 3 of 10 clients apart: 3 of the 10 classes (7, 8, 9) are theirs alone
        CHECK((labels[static_cast<size_t>(i)] >= 7) == (c >= 7));
      }
    }
    CHECK(is_permutation_of_range(all, 5000));
    CHECK(partition_apart(3, labels, 10, 3, alpha) == shards);
    CHECK(partition_apart(4, labels, 10, 3, alpha) != shards);
  }
  // IID within the groups: the 1,500 examples of classes 7-9 split evenly
  auto even = partition_apart(3, labels, 10, 3, 0.0);
  CHECK(even[9].size() == 500);
  // one client apart of four: round(10 x 1 / 4) = 3 classes, all of them its own
  auto one = partition_apart(1, labels, 4, 1, 0.5);
  CHECK(one[3].size() == 1500);
  for (auto i : one[3]) {
    CHECK(labels[static_cast<size_t>(i)] >= 7);
  }
  CHECK_THROWS_AS(partition_apart(1, labels, 10, 0, 0.5), std::invalid_argument);
  CHECK_THROWS_AS(partition_apart(1, labels, 10, 10, 0.5), std::invalid_argument);
  CHECK_THROWS_AS(partition_apart(1, std::vector<int64_t>(10, 4), 10, 3, 0.5),
                  std::invalid_argument);
}

TEST_CASE("a round's clients are a seeded sample of the available ones, at least one",
          "[unit][sampling]") {
  std::vector<uint32_t> up = {0, 2, 3, 5, 7, 8, 9, 11, 12, 14};
  std::set<std::vector<uint32_t>> seen;
  for (uint64_t round = 1; round <= 20; ++round) {
    auto s = sample_clients(7, round, up, 0.3);
    REQUIRE(s.size() == 3); // ceil(0.3 x 10)
    CHECK(std::is_sorted(s.begin(), s.end()));
    CHECK(std::set<uint32_t>(s.begin(), s.end()).size() == 3);
    for (auto c : s) {
      CHECK(std::find(up.begin(), up.end(), c) != up.end());
    }
    CHECK(s == sample_clients(7, round, up, 0.3)); // the same seed and round: the same
    seen.insert(s);
  }
  CHECK(seen.size() > 10); // rounds draw anew
  CHECK(sample_clients(8, 1, up, 0.3) != sample_clients(7, 1, up, 0.3));
  CHECK(sample_clients(7, 1, up, 0.01).size() == 1);
  CHECK(sample_clients(7, 1, up, 1.0) == up);
  CHECK(sample_clients(7, 1, {}, 0.5).empty());
  CHECK_THROWS_WITH(sample_clients(7, 1, up, 0.0), Catch::Contains("(0, 1]"));
  CHECK_THROWS_WITH(sample_clients(7, 1, up, 1.5), Catch::Contains("got 1.5"));
}

TEST_CASE("vanilla's turns are the round's clients in a seeded order, fresh every round",
          "[unit][sampling]") {
  std::vector<uint32_t> up = {9, 2, 5, 0, 7};
  std::vector<uint32_t> sorted = {0, 2, 5, 7, 9};
  std::map<uint32_t, int> last; // how often each client goes last
  std::set<std::vector<uint32_t>> seen;
  for (uint64_t round = 1; round <= 200; ++round) {
    auto t = turn_order(3, round, up);
    auto as_set = t;
    std::sort(as_set.begin(), as_set.end());
    REQUIRE(as_set == sorted);                // every client once
    CHECK(t == turn_order(3, round, sorted)); // the order given does not matter
    CHECK(t == turn_order(3, round, up));     // the same seed and round: the same
    last[t.back()]++;
    seen.insert(t);
  }
  CHECK(seen.size() > 50); // rounds draw anew (120 orders of 5)
  for (auto c : sorted) {
    INFO("client " << c << " went last " << last[c] << " times of 200");
    CHECK(last[c] > 15); // no client is always the one evaluated after its epoch
  }
  CHECK(turn_order(4, 1, up) != turn_order(3, 1, up));
  CHECK(turn_order(3, 1, {}).empty());
  CHECK(turn_order(3, 1, {4}) == std::vector<uint32_t>{4});
}

TEST_CASE("stragglers among the clients are a seeded draw of the asked part of them",
          "[unit][sampling]") {
  auto count = [](const std::vector<bool>& m) { return std::count(m.begin(), m.end(), true); };
  auto a = pick_stragglers(3, 1000, 0.2);
  REQUIRE(a.size() == 1000);
  CHECK(count(a) == 200);
  CHECK(a == pick_stragglers(3, 1000, 0.2)); // the same on every run
  CHECK(a != pick_stragglers(4, 1000, 0.2)); // another seed, others
  // spread over the clients, not the first ones: some in each quarter
  for (size_t q = 0; q < 4; ++q) {
    CHECK(std::count(a.begin() + static_cast<long>(q * 250),
                     a.begin() + static_cast<long>((q + 1) * 250), true) > 20);
  }
  CHECK(count(pick_stragglers(3, 7, 0.5)) == 4); // round(3.5)
  CHECK(count(pick_stragglers(3, 10, 0.0)) == 0);
  CHECK(count(pick_stragglers(3, 10, 1.0)) == 10);
  CHECK(pick_stragglers(3, 0, 0.5).empty());
  CHECK_THROWS_WITH(pick_stragglers(3, 10, 1.5), Catch::Contains("got 1.5"));
  CHECK_THROWS_AS(pick_stragglers(3, 10, -0.1), std::invalid_argument);
}
