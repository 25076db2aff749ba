// Why an actor or a node went away, in words a log reader can act on: CAF
// renders a clean exit as "none" and a broken connection as
// "remote_link_unreachable", which say little to an operator.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/exit_reason.hpp>

#include <optional>
#include <string>
#include <utility>

namespace salamander::actors {

/// The words for a reason CAF knows (a clean exit included), or none.
inline std::optional<std::string> known_exit_text(const caf::error& reason) {
  if (!reason) {
    return "it stopped cleanly (its process ended or it was told to leave)";
  }
  using caf::exit_reason;
  static const std::pair<exit_reason, const char*> known[] = {
      {exit_reason::remote_link_unreachable,
       "its connection broke (the process was killed or crashed, or its host or link is "
       "down)"},
      {exit_reason::user_shutdown, "it was shut down"},
      {exit_reason::kill, "it was killed"},
      {exit_reason::unhandled_exception, "it failed with an unhandled exception"},
      {exit_reason::out_of_workers, "its actor system ran out of workers"},
      {exit_reason::unreachable, "it is unreachable"},
  };
  for (auto& [r, text] : known) {
    if (reason.code() == static_cast<uint8_t>(r) &&
        reason.category() == caf::make_error(r).category()) {
      return std::string(text);
    }
  }
  return std::nullopt;
}

inline std::string exit_text(caf::actor_system& sys, const caf::error& reason) {
  auto words = known_exit_text(reason);
  return words ? *words : sys.render(reason);
}

} // namespace salamander::actors
