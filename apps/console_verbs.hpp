// The console's commands that change a job, as the messages the cluster
// supervisor takes: written once for `salamander console` and the
// dashboard's actions (POST /api/actions/NAME).
#pragma once

#include "apps/console_parse.hpp"
#include "messages/errors.hpp"
#include "messages/messages.hpp"

#include <caf/all.hpp>

#include <optional>
#include <string>

namespace salamander::apps {

/// Sends `c` through `say(message elements...)` when it is a command that
/// changes the job or a node (kill, slow, cut, repartition, replicate,
/// checkpoint save, pause, resume) and returns what `say` returns; none for
/// the console's own words (status, nodes, plan, metrics, help, quit).
template <class Say>
auto send_command(const console_command& c, Say&& say)
    -> std::optional<decltype(say(pause_atom_v))> {
  switch (c.op) {
  case console_op::kill_stage:
    return say(kill_atom_v, static_cast<uint32_t>(c.stage));
  case console_op::kill_node:
    return say(kill_atom_v, c.args[0]);
  case console_op::slow_node:
    return say(slow_atom_v, c.args[0], c.factor);
  case console_op::cut_node:
    return say(cut_atom_v, c.args[0], c.seconds);
  case console_op::repartition:
    return say(replan_atom_v, c.args.empty() ? std::string{} : c.args[0]);
  case console_op::replicate:
    return say(replicate_atom_v);
  case console_op::checkpoint_save:
    return say(checkpoint_atom_v, c.args[0]);
  case console_op::pause:
    return say(pause_atom_v);
  case console_op::resume:
    return say(resume_atom_v);
  default:
    return std::nullopt;
  }
}

/// An error as a sentence: salamander's own errors carry it as their
/// context ("no live node named node9"), without the category.
inline std::string error_text(caf::actor_system& sys, const caf::error& err) {
  if (err.category() == caf::atom("salamander") &&
      err.context().match_elements<std::string>()) {
    return err.context().get_as<std::string>(0);
  }
  if (err == caf::sec::cannot_connect_to_node) {
    return "nothing answers there (not listening, or not reachable)";
  }
  return sys.render(err);
}

} // namespace salamander::apps
