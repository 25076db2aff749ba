// What the deterministic actor tests share: an actor system on CAF's test
// coordinator (every actor runs one message at a time on the test's
// thread, time moves only when the test triggers a timeout), and the state
// of a stateful actor reached through its handle.
#pragma once

#include "actors/node/system.hpp"

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <catch2/catch.hpp>

namespace salamander::testing {

inline caf::actor_system_config& deterministic(caf::actor_system_config& cfg) {
  actors::system_options opts;
  opts.deterministic = true;
  actors::configure(cfg, opts);
  return cfg;
}

template <class State, class Handle> State& deref(const Handle& h) {
  auto* ptr = caf::actor_cast<caf::abstract_actor*>(h);
  auto* typed = dynamic_cast<typename Handle::template stateful_pointer<State>>(ptr);
  REQUIRE(typed != nullptr);
  return typed->state;
}

} // namespace salamander::testing
