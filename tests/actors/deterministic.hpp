// What the deterministic actor tests share: an actor system on CAF's test
// coordinator (every actor runs one message at a time on the test's
// thread, time moves only when the test triggers a timeout), and the state
// of a stateful actor reached through its handle.
#pragma once

#include "actors/cluster/cluster_file.hpp"
#include "actors/cluster/cluster_supervisor.hpp"
#include "actors/node/node.hpp"
#include "actors/node/system.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <catch2/catch.hpp>

namespace salamander::testing {

inline caf::actor_system_config& deterministic(caf::actor_system_config& cfg) {
  actors::system_options opts;
  opts.deterministic = true;
  actors::configure(cfg, opts);
  return cfg;
}

/// A node in the test's process whose work, its profiler's included, runs
/// on the test coordinator.
inline node_actor coordinator_node(caf::actor_system& sys, const std::string& name) {
  actors::node_config c;
  c.name = name;
  c.host = "embedded";
  c.detached_profiler = false;
  return sys.spawn(actors::node, c);
}

/// Nodes local0 .. local(n-1) on the test coordinator, as a cluster
/// supervisor takes them.
inline std::vector<actors::remote_node> coordinator_nodes(caf::actor_system& sys, int n) {
  std::vector<actors::remote_node> out;
  for (int i = 0; i < n; ++i) {
    auto name = "local" + std::to_string(i);
    out.push_back({name, coordinator_node(sys, name)});
  }
  return out;
}

/// A cluster supervisor over `n` nodes on the test coordinator; their
/// handles are added to `nodes`.
inline cluster_actor coordinator_cluster(caf::actor_system& sys, int n,
                                         std::vector<node_actor>& nodes) {
  auto remote = coordinator_nodes(sys, n);
  for (auto& r : remote) {
    nodes.push_back(r.handle);
  }
  return sys.spawn(actors::cluster_supervisor, actors::cluster_config{}, remote);
}

template <class State, class Handle> State& deref(const Handle& h) {
  auto* ptr = caf::actor_cast<caf::abstract_actor*>(h);
  auto* typed = dynamic_cast<typename Handle::template stateful_pointer<State>>(ptr);
  REQUIRE(typed != nullptr);
  return typed->state;
}

/// What a dead device looks like: its node actor and every actor on it
/// (stages or clients, replica holder, profiler) gone at once.
inline void kill_node(const node_actor& node) {
  auto& ns = deref<actors::node_state>(node);
  for (auto& s : ns.stages) {
    caf::anon_send_exit(s, caf::exit_reason::kill);
  }
  caf::anon_send_exit(ns.holder, caf::exit_reason::kill);
  caf::anon_send_exit(ns.profiler, caf::exit_reason::kill);
  caf::anon_send_exit(node, caf::exit_reason::kill);
}

/// A console command (a request answered with text) to `job`, answered on
/// the test coordinator: the text, or "error: " and the error rendered.
template <class Handle, class... Ts>
std::string ask_text(caf::actor_system& sys, const Handle& job, Ts... xs) {
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  auto out = std::make_shared<std::string>();
  auto j = caf::actor_cast<caf::actor>(job);
  sys.spawn([=](caf::event_based_actor* self) {
    self->request(j, std::chrono::seconds(10), xs...)
        .then([out](std::string& s) { *out = s; },
              [out, self](caf::error& e) { *out = "error: " + self->system().render(e); });
  });
  while (out->empty() && (sched.try_run_once() || sched.trigger_timeout())) {
  }
  return *out;
}

/// The job's timeline from event `since` on: each event's kind, in order
/// (checking that their numbers run on from `since` without a gap).
template <class Handle>
std::vector<std::string> ask_events(caf::actor_system& sys, const Handle& job, uint64_t since) {
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  auto lines = std::make_shared<std::optional<std::vector<std::string>>>();
  auto j = caf::actor_cast<caf::actor>(job);
  sys.spawn([=](caf::event_based_actor* self) {
    self->request(j, std::chrono::seconds(10), events_atom_v, since)
        .then([lines](std::vector<std::string>& l) { *lines = std::move(l); },
              [lines](caf::error&) { *lines = std::vector<std::string>{}; });
  });
  while (!*lines && (sched.try_run_once() || sched.trigger_timeout())) {
  }
  std::vector<std::string> kinds;
  uint64_t seq = since;
  for (auto& l : lines->value_or(std::vector<std::string>{})) {
    auto e = nlohmann::json::parse(l);
    if (e.at("seq").get<uint64_t>() != seq++) {
      kinds.push_back("(gap before " + e.at("event").get<std::string>() + ")");
    }
    kinds.push_back(e.at("event").get<std::string>());
  }
  return kinds;
}

} // namespace salamander::testing
