#include "actors/pipeline/launcher.hpp"

namespace salamander::actors {

namespace {

using self_ptr = launcher_actor::stateful_pointer<launcher_state>;

void finish(self_ptr self) {
  auto& st = self->state;
  if (!st.result.ok) {
    for (auto& s : st.result.stages) {
      if (s) {
        self->send_exit(s, caf::exit_reason::user_shutdown);
      }
    }
    st.result.stages.clear();
  }
  st.done = true;
  if (!st.waiting.empty()) {
    for (auto& rp : st.waiting) {
      rp.deliver(st.result);
    }
    st.waiting.clear();
    self->quit();
  }
}

void spawn_all(self_ptr self) {
  auto& st = self->state;
  auto n = st.order.specs.size();
  st.result.stages.assign(n, caf::actor{});
  st.spawns_pending = n;
  if (n == 0) {
    finish(self);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    self->request(st.order.nodes[i], st.order.spawn_timeout, spawn_atom_v,
                  st.order.specs[i])
        .then(
            [=](caf::actor handle) {
              auto& st = self->state;
              st.result.stages[i] = handle;
              if (!st.result.ok) {
                self->send_exit(handle, caf::exit_reason::user_shutdown);
              }
              if (--st.spawns_pending == 0) {
                finish(self);
              }
            },
            [=](caf::error& err) {
              auto& st = self->state;
              if (st.result.ok) {
                st.result.ok = false;
                st.result.failed_stage = static_cast<uint32_t>(i);
                st.result.error = "node " + st.order.node_names[i] +
                                  " could not start stage " + std::to_string(i) + ": " +
                                  self->system().render(err);
              }
              if (--st.spawns_pending == 0) {
                finish(self);
              }
            });
  }
}

} // namespace

launcher_actor::behavior_type
launcher(launcher_actor::stateful_pointer<launcher_state> self, launch_order order) {
  auto& st = self->state;
  st.order = std::move(order);
  st.dials_pending = st.order.dials.size();
  if (st.dials_pending == 0) {
    spawn_all(self);
  }
  for (auto& d : st.order.dials) {
    auto a = d.a, b = d.b;
    auto dial_done = [=] {
      if (--self->state.dials_pending == 0) {
        spawn_all(self);
      }
    };
    self->request(d.from, st.order.dial_timeout, peer_atom_v, d.host, d.port)
        .then(
            [=](bool ok) {
              if (ok) {
                self->state.result.peered.push_back(a);
                self->state.result.peered.push_back(b);
              }
              dial_done();
            },
            [=](caf::error&) { dial_done(); });
  }
  return {
      [=](launch_atom) -> caf::result<launch_result> {
        auto& st = self->state;
        auto rp = self->make_response_promise<launch_result>();
        if (st.done) {
          rp.deliver(st.result);
          self->quit(); // one launch, one answer
        } else {
          st.waiting.push_back(rp);
        }
        return rp;
      },
  };
}

} // namespace salamander::actors
