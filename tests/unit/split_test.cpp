// Split learning's pure parts against literal tables. The send plans were
// worked out by hand (priorities, ties to the lower index, the picks each
// iteration adds) and the longer one by an independent Python rendering of
// the orchestrator; a change to a pinned plan changes which clients past
// AdaSplit runs let reach the server, so it must be deliberate.
#include "algorithms/split.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

using namespace salamander::split;
using Catch::Matchers::Contains;

namespace {

constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();

using plan = std::vector<std::vector<uint8_t>>;

orchestrator with_losses(const std::vector<double>& loss) {
  orchestrator o(loss.size());
  o.loss = loss;
  return o;
}

// Senders at iteration t.
int64_t senders_at(const plan& send, size_t t) {
  int64_t n = 0;
  for (const auto& row : send) {
    if (t < row.size() && row[t] != 0) {
      ++n;
    }
  }
  return n;
}

int64_t sends_of(const plan& send, size_t client) {
  const auto& row = send[client];
  return std::count(row.begin(), row.end(), uint8_t{1});
}

// The four-layer description the cost tests cut: FLOPs, output bytes and
// parameter bytes per layer.
const std::vector<double> flops = {100, 200, 300, 400};
const std::vector<int64_t> out_bytes = {4000, 2000, 400, 40};
const std::vector<int64_t> param_bytes = {1000, 2000, 3000, 4000};

} // namespace

// ---- methods

TEST_CASE("method names round-trip and unknown names list the known ones",
          "[unit][split]") {
  for (auto m : {method::vanilla, method::splitfed, method::adasplit}) {
    CHECK(parse_method(to_string(m)) == m);
  }
  CHECK(parse_method("vanilla") == method::vanilla);
  CHECK(parse_method("splitfed") == method::splitfed);
  CHECK(parse_method("adasplit") == method::adasplit);
  CHECK(method_names() == std::vector<std::string>{"vanilla", "splitfed", "adasplit"});

  CHECK_THROWS_AS(parse_method("AdaSplit"), std::invalid_argument);
  CHECK_THROWS_AS(parse_method(""), std::invalid_argument);
  CHECK_THROWS_WITH(parse_method("fedavg"), Contains("fedavg") && Contains("vanilla") &&
                                                Contains("splitfed") &&
                                                Contains("adasplit"));
  CHECK_THROWS_AS(to_string(static_cast<method>(7)), std::invalid_argument);
}

// ---- phases

TEST_CASE("local rounds round the fraction half up and stay within the job",
          "[unit][split]") {
  struct row {
    int64_t rounds;
    double fraction;
    int64_t local;
  };
  const std::vector<row> table = {{10, 0.0, 0},    {10, 1.0, 10}, {10, 0.25, 3},
                                  {10, 0.24, 2},   {10, 0.26, 3}, {10, 0.35, 4},
                                  {4, 0.375, 2},   {3, 0.5, 2},   {1, 0.49, 0},
                                  {1, 0.5, 1},     {7, 0.999, 7}, {100, 0.3, 30},
                                  {100, 0.145, 15}}; // 0.145 x 100 = 14.499999999999998
  for (const auto& r : table) {
    INFO("rounds " << r.rounds << " fraction " << r.fraction);
    CHECK(local_rounds(r.rounds, r.fraction) == r.local);
  }
  CHECK_THROWS_AS(local_rounds(10, -0.01), std::invalid_argument);
  CHECK_THROWS_AS(local_rounds(10, 1.01), std::invalid_argument);
  CHECK_THROWS_AS(local_rounds(10, not_a_number), std::invalid_argument);
  CHECK_THROWS_AS(local_rounds(0, 0.5), std::invalid_argument);
  CHECK_THROWS_AS(local_rounds(-3, 0.5), std::invalid_argument);
}

TEST_CASE("the local phase is the first local rounds, counted from one",
          "[unit][split]") {
  // 10 rounds at 0.3: rounds 1..3 are local.
  CHECK(in_local_phase(1, 10, 0.3));
  CHECK(in_local_phase(3, 10, 0.3));
  CHECK_FALSE(in_local_phase(4, 10, 0.3));
  CHECK_FALSE(in_local_phase(10, 10, 0.3));
  CHECK_FALSE(in_local_phase(1, 10, 0.0));
  CHECK(in_local_phase(10, 10, 1.0));
  CHECK_THROWS_AS(in_local_phase(0, 10, 0.3), std::invalid_argument);
  CHECK_THROWS_AS(in_local_phase(1, 0, 0.3), std::invalid_argument);
  CHECK_THROWS_AS(in_local_phase(1, 10, 2.0), std::invalid_argument);
}

