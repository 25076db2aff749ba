// What the jobs with one client per node (federated, split learning) share
// about their clients: client i runs on node i of the start; a spawn that
// fails is tried again later, spaced out; a node that is lost takes its
// client out; a node that comes back gets its client again, and a node
// that joins later stays unused (the data was sharded over the clients of
// the start). The jobs keep their own entries (State::clients, each with
// failures, last_error, retry_at) and their own rounds.
#pragma once

#include "actors/job/job_nodes.hpp"
#include "actors/job/metrics.hpp"
#include "messages/errors.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <string>

namespace salamander::actors::roster {

constexpr auto respawn_wait = std::chrono::seconds(2);

/// A spawn (or the check after it) failed: try again later, spaced out (up
/// to half a minute between attempts).
template <class Entry> void spawn_failed(Entry& c, const std::string& why) {
  c.failures++;
  c.last_error = why;
  c.retry_at = std::chrono::steady_clock::now() + respawn_wait * std::min(c.failures, 15);
}

/// No client has ever trained and none can start (every live node failed
/// three times, `ready(entry)` false for all): the job should say why
/// instead of waiting for ever.
template <class State, class Ready> bool hopeless(const State& st, Ready ready) {
  if (st.training_started) {
    return false;
  }
  for (size_t i = 0; i < st.clients.size(); ++i) {
    auto& c = st.clients[i];
    if (!st.nodes[i].dead && (ready(c) || c.failures < 3)) {
      return false;
    }
  }
  return true;
}

/// Node n is lost: marked dead, logged; true if it was not dead already
/// (the caller then takes its client out).
template <class State> bool mark_lost(State& st, uint32_t n, const std::string& why) {
  if (n >= st.nodes.size() || st.nodes[n].dead) {
    return false;
  }
  st.nodes[n].dead = true;
  st.status.dead_nodes.push_back(st.nodes[n].name);
  if (st.metrics) {
    st.metrics->write("failure", {{"node", st.nodes[n].name}, {"why", why}});
  }
  return true;
}

/// Node n joined (or came back) as `m`; what the console is told. `job`:
/// "federated", "split".
template <class State>
caf::result<std::string> node_joined(State& st, bool over, const std::string& job,
                                     uint32_t n, const cluster_member& m) {
  if (over) {
    return caf::make_error(errc::bad_config, "the " + job + " job has ended");
  }
  auto how = take_joined(st.nodes, st.status.dead_nodes, n, m);
  if (how == joined::unknown) {
    return caf::make_error(errc::bad_config,
                           "node index " + std::to_string(n) + " is unknown");
  }
  if (st.metrics) {
    st.metrics->write("join", {{"node", m.name}});
  }
  if (how == joined::new_node) {
    return "node " + m.name + " joined; the data is sharded over the " +
           std::to_string(st.clients.size()) +
           " clients of the start, so it stays unused";
  }
  if (n >= st.clients.size()) {
    return "node " + m.name +
           " is back; it joined after the shards were drawn, so it stays "
           "unused";
  }
  st.clients[n].retry_at = std::chrono::steady_clock::now();
  return "node " + m.name + " is back; its client starts again and joins the next round";
}

/// Console pause: the round in hand finishes, no new one starts.
template <class State> std::string pause_rounds(State& st) {
  if (st.user_paused) {
    return "already paused; resume carries on";
  }
  st.user_paused = true;
  if (st.metrics) {
    st.metrics->write("pause");
  }
  return "paused: the round in hand finishes, no new one starts";
}

/// Console resume; true in `resumed` if the job was paused (the caller then
/// starts the next round).
template <class State> std::string resume_rounds(State& st, bool& resumed) {
  resumed = st.user_paused;
  if (!st.user_paused) {
    return "not paused";
  }
  st.user_paused = false;
  if (st.metrics) {
    st.metrics->write("resume");
  }
  return "resumed: the next round starts";
}

} // namespace salamander::actors::roster
