// The training job's phase machine (algorithms/job_phase.hpp) against the
// whole event x phase table.
#include "algorithms/job_phase.hpp"
#include "algorithms/round_phase.hpp"
#include "algorithms/serve_phase.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <vector>

using namespace salamander::algorithms;

namespace {

// Every row of a phase table: phase p on event e moves to the row's entry
// (an abbreviation of `abbrev`), or nowhere where it says "-".
template <class Phase, class Event>
void check_table(const std::vector<std::pair<Phase, std::vector<std::string>>>& table,
                 const std::vector<Event>& events,
                 const std::map<std::string, Phase>& abbrev) {
  for (auto& [phase, row] : table) {
    REQUIRE(row.size() == events.size());
    for (size_t e = 0; e < events.size(); ++e) {
      INFO(to_string(phase) << " --" << to_string(events[e]) << "-->");
      auto got = next_phase(phase, events[e]);
      if (row[e] == "-") {
        CHECK_FALSE(got.has_value());
      } else {
        REQUIRE(got.has_value());
        CHECK(*got == abbrev.at(row[e]));
      }
    }
  }
}

} // namespace

TEST_CASE("every phase moves on every event as the table says", "[unit][job_phase]") {
  using E = job_event;
  const std::vector<E> events = {E::profile,      E::launched,  E::epoch_end, E::evaluated,
                                 E::replan,       E::replanned, E::checkpoint, E::checkpointed,
                                 E::pause,        E::resume,    E::failure,   E::recovered,
                                 E::no_capacity,  E::joined,    E::finish,    E::fail};
  // columns in the order above; "-": the event does not apply
  const std::map<std::string, std::vector<std::string>> table = {
      //                prof  laun  epoch eval  repl  repld ckpt  ckptd pause resum fail. recov nocap join  fin   fail
      {"starting",     {"pr", "tr", "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "fa", "-",  "-",  "-",  "-",  "fa"}},
      {"profiling",    {"-",  "tr", "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "fa", "-",  "-",  "-",  "-",  "fa"}},
      {"training",     {"-",  "-",  "ev", "-",  "rp", "-",  "cp", "-",  "pa", "-",  "rc", "-",  "-",  "-",  "fi", "fa"}},
      {"paused",       {"-",  "-",  "ev", "-",  "-",  "-",  "cp", "-",  "-",  "tr", "rc", "-",  "-",  "-",  "fi", "fa"}},
      {"evaluating",   {"-",  "-",  "-",  "tr", "-",  "-",  "-",  "-",  "-",  "-",  "rc", "-",  "-",  "-",  "fi", "fa"}},
      {"replanning",   {"-",  "-",  "-",  "-",  "-",  "tr", "-",  "-",  "-",  "-",  "rc", "-",  "-",  "-",  "-",  "fa"}},
      {"checkpointing",{"-",  "-",  "-",  "-",  "-",  "-",  "-",  "tr", "-",  "-",  "rc", "-",  "-",  "-",  "-",  "fa"}},
      {"recovering",   {"-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "rc", "tr", "wa", "-",  "-",  "fa"}},
      {"waiting",      {"-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "rc", "-",  "-",  "rc", "-",  "fa"}},
      {"finished",     {"-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-"}},
      {"failed",       {"-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-",  "-"}},
  };
  const std::map<std::string, job_phase> phases = {
      {"starting", job_phase::starting},     {"profiling", job_phase::profiling},
      {"training", job_phase::training},     {"paused", job_phase::paused},
      {"evaluating", job_phase::evaluating}, {"replanning", job_phase::replanning},
      {"checkpointing", job_phase::checkpointing}, {"recovering", job_phase::recovering},
      {"waiting", job_phase::waiting},       {"finished", job_phase::finished},
      {"failed", job_phase::failed}};
  const std::map<std::string, job_phase> abbrev = {
      {"st", job_phase::starting},   {"pr", job_phase::profiling},  {"tr", job_phase::training},
      {"pa", job_phase::paused},     {"ev", job_phase::evaluating}, {"rp", job_phase::replanning},
      {"cp", job_phase::checkpointing}, {"rc", job_phase::recovering}, {"wa", job_phase::waiting},
      {"fi", job_phase::finished},   {"fa", job_phase::failed}};
  REQUIRE(table.size() == phases.size());
  for (auto& [name, row] : table) {
    REQUIRE(row.size() == events.size());
    for (size_t e = 0; e < events.size(); ++e) {
      INFO(name << " --" << to_string(events[e]) << "-->");
      auto got = next_phase(phases.at(name), events[e]);
      if (row[e] == "-") {
        CHECK_FALSE(got.has_value());
      } else {
        REQUIRE(got.has_value());
        CHECK(*got == abbrev.at(row[e]));
      }
    }
  }
}

TEST_CASE("the status shows waiting as paused and checkpointing as training",
          "[unit][job_phase]") {
  CHECK(to_string(job_phase::waiting) == "paused");
  CHECK(to_string(job_phase::checkpointing) == "training");
  CHECK(to_string(job_phase::recovering) == "recovering");
  CHECK(is_over(job_phase::failed));
  CHECK_FALSE(is_running(job_phase::profiling));
  CHECK(is_running(job_phase::waiting));
}

// The federated and split jobs' phase machine (algorithms/round_phase.hpp).
TEST_CASE("a round job's phase moves on every event as its table says",
          "[unit][job_phase]") {
  using E = round_event;
  using P = round_phase;
  const std::vector<E> events = {E::enlist, E::settled, E::no_client,
                                 E::client_back, E::finish, E::fail};
  const std::map<std::string, P> abbrev = {{"st", P::starting}, {"en", P::enlisting},
                                           {"tr", P::training}, {"wa", P::waiting},
                                           {"fi", P::finished}, {"fa", P::failed}};
  // columns in the order above; "-": the event does not apply
  const std::vector<std::pair<P, std::vector<std::string>>> table = {
      //                  enlist settl  noclt  back   fin    fail
      {P::starting,      {"en",  "-",   "-",   "-",   "fi",  "fa"}},
      {P::enlisting,     {"-",   "tr",  "-",   "-",   "fi",  "fa"}},
      {P::training,      {"-",   "-",   "wa",  "tr",  "fi",  "fa"}},
      {P::waiting,       {"-",   "-",   "wa",  "tr",  "fi",  "fa"}},
      {P::finished,      {"-",   "-",   "-",   "-",   "-",   "-"}},
      {P::failed,        {"-",   "-",   "-",   "-",   "-",   "-"}},
  };
  REQUIRE(table.size() == abbrev.size());
  check_table(table, events, abbrev);
}

TEST_CASE("a round job names its enlisting phase in the mode's own word",
          "[unit][job_phase]") {
  CHECK(to_string(round_phase::enlisting, "profiling") == "profiling");
  CHECK(to_string(round_phase::enlisting, "spawning") == "spawning");
  CHECK(to_string(round_phase::waiting) == "waiting");
  CHECK(is_over(round_phase::finished));
  CHECK_FALSE(is_over(round_phase::waiting));
  CHECK(runs_rounds(round_phase::waiting));
  CHECK_FALSE(runs_rounds(round_phase::enlisting));
}

// The serving job's phase machine (algorithms/serve_phase.hpp).
TEST_CASE("a serving job's phase moves on every event as its table says",
          "[unit][job_phase]") {
  using E = serve_event;
  using P = serve_phase;
  const std::vector<E> events = {E::profile, E::launched, E::failure,
                                 E::no_plan, E::finish,   E::fail};
  const std::map<std::string, P> abbrev = {
      {"st", P::starting}, {"pr", P::profiling}, {"se", P::serving}, {"rc", P::recovering},
      {"wa", P::waiting},  {"fi", P::finished},  {"fa", P::failed}};
  const std::vector<std::pair<P, std::vector<std::string>>> table = {
      //                  prof   launch fail.  noplan fin    fail
      {P::starting,      {"pr",  "se",  "-",   "wa",  "fi",  "fa"}},
      {P::profiling,     {"-",   "se",  "-",   "wa",  "fi",  "fa"}},
      {P::serving,       {"-",   "se",  "rc",  "wa",  "fi",  "fa"}},
      {P::recovering,    {"-",   "se",  "rc",  "wa",  "fi",  "fa"}},
      {P::waiting,       {"-",   "se",  "-",   "wa",  "fi",  "fa"}},
      {P::finished,      {"-",   "-",   "-",   "-",   "-",   "-"}},
      {P::failed,        {"-",   "-",   "-",   "-",   "-",   "-"}},
  };
  REQUIRE(table.size() == abbrev.size());
  check_table(table, events, abbrev);
}

TEST_CASE("adaptive batching holds rows only while the pipeline is busy", "[unit][serve]") {
  batching_view v;
  v.batching = true;
  v.waiting_rows = 1;
  v.max_batch = 8;
  v.before_deadline = true;
  v.in_flight = 1;
  CHECK(hold_for_more_rows(v)); // busy, room, time left: wait for company
  auto with = [&](auto change) {
    auto w = v;
    change(w);
    return hold_for_more_rows(w);
  };
  // each reason to go now, alone
  CHECK_FALSE(with([](batching_view& w) { w.in_flight = 0; }));      // idle: a lone request
  CHECK_FALSE(with([](batching_view& w) { w.waiting_rows = 8; }));   // full
  CHECK_FALSE(with([](batching_view& w) { w.waiting_rows = 9; }));   // more than full
  CHECK_FALSE(with([](batching_view& w) { w.before_deadline = false; })); // waited enough
  CHECK_FALSE(with([](batching_view& w) { w.stopping = true; }));
  CHECK_FALSE(with([](batching_view& w) { w.batching = false; }));
  CHECK(with([](batching_view& w) { w.waiting_rows = 7; }));
  CHECK(with([](batching_view& w) { w.in_flight = 5; }));
}

TEST_CASE("a training phase written as status text reads back", "[unit][job_phase]") {
  for (auto p : {job_phase::starting, job_phase::profiling, job_phase::training,
                 job_phase::paused, job_phase::evaluating, job_phase::replanning,
                 job_phase::recovering, job_phase::finished, job_phase::failed}) {
    auto back = job_phase_from_text(to_string(p));
    REQUIRE(back.has_value());
    CHECK(*back == p);
  }
  // what the status shows for them
  CHECK(job_phase_from_text(to_string(job_phase::waiting)) == job_phase::paused);
  CHECK(job_phase_from_text(to_string(job_phase::checkpointing)) == job_phase::training);
  CHECK_FALSE(job_phase_from_text("running").has_value());
}