// ---- the orchestrator

TEST_CASE("a new orchestrator has seen no client", "[unit][split]") {
  orchestrator o(3);
  CHECK(o.clients() == 3);
  REQUIRE(o.loss.size() == 3);
  REQUIRE(o.picks.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(std::isnan(o.loss[i]));
    CHECK(o.picks[i] == 0);
  }
  CHECK(o.total_picks == 0);
  CHECK(orchestrator().clients() == 0);
}

TEST_CASE("without exploration the highest losses send at every iteration",
          "[unit][split]") {
  // 5 clients at 0.4: k = 2 per iteration; losses put 3 (0.9) and 1 (0.5) first.
  auto o = with_losses({0.1, 0.5, 0.3, 0.9, 0.2});
  const auto send = plan_sends({3, 3, 3, 3, 3}, 0.4, 0.0, o);
  const plan expected = {{0, 0, 0}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, {0, 0, 0}};
  CHECK(send == expected);
  CHECK(o.picks == std::vector<int64_t>{0, 3, 0, 3, 0});
  CHECK(o.total_picks == 6);
  // Planning does not touch the losses.
  CHECK(o.loss == std::vector<double>{0.1, 0.5, 0.3, 0.9, 0.2});
}

TEST_CASE("a send floor lets every client send a share of its batches", "[unit][split]") {
  // The losses favour 3 and 1 as above; floor 0.5 x fraction 0.4: a client
  // is starved at iteration t when its picks this round + 1 <= 0.2 (t + 1).
  // t4: 0, 2 and 4 starved (0 picks, 1 <= 1.0), the first two by index go;
  // t5: 4 still starved (1 <= 1.2), then 3 by loss; t9: 0, 2, 4 at one
  // pick (2 <= 2.0), 0 and 2 go.
  auto o = with_losses({0.1, 0.5, 0.3, 0.9, 0.2});
  const auto send = plan_sends(std::vector<int64_t>(5, 10), 0.4, 0.0, o, 0.5);
  const plan expected = {{0, 0, 0, 0, 1, 0, 0, 0, 0, 1},
                         {1, 1, 1, 1, 0, 0, 1, 1, 1, 0},
                         {0, 0, 0, 0, 1, 0, 0, 0, 0, 1},
                         {1, 1, 1, 1, 0, 1, 1, 1, 1, 0},
                         {0, 0, 0, 0, 0, 1, 0, 0, 0, 0}};
  CHECK(send == expected);
  for (size_t t = 0; t < 10; ++t) {
    CHECK(senders_at(send, t) == 2); // the floor moves sends, never adds any
  }
  // without it the bandit alone never lets 0, 2 and 4 send
  auto bandit = with_losses({0.1, 0.5, 0.3, 0.9, 0.2});
  const auto alone = plan_sends(std::vector<int64_t>(5, 10), 0.4, 0.0, bandit, 0.0);
  CHECK(sends_of(alone, 0) + sends_of(alone, 2) + sends_of(alone, 4) == 0);
  // a floor of 1 gives every client its fair part, fraction x batches, to one
  auto fair = with_losses({0.1, 0.5, 0.3, 0.9, 0.2});
  const auto even = plan_sends(std::vector<int64_t>(5, 10), 0.4, 0.0, fair, 1.0);
  for (size_t c = 0; c < 5; ++c) {
    CHECK(sends_of(even, c) >= 3);
  }
  CHECK_THROWS_AS(plan_sends({2, 2}, 0.5, 0.0, o, -0.1), std::invalid_argument);
  CHECK_THROWS_AS(plan_sends({2, 2}, 0.5, 0.0, o, 1.5), std::invalid_argument);
}

TEST_CASE("unseen clients are picked before any seen one", "[unit][split]") {
  auto o = with_losses({0.9, not_a_number, 0.5, not_a_number, 0.7});
  const auto send = plan_sends({2, 2, 2, 2, 2}, 0.4, 1.0, o);
  const plan expected = {{0, 0}, {1, 1}, {0, 0}, {1, 1}, {0, 0}};
  CHECK(send == expected);

  // Three unseen clients and k = 2: ties among them go to the lower index.
  orchestrator fresh(5);
  const auto first = plan_sends({1, 1, 1, 1, 1}, 0.4, 0.0, fresh);
  CHECK(first == plan{{1}, {1}, {0}, {0}, {0}});
  auto partly = with_losses({5.0, not_a_number, 9.0, not_a_number, not_a_number});
  const auto second = plan_sends({1, 1, 1, 1, 1}, 0.4, 0.0, partly);
  CHECK(second == plan{{0}, {1}, {0}, {1}, {0}});
}

