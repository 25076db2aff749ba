#include "algorithms/serve_phase.hpp"

namespace salamander::algorithms {

std::optional<serve_phase> next_phase(serve_phase p, serve_event e) {
  using P = serve_phase;
  using E = serve_event;
  if (is_over(p)) {
    return std::nullopt;
  }
  switch (e) {
  case E::profile:
    return p == P::starting ? std::optional<P>(P::profiling) : std::nullopt;
  case E::launched:
    return P::serving;
  case E::failure:
    return p == P::serving || p == P::recovering ? std::optional<P>(P::recovering)
                                                 : std::nullopt;
  case E::no_plan:
    return P::waiting;
  case E::finish:
    return P::finished;
  case E::fail:
    return P::failed;
  }
  return std::nullopt;
}

std::string to_string(serve_phase p) {
  switch (p) {
  case serve_phase::starting:
    return "starting";
  case serve_phase::profiling:
    return "profiling";
  case serve_phase::serving:
    return "serving";
  case serve_phase::recovering:
    return "recovering";
  case serve_phase::waiting:
    return "waiting";
  case serve_phase::finished:
    return "finished";
  case serve_phase::failed:
    return "failed";
  }
  return "?";
}

std::string to_string(serve_event e) {
  switch (e) {
  case serve_event::profile:
    return "profile";
  case serve_event::launched:
    return "launched";
  case serve_event::failure:
    return "failure";
  case serve_event::no_plan:
    return "no_plan";
  case serve_event::finish:
    return "finish";
  case serve_event::fail:
    return "fail";
  }
  return "?";
}

} // namespace salamander::algorithms
