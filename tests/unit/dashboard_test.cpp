// What the dashboard shows, without a server: a job's status as the page
// reads it (apps/dashboard/state_json.hpp), the job's timeline ring
// (actors/job/event_ring.hpp), and a finished run's report
// (apps/dashboard/report.hpp).
#include "actors/job/event_ring.hpp"
#include "apps/dashboard/report.hpp"
#include "apps/dashboard/state_json.hpp"

#include <catch2/catch.hpp>

#include <limits>

using namespace salamander;
using salamander::apps::state_json;
using json = nlohmann::json;

namespace {

node_row row(const std::string& name, const std::string& health) {
  node_row r;
  r.name = name;
  r.health = health;
  return r;
}

stage_row stage(uint32_t index, const std::string& node, uint64_t begin, uint64_t end) {
  stage_row s;
  s.index = index;
  s.node = node;
  s.begin = begin;
  s.end = end;
  return s;
}

json node_named(const json& state, const std::string& name) {
  for (auto& n : state["nodes"]) {
    if (n["name"] == name) {
      return n;
    }
  }
  FAIL("no node " << name);
  return {};
}

} // namespace

TEST_CASE("a node's state follows the cluster's health word and the job's pause") {
  job_status s;
  s.phase = status_phase::training;
  CHECK(apps::node_state("ok", s) == "online");
  CHECK(apps::node_state("late", s) == "suspect");
  CHECK(apps::node_state("dead", s) == "lost");
  CHECK(apps::node_state("refused", s) == "lost");
  CHECK(apps::node_state("joining", s) == "joining");
  s.paused_by_user = true;
  CHECK(apps::node_state("ok", s) == "paused");
  CHECK(apps::node_state("dead", s) == "lost"); // a lost node stays lost while paused
}

TEST_CASE("a training job's state: each node's layers and the chain replica of the stage "
          "before it") {
  job_status s;
  s.mode = job_mode::train;
  s.phase = status_phase::training;
  s.nodes = {row("a", "ok"), row("b", "ok"), row("c", "dead"), row("d", "ok")};
  s.stages = {stage(0, "b", 0, 1), stage(1, "a", 1, 3), stage(2, "d", 3, 4)};
  auto st = state_json(s);
  REQUIRE(st["nodes"].size() == 4);
  auto a = node_named(st, "a");
  CHECK(a["layers"] == json::array({{{"stage", 1}, {"begin", 1}, {"end", 3}}}));
  // stage k's weights live on stage k+1's node
  CHECK(a["replicas"] == json::array({{{"stage", 0}, {"begin", 0}, {"end", 1}}}));
  auto d = node_named(st, "d");
  CHECK(d["replicas"] == json::array({{{"stage", 1}, {"begin", 1}, {"end", 3}}}));
  CHECK(node_named(st, "b")["replicas"].empty()); // stage 0's node keeps no one's
  auto c = node_named(st, "c");
  CHECK(c["state"] == "lost");
  CHECK(c["layers"].empty());
  CHECK(c["clients"].empty());
  CHECK(st["job"]["stages"].size() == 3);
}

TEST_CASE("a serving job keeps no chain replicas in the page; round jobs show a client per "
          "node") {
  job_status s;
  s.mode = job_mode::serve;
  s.nodes = {row("a", "ok"), row("b", "ok")};
  s.stages = {stage(0, "a", 0, 2), stage(1, "b", 2, 4)};
  auto st = state_json(s);
  CHECK(node_named(st, "b")["replicas"].empty());
  CHECK(st["sample"].contains("requests_per_s"));
  CHECK_FALSE(st["job"].contains("training"));

  job_status f;
  f.mode = job_mode::federate;
  f.nodes = {row("x", "ok"), row("y", "ok"), row("z", "late")};
  f.plan = "x:1.00 y:1.00 z:0.25";
  auto ft = state_json(f);
  CHECK(node_named(ft, "y")["clients"] == json::array({1}));
  CHECK(node_named(ft, "z")["state"] == "suspect");
  CHECK(ft["job"].contains("rounds"));
}

