#include "algorithms/replan.hpp"

namespace salamander::algorithms {

bool replan_check_due(const replan_inputs& in) {
  if (in.min_gain <= 0) {
    return false;
  }
  if (in.committed < in.last_replan_batch + static_cast<uint64_t>(in.min_batches)) {
    return false;
  }
  return in.check_every <= 1 || in.committed % static_cast<uint64_t>(in.check_every) == 0;
}

replan_verdict decide_replan(const replan_inputs& in) {
  replan_verdict v;
  if (in.current_s <= 0 || in.best_s <= 0) {
    return v;
  }
  v.gain = 1.0 - in.best_s / in.current_s;
  v.replan = replan_check_due(in) && in.best_s < in.current_s * (1.0 - in.min_gain);
  return v;
}

} // namespace salamander::algorithms
