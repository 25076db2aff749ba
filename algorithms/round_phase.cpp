#include "algorithms/round_phase.hpp"

namespace salamander::algorithms {

std::optional<round_phase> next_phase(round_phase p, round_event e) {
  using P = round_phase;
  using E = round_event;
  if (is_over(p)) {
    return std::nullopt;
  }
  switch (e) {
  case E::finish:
    return P::finished;
  case E::fail:
    return P::failed;
  case E::enlist:
    return p == P::starting ? std::optional<P>(P::enlisting) : std::nullopt;
  case E::settled:
    return p == P::enlisting ? std::optional<P>(P::training) : std::nullopt;
  case E::no_client:
    return runs_rounds(p) ? std::optional<P>(P::waiting) : std::nullopt;
  case E::client_back:
    return runs_rounds(p) ? std::optional<P>(P::training) : std::nullopt;
  }
  return std::nullopt;
}

std::string to_string(round_phase p, const char* enlisting) {
  switch (p) {
  case round_phase::starting:
    return "starting";
  case round_phase::enlisting:
    return enlisting;
  case round_phase::training:
    return "training";
  case round_phase::waiting:
    return "waiting";
  case round_phase::finished:
    return "finished";
  case round_phase::failed:
    return "failed";
  }
  return "?";
}

std::string to_string(round_event e) {
  switch (e) {
  case round_event::enlist:
    return "enlist";
  case round_event::settled:
    return "settled";
  case round_event::no_client:
    return "no_client";
  case round_event::client_back:
    return "client_back";
  case round_event::finish:
    return "finish";
  case round_event::fail:
    return "fail";
  }
  return "?";
}

} // namespace salamander::algorithms