TEST_CASE("progress and ETA: batches of a training job at the rate so far, rounds of a "
          "round job, none left once it ended") {
  // a federated or split job's clients, as its plan names their nodes
  job_status f;
  f.mode = job_mode::federate;
  f.nodes = {row("n1", "ok"), row("n2", "ok")};
  f.plan = "n1:1.00 n1:0.50 n2:down";
  auto fs = state_json(f);
  CHECK(node_named(fs, "n1")["clients"] == json::array({0, 1}));
  CHECK(node_named(fs, "n2")["clients"] == json::array({2}));
  // data parallelism: members share a stage index; no chain replica is drawn
  job_status d;
  d.mode = job_mode::train;
  d.nodes = {row("a", "ok"), row("b", "ok")};
  d.stages = {stage(0, "a", 0, 4), stage(0, "b", 0, 4)};
  CHECK(node_named(state_json(d), "b")["replicas"].empty());

  job_status s;
  s.mode = job_mode::train;
  s.phase = status_phase::training;
  s.training.epochs = 2;
  s.training.batches = 100;
  s.training.committed = 50;
  s.train_s = 3; // training's train_s moves at epoch ends only: the ETA uses wall time
  s.elapsed_s = 10;
  auto p = state_json(s)["job"]["progress"];
  CHECK(p["done"] == 50.0);
  CHECK(p["total"] == 200.0);
  CHECK(p["unit"] == "batches");
  CHECK(p["eta_s"].get<double>() == Approx(30.0)); // 150 left at 5 a second
  s.training.committed = 0;
  CHECK(state_json(s)["job"]["progress"]["eta_s"].is_null()); // no rate yet
  s.phase = status_phase::finished;
  CHECK(state_json(s)["job"]["progress"]["eta_s"] == 0.0);

  job_status r;
  r.mode = job_mode::split;
  r.rounds.round = 3;
  r.rounds.total = 12;
  r.train_s = 6;
  auto rp = state_json(r)["job"]["progress"];
  CHECK(rp["unit"] == "rounds");
  CHECK(rp["eta_s"].get<double>() == Approx(18.0));
}

TEST_CASE("a loss that is not a number is null in the page's JSON, not invalid JSON") {
  job_status s;
  s.loss = std::numeric_limits<double>::quiet_NaN();
  auto text = state_json(s).dump();
  CHECK(text.find("NaN") == std::string::npos);
  CHECK(json::parse(text)["job"]["loss"].is_null());
}

TEST_CASE("the timeline ring: numbered events, since N, bounded, oldest dropped") {
  actors::event_ring ring;
  CHECK(ring.since(0).empty());
  for (int i = 0; i < 5; ++i) {
    ring.add("e" + std::to_string(i));
  }
  CHECK(ring.next() == 5);
  CHECK(ring.since(3) == std::vector<std::string>{"e3", "e4"});
  CHECK(ring.since(5).empty());
  CHECK(ring.since(99).empty());
  for (size_t i = 5; i < actors::event_ring::capacity + 10; ++i) {
    ring.add("e" + std::to_string(i));
  }
  // a reader that fell behind starts at the oldest kept, at most a page
  auto got = ring.since(0);
  REQUIRE(got.size() == actors::event_ring::answer_max);
  CHECK(got.front() == "e10");
  CHECK(ring.since(ring.next() - 1) ==
        std::vector<std::string>{"e" + std::to_string(ring.next() - 1)});
}

TEST_CASE("a plan's text as stages; what is not NAME[B,E) is skipped") {
  auto p = apps::parse_plan_text("node2[0,1) node1[1,4)");
  REQUIRE(p.size() == 2);
  CHECK(p[0] == json{{"node", "node2"}, {"begin", 0}, {"end", 1}});
  CHECK(p[1] == json{{"node", "node1"}, {"begin", 1}, {"end", 4}});
  CHECK(apps::parse_plan_text("").empty());
  CHECK(apps::parse_plan_text("dp(node1:2 node2:2)").empty());
  CHECK(apps::parse_plan_text("local0:1.00 local1:0.06").empty()); // a federated plan
}

