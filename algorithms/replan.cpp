#include "algorithms/replan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace salamander::algorithms {

bool replan_check_due(const replan_inputs& in) {
  if (in.min_gain <= 0 || in.user_plan) {
    return false;
  }
  if (in.committed < in.last_replan_batch + static_cast<uint64_t>(in.min_batches)) {
    return false;
  }
  return in.look_every_s <= 0 || in.last_look_s < 0 ||
         in.now_s - in.last_look_s >= in.look_every_s;
}

double replan_history::weight_at(double now_s, double half_life_s) const {
  if (weight <= 0) {
    return 0;
  }
  if (half_life_s <= 0) {
    return 0;
  }
  return weight * std::exp2(-std::max(0.0, now_s - at_s) / half_life_s);
}

void replan_history::record(double now_s, double half_life_s) {
  weight = weight_at(now_s, half_life_s) + 1.0;
  at_s = now_s;
}

double faded_error(double error, double age_s, double half_life_s) {
  if (!(error > 1.0)) {
    return 1.0;
  }
  if (half_life_s <= 0) {
    return error;
  }
  return std::pow(error, std::exp2(-std::max(0.0, age_s) / half_life_s));
}

double required_gain(double min_gain, double recent_moves) {
  if (min_gain <= 0 || min_gain >= 1) {
    return min_gain;
  }
  return 1.0 - std::pow(1.0 - min_gain, std::exp2(std::max(0.0, recent_moves)));
}

namespace {

std::string words(const char* format, double a, double b = 0, double c = 0) {
  char out[200];
  std::snprintf(out, sizeof out, format, a, b, c);
  return out;
}

} // namespace

replan_verdict decide_replan(const replan_inputs& in, replan_memory& memory) {
  replan_verdict v;
  if (in.user_plan) {
    v.why = "the user's plan holds";
    return v;
  }
  if (!replan_check_due(in)) {
    v.why = "not due";
    return v;
  }
  if (in.replaced_measured_s > 0 && in.measured_s > 0 &&
      in.measured_s > in.replaced_measured_s * (1.0 + in.min_gain) &&
      (in.replaced_predicted_s <= 0 ||
       in.measured_s > in.replaced_predicted_s * (1.0 + in.min_gain))) {
    v.action = replan_action::revert;
    v.why = words("the new plan measured %.3f s per batch, the one it replaced %.3f s",
                  in.measured_s, in.replaced_measured_s);
    return v;
  }
  if (in.current_s <= 0) {
    v.why = "no prediction for the plan that runs";
    return v;
  }
  v.gain = in.best_s > 0 ? 1.0 - in.best_s / in.current_s : 0.0;
  // a new candidate, when there is none (or it no longer fits): the look
  // that picks it does not count for it
  auto pick_new = [&](const char* why) {
    memory.clear();
    if (in.best_s > 0) {
      memory.candidate = in.best_plan;
      memory.picked_s = in.now_s;
      v.why = std::string(why) + "; a new candidate: " + in.best_plan;
    } else {
      v.why = std::string(why) + "; no better plan";
    }
  };
  if (memory.candidate.empty() || in.candidate_s <= 0) {
    pick_new("no candidate");
    return v;
  }
  // every look after that predicts its gain afresh, whatever plan is best
  // now: a window of fresh predictions, judged when full (a window cut
  // short by what it shows would be as biased as the pick)
  // (scaled by how wrong the model was about the last re-plan)
  double promised_s = in.candidate_s * std::max(1.0, in.prediction_error);
  double fresh = 1.0 - promised_s / in.current_s;
  memory.gains.push_back(fresh);
  // (a window is `window` looks at least, and `sustain_s` seconds)
  auto window = static_cast<size_t>(std::max(1, in.window));
  double n = static_cast<double>(memory.gains.size());
  double mean = 0;
  v.lower_gain = memory.gains.front();
  for (double g : memory.gains) {
    mean += g / n;
    v.lower_gain = std::min(v.lower_gain, g);
  }
  if (memory.gains.size() < window || in.now_s - memory.picked_s < in.sustain_s) {
    v.why = words("%.0f of %.0f looks at the candidate, over %.1f s", n,
                  static_cast<double>(window), in.now_s - memory.picked_s);
    return v;
  }
  double needed = required_gain(in.min_gain, in.recent_moves);
  if (v.lower_gain < needed) {
    pick_new(
        words("the candidate's gain (mean %.0f%%, %.0f%% at its worst look) is under "
              "the %.0f%% asked",
              100 * mean, 100 * v.lower_gain, 100 * needed)
            .c_str());
    return v;
  }
  double batches = static_cast<double>(std::min(in.horizon_batches, in.batches_left));
  double saved = (in.current_s - promised_s) * batches;
  if (saved < in.payback * in.move_cost_s) {
    pick_new(
        words("saves %.2f s over the batches ahead, moving costs %.2f s (x%.0f needed)",
              saved, in.move_cost_s, in.payback)
            .c_str());
    return v;
  }
  v.action = replan_action::replan;
  v.gain = fresh;
  v.why = words("%.0f%% faster predicted, at least %.0f%% at each of %.0f looks",
                100 * fresh, 100 * v.lower_gain, n);
  return v;
}

} // namespace salamander::algorithms
