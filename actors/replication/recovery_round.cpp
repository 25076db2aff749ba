#include "actors/replication/recovery_round.hpp"

#include "algorithms/recovery.hpp"

namespace salamander::actors {

namespace {

void decide(recovery_round_actor::stateful_pointer<recovery_round_state> self) {
  auto& st = self->state;
  st.decision = decide_recovery(st.request, st.found);
  st.decision.unanswered = st.unanswered;
  st.decided = true;
  if (!st.waiting.empty()) {
    for (auto& rp : st.waiting) {
      rp.deliver(st.decision);
    }
    st.waiting.clear();
    self->quit(); // one round, one decision
  }
}

} // namespace

std::vector<algorithms::recovery_source>
as_recovery_sources(const std::vector<recovery_source_info>& found) {
  std::vector<algorithms::recovery_source> out;
  for (auto& f : found) {
    algorithms::recovery_source s;
    s.node = static_cast<size_t>(f.node);
    s.central = f.central;
    s.stage = f.stage;
    s.begin = f.begin;
    s.end = f.end;
    for (size_t i = 0; i < f.inventory.layers.size() && i < f.inventory.versions.size();
         ++i) {
      s.held.emplace_back(f.inventory.layers[i], f.inventory.versions[i]);
    }
    out.push_back(std::move(s));
  }
  return out;
}

recovery_decision decide_recovery(const recovery_request& request,
                                  const std::vector<recovery_source_info>& found) {
  recovery_decision d;
  d.sources = found;
  auto sources = as_recovery_sources(found);
  d.version = algorithms::rollback_version(sources, request.layers, request.committed);
  if (request.fast) {
    auto choice = algorithms::fast_sources(sources, request.layers);
    if (choice.missing) {
      d.fallback = "layer " + std::to_string(*choice.missing) +
                   " has no replica; recovering exactly";
    } else {
      d.fast = true;
      for (auto& p : choice.picks) {
        d.pick_source.push_back(p.source);
        d.pick_version.push_back(p.version);
      }
    }
  }
  return d;
}

recovery_round_actor::behavior_type
recovery_round(recovery_round_actor::stateful_pointer<recovery_round_state> self,
               recovery_request request) {
  auto& st = self->state;
  st.request = std::move(request);
  st.pending = st.request.sources.size();
  for (auto& src : st.request.sources) {
    // the same question to a stage or a holder; no answer in time: nothing
    // to use from there
    auto one_done = [=] {
      if (--self->state.pending == 0) {
        decide(self);
      }
    };
    auto got = [=](replica_inventory& inv) {
      auto copy = src;
      copy.inventory = std::move(inv);
      self->state.found.push_back(std::move(copy));
      one_done();
    };
    auto none = [=](caf::error&) {
      self->state.unanswered++;
      one_done();
    };
    if (src.stage) {
      self->request(caf::actor_cast<stage_actor>(src.handle), st.request.stage_timeout,
                    caf::get_atom_v)
          .then(got, none);
    } else {
      self->request(caf::actor_cast<replica_holder_actor>(src.handle),
                    st.request.holder_timeout, caf::get_atom_v)
          .then(got, none);
    }
  }
  if (st.pending == 0) {
    decide(self);
  }
  return {
      [=](recover_atom) -> caf::result<recovery_decision> {
        auto& st = self->state;
        auto rp = self->make_response_promise<recovery_decision>();
        if (st.decided) {
          rp.deliver(st.decision);
          self->quit();
        } else {
          st.waiting.push_back(rp);
        }
        return rp;
      },
  };
}

} // namespace salamander::actors