TEST_CASE("a report from a metrics log: thinned batch curve, evaluations, the final plan as "
          "bars, every event on the timeline") {
  std::vector<json> lines;
  lines.push_back({{"t", 0.0}, {"event", "start"}, {"nodes", {"n1", "n2", "n3"}}});
  lines.push_back({{"t", 0.1}, {"event", "plan"}, {"plan", "n1[0,2) n2[2,4)"}});
  for (int b = 0; b < 100; ++b) {
    lines.push_back({{"t", 0.2 + b * 0.01},
                     {"event", "batch"},
                     {"samples_per_s", 1000.0 + b},
                     {"loss", 2.0 - b * 0.01},
                     {"stages", {{{"stage", 0}, {"compute_s", 0.002}, {"wait_s", 0.001}, {"send_s", 0.0}},
                                 {{"stage", 1}, {"compute_s", 0.004}, {"wait_s", 0.0}, {"send_s", 0.001}}}}});
  }
  lines.push_back({{"t", 1.5}, {"event", "failure"}, {"what", "node n1 went away"}});
  lines.push_back({{"t", 1.6}, {"event", "recovered"}, {"plan", "n3[0,2) n2[2,4)"}, {"recovery_s", 0.1}});
  lines.push_back({{"t", 2.0}, {"event", "evaluated"}, {"accuracy", 0.8}});
  lines.push_back({{"t", 2.1}, {"event", "end"}, {"phase", "finished"}});
  auto d = apps::report_data(lines, "a run", 10);
  CHECK(d["mode"] == "train");
  int batch_points = 0, accuracy_points = 0;
  for (auto& x : d["samples"]) {
    batch_points += x.contains("samples_per_s");
    accuracy_points += x.contains("accuracy");
  }
  CHECK(batch_points == 10); // 100 batch lines, at most 10 points
  CHECK(accuracy_points == 1);
  CHECK(d["events"].size() == 6); // every line but the batches
  CHECK(d["events"][5]["seq"] == 5); // numbered: two alike at one instant stay two
  auto st = d["state"];
  CHECK(st["job"]["phase"] == "finished");
  CHECK(st["job"]["plan"] == "n3[0,2) n2[2,4)");
  // the bars are the plan after the recovery; n1 ran nothing at the end
  CHECK(node_named(st, "n3")["layers"] == json::array({{{"stage", 0}, {"begin", 0}, {"end", 2}}}));
  CHECK(node_named(st, "n1")["layers"].empty());
  CHECK(node_named(st, "n2")["replicas"] == json::array({{{"stage", 0}, {"begin", 0}, {"end", 2}}}));
  // no batch lines after the recovery: the stage times start afresh there
  CHECK(st["job"]["pipeline"]["stage_time"].empty());

  auto page = apps::report_page(d);
  CHECK(page.find("id=\"report-data\"") != std::string::npos);
  CHECK(page.find("<script src=") == std::string::npos); // everything inlined
  CHECK(page.find("Chart.js v3.9.1") != std::string::npos);
}

TEST_CASE("a report's data cannot end its script element early") {
  std::vector<json> lines{{{"t", 0.0}, {"event", "failure"}, {"what", "</script><script>alert(1)"}}};
  auto page = apps::report_page(apps::report_data(lines, "x"));
  auto at = page.find("id=\"report-data\"");
  REQUIRE(at != std::string::npos);
  auto end = page.find("</script>", at);
  CHECK(page.substr(at, end - at).find("alert(1)") != std::string::npos); // still inside
  CHECK(page.find("<script>alert(1)") == std::string::npos);
}