TEST_CASE("unseen clients rotate among themselves within a round", "[unit][split]") {
  // No loss is known at the first global round: the senders still rotate,
  // so every client is heard from (and gets a loss) in that round.
  orchestrator fresh(5);
  const auto send = plan_sends({4, 4, 4, 4, 4}, 0.4, 0.5, fresh);
  const plan expected = {{1, 0, 1, 0}, {1, 0, 0, 1}, {0, 1, 0, 1}, {0, 1, 0, 0}, {0, 0, 1, 0}};
  CHECK(send == expected);
  CHECK(fresh.picks == std::vector<int64_t>{2, 2, 2, 1, 1});
}

TEST_CASE("with equal losses exploration rotates the senders within a round",
          "[unit][split]") {
  // Worked by hand: iteration 0 has no bonus (ln 1 = 0) and picks 0, 1;
  // then the least-picked clients win, ties to the lower index.
  orchestrator o = with_losses({1, 1, 1, 1, 1});
  const auto send = plan_sends({5, 5, 5, 5, 5}, 0.4, 1.0, o);
  const plan expected = {{1, 0, 1, 0, 0},
                         {1, 0, 0, 1, 0},
                         {0, 1, 0, 1, 0},
                         {0, 1, 0, 0, 1},
                         {0, 0, 1, 0, 1}};
  CHECK(send == expected);
  for (size_t t = 0; t < 5; ++t) {
    CHECK(senders_at(send, t) == 2);
  }
  CHECK(o.picks == std::vector<int64_t>{2, 2, 2, 2, 2});
  CHECK(o.total_picks == 10);

  // Over any number of iterations every client is picked and the counts
  // differ by at most one.
  for (int64_t iterations : {1, 2, 3, 4, 6, 7, 11, 23}) {
    INFO("iterations " << iterations);
    auto e = with_losses({0.7, 0.7, 0.7, 0.7, 0.7});
    const auto s = plan_sends(std::vector<int64_t>(5, iterations), 0.4, 0.5, e);
    const auto [lo, hi] = std::minmax_element(e.picks.begin(), e.picks.end());
    CHECK(*hi - *lo <= 1);
    CHECK(e.total_picks == 2 * iterations);
    if (iterations >= 3) {
      CHECK(*lo >= 1);
    }
  }

  // Without exploration nothing rotates: equal losses always pick 0 and 1.
  auto still = with_losses({1, 1, 1, 1, 1});
  plan_sends({6, 6, 6, 6, 6}, 0.4, 0.0, still);
  CHECK(still.picks == std::vector<int64_t>{6, 6, 0, 0, 0});
}

TEST_CASE("higher losses are picked more often over a round", "[unit][split]") {
  // Pinned by the Python rendering: picks 1, 2, 3, 5, 9 of 20.
  auto o = with_losses({0.1, 0.2, 0.3, 0.4, 0.5});
  const auto send = plan_sends(std::vector<int64_t>(5, 10), 0.4, 0.5, o);
  CHECK(o.picks == std::vector<int64_t>{1, 2, 3, 5, 9});
  CHECK(o.total_picks == 20);
  CHECK(send[4] == std::vector<uint8_t>{1, 1, 1, 1, 1, 0, 1, 1, 1, 1});
  CHECK(send[0] == std::vector<uint8_t>{0, 0, 0, 0, 1, 0, 0, 0, 0, 0});
  for (size_t i = 0; i < 5; ++i) {
    CHECK(sends_of(send, i) == o.picks[i]);
  }
  for (size_t t = 0; t < 10; ++t) {
    CHECK(senders_at(send, t) == 2);
  }
}

TEST_CASE("picks carry over from round to round", "[unit][split]") {
  // Client 0 was picked a lot in earlier rounds: with equal losses the
  // others' bonus is larger, so the next round starts with them.
  auto o = with_losses({1, 1, 1});
  o.picks = {10, 0, 0};
  o.total_picks = 10;
  const auto send = plan_sends({1, 1, 1}, 0.5, 1.0, o);
  CHECK(send == plan{{0}, {1}, {1}});
  CHECK(o.picks == std::vector<int64_t>{10, 1, 1});
  CHECK(o.total_picks == 12);
}

