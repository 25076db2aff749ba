#include "actors/node.hpp"

#include "actors/stage.hpp"
#include "messages/errors.hpp"

namespace salamander::actors {

std::string check_stage_spec(const stage_spec& spec) {
  try {
    auto desc = models::describe(models::model_spec::parse(spec.model));
    if (desc.fingerprint != spec.fingerprint) {
      return "this node describes model " + spec.model + " with fingerprint " + desc.fingerprint +
             ", the supervisor with " + spec.fingerprint +
             " (different salamander builds?)";
    }
    if (spec.begin >= spec.end || spec.end > desc.layers.size()) {
      return "layer range [" + std::to_string(spec.begin) + ", " + std::to_string(spec.end) +
             ") is not within the " + std::to_string(desc.layers.size()) + " layers of " +
             spec.model;
    }
    if (spec.index >= spec.stages || spec.micro_batches < 1) {
      return "stage " + std::to_string(spec.index) + " of " + std::to_string(spec.stages) +
             " with " + std::to_string(spec.micro_batches) + " micro-batches is not valid";
    }
    algorithms::parse_schedule(spec.schedule);
    models::optimizer_config ocfg{spec.optimizer, spec.lr, spec.momentum, 0.0};
    models::make_optimizer(ocfg, {}); // validates kind and rate
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

node_actor::behavior_type node(node_actor::stateful_pointer<node_state> self, node_config cfg) {
  self->state.config = std::move(cfg);
  return {
      [=](hello_atom, uint32_t protocol) -> caf::result<node_info> {
        auto& c = self->state.config;
        if (protocol != protocol_version) {
          return caf::make_error(errc::protocol_mismatch,
                                 "node " + c.name + " speaks protocol " +
                                     std::to_string(protocol_version) + ", the supervisor " +
                                     std::to_string(protocol));
        }
        node_info info;
        info.name = c.name;
        info.protocol = protocol_version;
        info.host = c.host;
        info.threads = c.threads;
        info.zoo_fingerprint = models::describe(models::model_spec::parse("cnn")).fingerprint;
        return info;
      },
      [=](spawn_atom, stage_spec spec) -> caf::result<caf::actor> {
        auto why = check_stage_spec(spec);
        if (!why.empty()) {
          return caf::make_error(errc::model_mismatch,
                                 "node " + self->state.config.name + ": " + why);
        }
        try {
          auto s = self->spawn(stage, std::move(spec));
          auto handle = caf::actor_cast<caf::actor>(s);
          self->state.stages.push_back(handle);
          return handle;
        } catch (const std::exception& e) {
          return caf::make_error(errc::stage_failed,
                                 "node " + self->state.config.name + ": " + e.what());
        }
      },
      [=](leave_atom) {
        for (auto& s : self->state.stages) {
          self->send_exit(s, caf::exit_reason::user_shutdown);
        }
        self->state.stages.clear();
        self->quit();
      },
  };
}

} // namespace salamander::actors
