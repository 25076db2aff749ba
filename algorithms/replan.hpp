// When a running training job should re-plan (README, "live re-planning"):
// the capacity model (actors/planning/capacity.hpp) turns profiles and
// measured stage times into the predicted batch time of the current plan
// and of the best plan of each kind; this decides whether the difference is
// worth a pause at the next flush.
//
// The rule, in order:
//  - a plan the user chose (`--balance`, `--stages N`, console
//    `repartition`) holds: capacity never replaces it;
//  - look every `look_every_s` seconds of wall time, whether batches commit
//    or not (a device that slows 10x commits 10x less often; looks counted
//    in commits would come 10x later), and only `min_batches` after the
//    last re-plan (measurements settle);
//  - a plan measured slower than the one it replaced goes back to that one
//    (a prediction the devices contradicted), unless the model, from the
//    speeds measured since, predicts the replaced plan slower now;
//  - otherwise the best plan a look finds becomes the candidate, and the
//    looks after it predict the candidate's gain afresh. A plan picked as
//    the best of many noisy predictions looks better than it is (the
//    minimum of noisy numbers is biased low); predicted again from newer
//    measurements it is not. The job re-plans only when each of the
//    `window` looks (and `sustain_s` seconds) after the pick predicts the
//    candidate at least `min_gain` faster: noise of +/-30% passes one look in four, not
//    eight in a row; a sustained slow-down passes every look. A window is judged when
//    full (cut short by what it shows, it would be as biased as the pick); a candidate
//    that fails is replaced by the newest best;
//  - predictions are first scaled by how far the last capacity re-plan
//    measured behind its prediction (a model that was wrong here before
//    must promise more);
//  - and the gain over the next `horizon_batches` (or the batches left, if
//    fewer) repays the measured cost of moving `payback` times;
//  - each capacity move of the job's recent past (a re-plan or a going
//    back) raises the gain the next one must show, as route-flap damping
//    does: the speed-up asked, 1 / (1 - min_gain), is raised to the power
//    2^w, where w counts the moves, each weighing half as much every
//    `half_life_s`. A host's load that moves between cores makes equal
//    devices differ by 25-50% for tens of seconds, which passes any window
//    short enough to answer a slow-down in seconds; it does not pass twice
//    in a few minutes. A 5x slow-down (a gain of 60% and more) still does.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

namespace salamander::algorithms {

struct replan_inputs {
  double current_s = 0;  ///< predicted batch time of the plan that runs
  double best_s = 0;     ///< predicted batch time of the best plan found (0: none)
  std::string best_plan; ///< which plan that is (its description)
  /// Predicted batch time, at this look, of the candidate in
  /// `replan_memory` (0: there is none, or it no longer fits).
  double candidate_s = 0;
  double min_gain = 0.15; ///< 0 or less: never re-plan
  uint64_t committed = 0;
  uint64_t last_replan_batch = 0;
  int64_t min_batches = 20;
  /// Seconds between looks, and when the last one was taken (`now_s`'s
  /// clock; below 0: never). 0: look whenever asked (tests step by commits).
  double look_every_s = 0.5;
  double last_look_s = -1;
  /// Fresh looks at a candidate that must each show `min_gain`, over at
  /// least `sustain_s` seconds (a host's load moves between cores in
  /// seconds: a plan must be worse for longer than that).
  int window = 8;
  double sustain_s = 0;
  double now_s = 0; ///< this look's time (any steady clock, in seconds)
  /// Seconds a re-plan costs the job (the pause of the last one, measured,
  /// or an estimate from the bytes it moves), the batches its gain is
  /// counted over, and how many times the gain must repay it.
  double move_cost_s = 0;
  uint64_t horizon_batches = 200;
  uint64_t batches_left = UINT64_MAX;
  double payback = 3.0;
  /// How much slower than predicted the last capacity re-plan measured (1:
  /// as predicted, or none yet; faded by its age, `faded_error`): the
  /// model's own error here, by which every candidate's prediction is made
  /// more pessimistic.
  double prediction_error = 1.0;
  /// The job's capacity moves lately (`replan_history::weight_at`): 0
  /// none, 1 one just made.
  double recent_moves = 0;
  /// The user chose the plan that runs.
  bool user_plan = false;
  /// Measured batch time of the plan that runs (0: not measured yet), and of
  /// the plan it replaced when that was a capacity re-plan (0: none).
  double measured_s = 0;
  double replaced_measured_s = 0;
  /// The replaced plan's batch time as the model predicts it now, from the
  /// devices' current measured speeds (0: unknown). Its measurement is from
  /// before the re-plan: when a device it uses has slowed since, it would
  /// run slower than that now, and going back would be going onto the slow
  /// device. A revert needs both to show it faster.
  double replaced_predicted_s = 0;
};

/// What the job remembers between looks: the candidate plan, when it was
/// picked, and its fresh predicted gains since, newest last.
struct replan_memory {
  std::string candidate;
  std::deque<double> gains;
  double picked_s = 0; ///< when the candidate was picked
  void clear() {
    candidate.clear();
    gains.clear();
    picked_s = 0;
  }
};

/// The job's capacity moves (re-plans and goings back), each weighing 1
/// when made and half as much every `half_life_s` after.
struct replan_history {
  double weight = 0; ///< at `at_s`
  double at_s = 0;
  double weight_at(double now_s, double half_life_s) const;
  void record(double now_s, double half_life_s);
};

/// The last capacity re-plan's prediction error (its measured batch time
/// over its predicted, at least 1) as it counts `age_s` seconds after it
/// was measured: its logarithm halves every `half_life_s` (0 or less: in
/// full). A model that promised a plan 30% faster here and measured it
/// slower is not believed again a minute later at its full word; it is in
/// ten.
double faded_error(double error, double age_s, double half_life_s);

/// The smallest gain a candidate must show after `recent_moves`:
/// 1 - (1 - min_gain)^(2^recent_moves). With min_gain 0.15: 15% after none,
/// 28% after one, 48% after two.
double required_gain(double min_gain, double recent_moves);

/// True when the job is due to look again at its plan now.
bool replan_check_due(const replan_inputs& in);

enum class replan_action {
  keep,
  replan, ///< to the best plan found
  revert, ///< back to the plan this one replaced
};

struct replan_verdict {
  replan_action action = replan_action::keep;
  bool replan() const { return action != replan_action::keep; }
  double gain = 0;       ///< 1 - best/current at this look, when there is a best plan
  double lower_gain = 0; ///< the candidate's smallest fresh gain in the window
  std::string why;       ///< in words, for the log
};

/// Whether to re-plan at this look; records the look in `memory`.
replan_verdict decide_replan(const replan_inputs& in, replan_memory& memory);

} // namespace salamander::algorithms
