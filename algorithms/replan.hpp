// When a running training job should re-plan (README, "live re-planning"):
// the capacity model (actors/planning/capacity.hpp) turns profiles and
// measured stage times into the predicted batch time of the current plan
// and of the best plan of each kind; this decides whether the difference is
// worth a pause at the next flush.
//
// The rule: look only every `check_every` commits and at least
// `min_batches` after the last re-plan (measurements settle), and re-plan
// when the best plan is predicted at least `min_gain` faster.
#pragma once

#include <cstdint>

namespace salamander::algorithms {

struct replan_inputs {
  double current_s = 0;   ///< predicted batch time of the plan that runs
  double best_s = 0;      ///< predicted batch time of the best plan found (0: none)
  double min_gain = 0.15; ///< 0 or less: never re-plan
  uint64_t committed = 0;
  uint64_t last_replan_batch = 0;
  int64_t min_batches = 20;
  int64_t check_every = 5;
};

/// True when the job is due to look again at its plan at this commit.
bool replan_check_due(const replan_inputs& in);

struct replan_verdict {
  bool replan = false;
  double gain = 0; ///< 1 - best/current, when there is a best plan
};

/// Whether to re-plan now (and by how much the best plan is faster).
replan_verdict decide_replan(const replan_inputs& in);

} // namespace salamander::algorithms