TEST_CASE("clients run out of eligibility when their batches end", "[unit][split]") {
  // t = 0: eligible 0, 1, 3, 4 -> k = 2: 1 (0.9), 3 (0.8)
  // t = 1: eligible 0, 3, 4    -> k = ceil(1.5) = 2: 3, 4 (0.2 > 0.1)
  // t = 2: eligible 0, 4       -> k = 1: 4
  auto o = with_losses({0.1, 0.9, 0.5, 0.8, 0.2});
  const auto send = plan_sends({3, 1, 0, 2, 3}, 0.5, 0.0, o);
  REQUIRE(send.size() == 5);
  CHECK(send[0] == std::vector<uint8_t>{0, 0, 0});
  CHECK(send[1] == std::vector<uint8_t>{1});
  CHECK(send[2].empty());
  CHECK(send[3] == std::vector<uint8_t>{1, 1});
  CHECK(send[4] == std::vector<uint8_t>{0, 1, 1});
  CHECK(o.picks == std::vector<int64_t>{0, 1, 0, 2, 2});
  CHECK(o.total_picks == 5);
}

TEST_CASE("the number of senders rounds up and is at least one", "[unit][split]") {
  // fraction 1 picks every eligible client at every iteration.
  orchestrator all(4);
  const auto every = plan_sends({2, 2, 1, 0}, 1.0, 0.3, all);
  CHECK(every == plan{{1, 1}, {1, 1}, {1}, {}});

  // A tiny fraction still picks one.
  auto one = with_losses({0.2, 0.1, 0.3});
  const auto single = plan_sends({2, 2, 2}, 0.01, 0.0, one);
  CHECK(single == plan{{0, 0}, {0, 0}, {1, 1}});

  // 0.28 of 25 is 7.000000000000001 in doubles: still 7, not 8.
  orchestrator many(25);
  const auto seven = plan_sends(std::vector<int64_t>(25, 1), 0.28, 0.0, many);
  CHECK(senders_at(seven, 0) == 7);
  // 0.41 of 5 rounds up to 3.
  orchestrator five(5);
  CHECK(senders_at(plan_sends(std::vector<int64_t>(5, 1), 0.41, 0.0, five), 0) == 3);

  // No batches at all: an empty plan per client and nothing counted.
  orchestrator idle(2);
  CHECK(plan_sends({0, 0}, 0.5, 1.0, idle) == plan{{}, {}});
  CHECK(idle.total_picks == 0);
  orchestrator none;
  CHECK(plan_sends({}, 0.5, 1.0, none).empty());
}

TEST_CASE("planning rejects bad arguments and leaves the orchestrator alone",
          "[unit][split]") {
  auto o = with_losses({0.5, 0.5});
  const std::vector<int64_t> b = {2, 2};
  CHECK_THROWS_AS(plan_sends(b, 0.0, 0.0, o), std::invalid_argument);
  CHECK_THROWS_AS(plan_sends(b, -0.5, 0.0, o), std::invalid_argument);
  CHECK_THROWS_AS(plan_sends(b, 1.5, 0.0, o), std::invalid_argument);
  CHECK_THROWS_AS(plan_sends(b, not_a_number, 0.0, o), std::invalid_argument);
  CHECK_THROWS_AS(plan_sends(b, 0.5, -1.0, o), std::invalid_argument);
  CHECK_THROWS_AS(plan_sends(b, 0.5, not_a_number, o), std::invalid_argument);
  CHECK_THROWS_AS(plan_sends(b, 0.5, std::numeric_limits<double>::infinity(), o),
                  std::invalid_argument);
  CHECK_THROWS_AS(plan_sends({2, 2, 2}, 0.5, 0.0, o), std::invalid_argument);
  CHECK_THROWS_AS(plan_sends({2}, 0.5, 0.0, o), std::invalid_argument);
  CHECK_THROWS_AS(plan_sends({2, -1}, 0.5, 0.0, o), std::invalid_argument);
  CHECK(o.picks == std::vector<int64_t>{0, 0});
  CHECK(o.total_picks == 0);
}

