#include "algorithms/job_phase.hpp"

namespace salamander::algorithms {

bool is_running(job_phase p) {
  switch (p) {
  case job_phase::training:
  case job_phase::paused:
  case job_phase::evaluating:
  case job_phase::replanning:
  case job_phase::checkpointing:
  case job_phase::recovering:
  case job_phase::waiting:
    return true;
  default:
    return false;
  }
}

std::optional<job_phase> next_phase(job_phase p, job_event e) {
  using P = job_phase;
  using E = job_event;
  if (is_over(p)) {
    return std::nullopt;
  }
  switch (e) {
  case E::fail:
    return P::failed;
  case E::failure:
    // before the first plan runs, a lost node fails the job (start-up
    // problems are reported, not recovered from)
    return is_running(p) ? std::optional<P>(P::recovering) : std::optional<P>(P::failed);
  case E::finish:
    // the last commit (or its evaluation) ends the job
    return p == P::training || p == P::paused || p == P::evaluating
               ? std::optional<P>(P::finished)
               : std::nullopt;
  default:
    break;
  }
  switch (p) {
  case P::starting:
    if (e == E::profile) {
      return P::profiling;
    }
    if (e == E::launched) {
      return P::training;
    }
    return std::nullopt;
  case P::profiling:
    return e == E::launched ? std::optional<P>(P::training) : std::nullopt;
  case P::training:
    switch (e) {
    case E::epoch_end:
      return P::evaluating;
    case E::replan:
      return P::replanning;
    case E::checkpoint:
      return P::checkpointing;
    case E::pause:
      return P::paused;
    default:
      return std::nullopt;
    }
  case P::paused:
    switch (e) {
    case E::resume:
      return P::training;
    case E::checkpoint:
      return P::checkpointing; // a checkpoint of a paused job is taken at once
    case E::epoch_end:
      return P::evaluating; // the batches in flight finished the epoch
    default:
      return std::nullopt;
    }
  case P::evaluating:
    return e == E::evaluated ? std::optional<P>(P::training) : std::nullopt;
  case P::replanning:
    return e == E::replanned ? std::optional<P>(P::training) : std::nullopt;
  case P::checkpointing:
    return e == E::checkpointed ? std::optional<P>(P::training) : std::nullopt;
  case P::recovering:
    if (e == E::recovered) {
      return P::training;
    }
    if (e == E::no_capacity) {
      return P::waiting;
    }
    return std::nullopt;
  case P::waiting:
    return e == E::joined ? std::optional<P>(P::recovering) : std::nullopt;
  default:
    return std::nullopt;
  }
}

std::string to_string(job_phase p) {
  switch (p) {
  case job_phase::starting:
    return "starting";
  case job_phase::profiling:
    return "profiling";
  case job_phase::training:
  case job_phase::checkpointing:
    return "training";
  case job_phase::paused:
  case job_phase::waiting:
    return "paused";
  case job_phase::evaluating:
    return "evaluating";
  case job_phase::replanning:
    return "replanning";
  case job_phase::recovering:
    return "recovering";
  case job_phase::finished:
    return "finished";
  case job_phase::failed:
    return "failed";
  }
  return "?";
}

std::string to_string(job_event e) {
  switch (e) {
  case job_event::profile:
    return "profile";
  case job_event::launched:
    return "launched";
  case job_event::epoch_end:
    return "epoch_end";
  case job_event::evaluated:
    return "evaluated";
  case job_event::replan:
    return "replan";
  case job_event::replanned:
    return "replanned";
  case job_event::checkpoint:
    return "checkpoint";
  case job_event::checkpointed:
    return "checkpointed";
  case job_event::pause:
    return "pause";
  case job_event::resume:
    return "resume";
  case job_event::failure:
    return "failure";
  case job_event::recovered:
    return "recovered";
  case job_event::no_capacity:
    return "no_capacity";
  case job_event::joined:
    return "joined";
  case job_event::finish:
    return "finish";
  case job_event::fail:
    return "fail";
  }
  return "?";
}

std::optional<job_phase> job_phase_from_text(const std::string& text) {
  for (auto p : {job_phase::starting, job_phase::profiling, job_phase::training,
                 job_phase::paused, job_phase::evaluating, job_phase::replanning,
                 job_phase::recovering, job_phase::finished, job_phase::failed}) {
    if (to_string(p) == text) {
      return p;
    }
  }
  return std::nullopt;
}

} // namespace salamander::algorithms
