#include "algorithms/schedule.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>

namespace salamander::algorithms {

namespace {

void check_shape(int stages, int micro) {
  if (stages < 1 || micro < 1) {
    throw std::invalid_argument("a schedule needs stages >= 1 and micro-batches >= 1, got " +
                                std::to_string(stages) + " and " + std::to_string(micro));
  }
}

std::string balance_text(const std::vector<size_t>& balance) {
  std::string s = "[";
  for (size_t i = 0; i < balance.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(balance[i]);
  }
  return s + "]";
}

} // namespace

schedule_kind parse_schedule(const std::string& name) {
  if (name == "gpipe") {
    return schedule_kind::gpipe;
  }
  if (name == "1f1b") {
    return schedule_kind::one_f_one_b;
  }
  if (name == "async") {
    return schedule_kind::async;
  }
  throw std::invalid_argument("schedule '" + name + "' is not gpipe, 1f1b or async");
}

std::string to_string(schedule_kind k) {
  switch (k) {
  case schedule_kind::gpipe:
    return "gpipe";
  case schedule_kind::one_f_one_b:
    return "1f1b";
  case schedule_kind::async:
    return "async";
  }
  return "?";
}

std::vector<stage_op> stage_order(schedule_kind kind, int stages, int micro, int stage) {
  check_shape(stages, micro);
  if (stage < 0 || stage >= stages) {
    throw std::invalid_argument("stage " + std::to_string(stage) + " outside 0.." +
                                std::to_string(stages - 1));
  }
  if (kind == schedule_kind::async) {
    throw std::invalid_argument("the async schedule has no row per batch (async_order)");
  }
  std::vector<stage_op> ops;
  if (kind == schedule_kind::gpipe) {
    for (int m = 0; m < micro; ++m) {
      ops.push_back({op_kind::forward, m});
    }
    for (int m = micro - 1; m >= 0; --m) {
      ops.push_back({op_kind::backward, m});
    }
    return ops;
  }
  int warmup = std::min(stages - stage - 1, micro);
  for (int m = 0; m < warmup; ++m) {
    ops.push_back({op_kind::forward, m});
  }
  for (int i = 0; i < micro - warmup; ++i) {
    ops.push_back({op_kind::forward, warmup + i});
    ops.push_back({op_kind::backward, i});
  }
  for (int m = micro - warmup; m < micro; ++m) {
    ops.push_back({op_kind::backward, m});
  }
  return ops;
}

namespace {

// Unit-time simulation of stage rows with their dependencies (a forward
// after the previous stage's, a backward after the next stage's, the last
// stage's after its own forward).
std::vector<clocked_op> simulate(const std::vector<std::vector<stage_op>>& rows);

} // namespace

std::vector<clocked_op> clock_table(schedule_kind kind, int stages, int micro) {
  check_shape(stages, micro);
  std::vector<std::vector<stage_op>> rows;
  for (int s = 0; s < stages; ++s) {
    rows.push_back(stage_order(kind, stages, micro, s));
  }
  return simulate(rows);
}

std::pair<uint64_t, uint64_t> async_segment(uint64_t batch, uint64_t start, uint64_t every,
                                            uint64_t epoch, uint64_t total) {
  uint64_t first = start, end = total;
  for (uint64_t k : {every, epoch}) {
    if (k > 0) {
      first = std::max(first, batch / k * k);
      end = std::min(end, (batch / k + 1) * k);
    }
  }
  return {first, std::max(end, first)};
}

uint64_t async_version(uint64_t batch, uint64_t floor, uint64_t delay) {
  return batch >= floor + delay ? batch - delay : floor;
}

uint64_t async_delay(int stages, int micro) {
  check_shape(stages, micro);
  return static_cast<uint64_t>((stages - 1 + micro - 1) / micro);
}

uint64_t async_warmup(int stages, int stage, int micro, uint64_t delay, int slack) {
  check_shape(stages, micro);
  if (slack < 1) {
    throw std::invalid_argument("async slack " + std::to_string(slack) +
                                ": at least 1 (FTPipeHD's batch_diff)");
  }
  // FTPipeHD's S-s-1, and the slack's extra where stage 0's bound d x M
  // leaves room: never as much as the next stage's, or the two would wait
  // for each other's every operation (adjacent rows one forward apart
  // alternate; equal rows take turns)
  auto behind = static_cast<uint64_t>(stages - stage - 1);
  auto most = delay * static_cast<uint64_t>(micro);
  auto base = std::min(behind, most);
  auto room = most > static_cast<uint64_t>(stages - 1) ? most - (stages - 1) : 0;
  return base + std::min((static_cast<uint64_t>(slack) - 1) * behind, room);
}

std::vector<async_op> async_order(int stages, int stage, int micro, uint64_t first,
                                  uint64_t end, uint64_t delay, int slack) {
  check_shape(stages, micro);
  if (stage < 0 || stage >= stages || end < first) {
    throw std::invalid_argument("stage " + std::to_string(stage) + " of " +
                                std::to_string(stages) + ", batches " +
                                std::to_string(first) + ".." + std::to_string(end) +
                                ": not a stage of the pipeline or not a segment");
  }
  auto m = static_cast<uint64_t>(micro);
  uint64_t n = (end - first) * m;
  uint64_t warmup = std::min(async_warmup(stages, stage, micro, delay, slack), n);
  auto at = [&](op_kind op, uint64_t g) {
    return async_op{op, first + g / m, static_cast<int>(g % m)};
  };
  std::vector<async_op> ops;
  ops.reserve(2 * n);
  for (uint64_t g = 0; g < warmup; ++g) {
    ops.push_back(at(op_kind::forward, g));
  }
  for (uint64_t i = 0; i < n - warmup; ++i) {
    ops.push_back(at(op_kind::forward, warmup + i));
    ops.push_back(at(op_kind::backward, i));
  }
  for (uint64_t g = n - warmup; g < n; ++g) {
    ops.push_back(at(op_kind::backward, g));
  }
  return ops;
}

std::vector<clocked_op> async_clock_table(int stages, int micro, uint64_t batches,
                                          uint64_t delay, int slack) {
  std::vector<std::vector<stage_op>> rows;
  for (int s = 0; s < stages; ++s) {
    std::vector<stage_op> row;
    for (auto& op : async_order(stages, s, micro, 0, batches, delay, slack)) {
      row.push_back({op.op, static_cast<int>(op.batch) * micro + op.micro});
    }
    rows.push_back(std::move(row));
  }
  return simulate(rows);
}

namespace {

std::vector<clocked_op> simulate(const std::vector<std::vector<stage_op>>& rows) {
  auto stages = static_cast<int>(rows.size());
  // done[(stage, micro, op)] = clock at which it finished (ran at clock-1)
  std::map<std::tuple<int, int, int>, int> finish;
  std::vector<size_t> next(static_cast<size_t>(stages), 0);
  std::vector<int> free_at(static_cast<size_t>(stages), 0);
  std::vector<clocked_op> table;
  size_t remaining = 0;
  for (auto& row : rows) {
    remaining += row.size();
  }
  auto limit = static_cast<int>(2 * remaining + 4);
  for (int clock = 0; remaining > 0; ++clock) {
    if (clock > limit) {
      throw std::logic_error("schedule deadlocks"); // a bug in stage_order
    }
    std::vector<clocked_op> now;
    for (int s = 0; s < stages; ++s) {
      auto& row = rows[static_cast<size_t>(s)];
      if (next[static_cast<size_t>(s)] >= row.size() || free_at[static_cast<size_t>(s)] > clock) {
        continue;
      }
      auto op = row[next[static_cast<size_t>(s)]];
      std::tuple<int, int, int> dep;
      bool has_dep = true;
      if (op.op == op_kind::forward) {
        has_dep = s > 0;
        dep = {s - 1, op.micro, 0};
      } else if (s == stages - 1) {
        dep = {s, op.micro, 0}; // loss + backward after own forward
      } else {
        dep = {s + 1, op.micro, 1};
      }
      if (has_dep) {
        auto it = finish.find(dep);
        if (it == finish.end() || it->second > clock) {
          continue;
        }
      }
      now.push_back({clock, s, op.micro, op.op});
    }
    for (auto& c : now) {
      finish[{c.stage, c.micro, c.op == op_kind::forward ? 0 : 1}] = clock + 1;
      free_at[static_cast<size_t>(c.stage)] = clock + 1;
      next[static_cast<size_t>(c.stage)]++;
      remaining--;
      table.push_back(c);
    }
  }
  return table;
}

} // namespace

int makespan(const std::vector<clocked_op>& table) {
  int end = 0;
  for (auto& c : table) {
    end = std::max(end, c.clock + 1);
  }
  return end;
}

double bubble_fraction_model(int stages, int micro) {
  check_shape(stages, micro);
  return static_cast<double>(stages - 1) / static_cast<double>(micro + stages - 1);
}

int max_in_flight(schedule_kind kind, int stages, int micro, int stage) {
  int held = 0, most = 0;
  for (auto& op : stage_order(kind, stages, micro, stage)) {
    held += op.op == op_kind::forward ? 1 : -1;
    most = std::max(most, held);
  }
  return most;
}

layer_ranges even_split(size_t layers, int stages) {
  if (stages < 1 || static_cast<size_t>(stages) > layers) {
    throw std::invalid_argument("cannot split " + std::to_string(layers) + " layers into " +
                                std::to_string(stages) + " stages (need 1 <= stages <= layers)");
  }
  layer_ranges out;
  size_t begin = 0;
  auto n = static_cast<size_t>(stages);
  for (size_t s = 0; s < n; ++s) {
    size_t len = layers / n + (s < layers % n ? 1 : 0);
    out.emplace_back(begin, begin + len);
    begin += len;
  }
  return out;
}

layer_ranges ranges_from_balance(const std::vector<size_t>& balance, size_t layers) {
  if (balance.empty()) {
    throw std::invalid_argument("balance is empty");
  }
  size_t sum = 0;
  for (auto b : balance) {
    if (b == 0) {
      throw std::invalid_argument("balance " + balance_text(balance) +
                                  " gives a stage no layers");
    }
    sum += b;
  }
  if (sum != layers) {
    throw std::invalid_argument("balance " + balance_text(balance) + " covers " +
                                std::to_string(sum) + " layers, the model has " +
                                std::to_string(layers));
  }
  layer_ranges out;
  size_t begin = 0;
  for (auto b : balance) {
    out.emplace_back(begin, begin + b);
    begin += b;
  }
  return out;
}

} // namespace salamander::algorithms