TEST_CASE("observed losses start the average then decay into it", "[unit][split]") {
  orchestrator o(2);
  observe_loss(o, 0, 2.0, 0.9);
  CHECK(o.loss[0] == Approx(2.0));
  CHECK(std::isnan(o.loss[1]));
  observe_loss(o, 0, 4.0, 0.9);
  CHECK(o.loss[0] == Approx(0.9 * 2.0 + 0.1 * 4.0)); // 2.2
  observe_loss(o, 0, 4.0, 0.5);
  CHECK(o.loss[0] == Approx(0.5 * 2.2 + 0.5 * 4.0)); // 3.1
  // decay 0 keeps only the newest value.
  observe_loss(o, 0, 0.25, 0.0);
  CHECK(o.loss[0] == Approx(0.25));
  // An observed client loses its unseen priority.
  observe_loss(o, 1, 0.1, 0.9);
  CHECK(o.loss[1] == Approx(0.1));
  CHECK(o.picks == std::vector<int64_t>{0, 0});

  CHECK_THROWS_AS(observe_loss(o, 2, 1.0, 0.5), std::invalid_argument);
  CHECK_THROWS_AS(observe_loss(o, 0, 1.0, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(observe_loss(o, 0, 1.0, -0.1), std::invalid_argument);
  CHECK_THROWS_AS(observe_loss(o, 0, not_a_number, 0.5), std::invalid_argument);
  CHECK_THROWS_AS(observe_loss(o, 0, std::numeric_limits<double>::infinity(), 0.5),
                  std::invalid_argument);
  CHECK(o.loss[0] == Approx(0.25));
}

// ---- costs

TEST_CASE("a cut splits the per-layer figures between client and server",
          "[unit][split]") {
  struct row {
    size_t cut;
    double client_flops, server_flops;
    int64_t activation, client_params, server_params;
  };
  const std::vector<row> table = {{1, 100, 900, 4000, 1000, 9000},
                                  {2, 300, 700, 2000, 3000, 7000},
                                  {3, 600, 400, 400, 6000, 4000}};
  for (const auto& r : table) {
    INFO("cut " << r.cut);
    const auto c = costs_at_cut(flops, out_bytes, param_bytes, r.cut);
    CHECK(c.client_forward_flops == Approx(r.client_flops));
    CHECK(c.server_forward_flops == Approx(r.server_flops));
    CHECK(c.activation_bytes == r.activation);
    CHECK(c.client_param_bytes == r.client_params);
    CHECK(c.server_param_bytes == r.server_params);
  }
  CHECK(training_flops(300) == Approx(900));
}

TEST_CASE("cuts outside the model and mismatched descriptions are rejected",
          "[unit][split]") {
  CHECK_THROWS_WITH(costs_at_cut(flops, out_bytes, param_bytes, 0),
                    Contains("n = 4") && Contains("[1, 3]"));
  CHECK_THROWS_WITH(costs_at_cut(flops, out_bytes, param_bytes, 4),
                    Contains("n = 4") && Contains("[1, 3]"));
  CHECK_THROWS_AS(costs_at_cut(flops, out_bytes, param_bytes, 9), std::invalid_argument);
  CHECK_THROWS_AS(costs_at_cut({1}, {4}, {4}, 1), std::invalid_argument);
  CHECK_THROWS_AS(costs_at_cut({}, {}, {}, 1), std::invalid_argument);
  CHECK_THROWS_AS(costs_at_cut({1, 2, 3}, out_bytes, param_bytes, 1),
                  std::invalid_argument);
  CHECK_THROWS_AS(costs_at_cut(flops, {4, 4}, param_bytes, 1), std::invalid_argument);
  CHECK_THROWS_AS(costs_at_cut(flops, out_bytes, {1, 2, 3, 4, 5}, 1),
                  std::invalid_argument);
  CHECK_THROWS_AS(costs_at_cut({1, -2, 3, 4}, out_bytes, param_bytes, 1),
                  std::invalid_argument);
  CHECK_THROWS_AS(costs_at_cut(flops, {4, 4, -4, 4}, param_bytes, 1),
                  std::invalid_argument);
}

TEST_CASE("the auxiliary head is one dense layer from the cut to the classes",
          "[unit][split]") {
  // 2000 bytes = 500 floats, 10 classes: 2 * 500 * 10 + 10.
  CHECK(aux_head_flops(2000, 10) == Approx(10010));
  CHECK(aux_head_flops(4, 1) == Approx(3));
  CHECK(aux_head_flops(0, 10) == Approx(10));
  CHECK_THROWS_AS(aux_head_flops(-4, 10), std::invalid_argument);
  CHECK_THROWS_AS(aux_head_flops(2001, 10), std::invalid_argument);
  CHECK_THROWS_AS(aux_head_flops(2000, 0), std::invalid_argument);
}

// ---- accounting and scoring

TEST_CASE("traffic adds up field by field", "[unit][split]") {
  traffic a{10, 20, 1.5, 2.5};
  const traffic b{1, 2, 0.5, 0.25};
  a += b;
  CHECK(a.up == 11);
  CHECK(a.down == 22);
  CHECK(a.client_flops == Approx(2.0));
  CHECK(a.server_flops == Approx(2.75));
  CHECK(a.bytes() == 33);
  traffic total;
  (total += a) += b;
  CHECK(total.bytes() == 36);
}

TEST_CASE("the C3 score halves per budget spent", "[unit][split]") {
  const c3_budget budget; // 1e9 bytes, 1e13 FLOPs
  CHECK(c3_score(0.8, 0, 0, budget) == Approx(0.8));
  CHECK(c3_score(0.8, 1e9, 0, budget) == Approx(0.4));
  CHECK(c3_score(0.8, 0, 1e13, budget) == Approx(0.4));
  CHECK(c3_score(0.8, 1e9, 1e13, budget) == Approx(0.2));
  CHECK(c3_score(1.0, 2e9, 0, budget) == Approx(0.25));
  const c3_budget small{100, 1000};
  CHECK(c3_score(1.0, 100, 1000, small) == Approx(0.25));
  CHECK(c3_score(1.0, 50, 0, small) == Approx(std::sqrt(0.5)));
}

TEST_CASE("the C3 score falls with bytes and FLOPs", "[unit][split]") {
  const c3_budget budget{1e6, 1e9};
  double previous = c3_score(0.9, 0, 0, budget);
  for (double bytes = 1e5; bytes <= 1e7; bytes *= 2) {
    const double s = c3_score(0.9, bytes, 0, budget);
    CHECK(s < previous);
    previous = s;
  }
  previous = c3_score(0.9, 0, 0, budget);
  for (double f = 1e8; f <= 1e10; f *= 2) {
    const double s = c3_score(0.9, 5e5, f, budget);
    CHECK(s < c3_score(0.9, 0, f, budget));
    CHECK(s < previous);
    previous = s;
  }
  // Better accuracy at the same cost scores higher.
  CHECK(c3_score(0.9, 1e6, 1e9, budget) > c3_score(0.8, 1e6, 1e9, budget));
}

TEST_CASE("the C3 score clamps accuracy and rejects bad budgets", "[unit][split]") {
  const c3_budget budget;
  CHECK(c3_score(1.5, 1e9, 0, budget) == Approx(0.5));
  CHECK(c3_score(-0.2, 0, 0, budget) == 0.0);
  CHECK(c3_score(not_a_number, 0, 0, budget) == 0.0);
  CHECK_THROWS_AS(c3_score(0.5, 0, 0, c3_budget{0, 1e13}), std::invalid_argument);
  CHECK_THROWS_AS(c3_score(0.5, 0, 0, c3_budget{1e9, 0}), std::invalid_argument);
  CHECK_THROWS_AS(c3_score(0.5, 0, 0, c3_budget{-1, 1e13}), std::invalid_argument);
  CHECK_THROWS_AS(c3_score(0.5, 0, 0, c3_budget{1e9, -5}), std::invalid_argument);
  CHECK_THROWS_AS(c3_score(0.5, 0, 0, c3_budget{not_a_number, 1e13}),
                  std::invalid_argument);
  CHECK_THROWS_AS(c3_score(0.5, -1, 0, budget), std::invalid_argument);
  CHECK_THROWS_AS(c3_score(0.5, 0, -1, budget), std::invalid_argument);
}

TEST_CASE("sample weights are proportional and fall back to equal", "[unit][split]") {
  const auto w = sample_weights({1, 3});
  REQUIRE(w.size() == 2);
  CHECK(w[0] == Approx(0.25));
  CHECK(w[1] == Approx(0.75));
  const auto with_zero = sample_weights({0, 2, 6});
  REQUIRE(with_zero.size() == 3);
  CHECK(with_zero[0] == 0.0);
  CHECK(with_zero[1] == Approx(0.25));
  CHECK(with_zero[2] == Approx(0.75));
  const auto equal = sample_weights({0, 0, 0});
  REQUIRE(equal.size() == 3);
  for (double v : equal) {
    CHECK(v == Approx(1.0 / 3));
  }
  CHECK(sample_weights({}).empty());
  CHECK(sample_weights({7}) == std::vector<double>{1.0});
  CHECK_THROWS_AS(sample_weights({3, -1}), std::invalid_argument);
}
