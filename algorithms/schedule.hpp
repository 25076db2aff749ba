// Micro-batch schedules for pipeline training, as pure tables.
//
// Both schedules end every batch with a flush (all M backward passes done
// before the optimizer steps), so both compute exactly what one device
// computes with gradient accumulation over the same M micro-batches.
//
// GPipe (Huang et al. 2019), fill-drain: each stage runs all M forwards, then
// all M backwards (last micro-batch first). S=3, M=4:
//
//   clock  0  1  2  3  4  5  6  7  8  9 10 11
//   s0     F0 F1 F2 F3             B3 B2 B1 B0
//   s1        F0 F1 F2 F3       B3 B2 B1 B0
//   s2           F0 F1 F2 F3 B3 B2 B1 B0
//
// 1F1B with flush (PipeDream-Flush, Narayanan et al. 2021): stage s runs
// min(S-s-1, M) warm-up forwards, then alternates one forward and one
// backward, then drains. Same makespan, 2(M+S-1), but at most S-s
// activations in flight instead of M:
//
//   clock  0  1  2  3  4  5  6  7  8  9 10 11
//   s0     F0 F1 F2       B0 F3 B1    B2    B3
//   s1        F0 F1    B0 F2 B1 F3 B2    B3
//   s2           F0 B0 F1 B1 F2 B2 F3 B3
//
// The last stage's backward includes the loss. clock_table() simulates unit-
// time operations with their dependencies; the stage actors execute their own
// row of it (stage_order) in order, whatever order messages arrive in.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace salamander::algorithms {

enum class schedule_kind { gpipe, one_f_one_b };
enum class op_kind { forward, backward };

/// "gpipe" or "1f1b"; throws std::invalid_argument naming the bad value.
schedule_kind parse_schedule(const std::string& name);
std::string to_string(schedule_kind k);

struct stage_op {
  op_kind op;
  int micro;
  bool operator==(const stage_op& o) const { return op == o.op && micro == o.micro; }
};

struct clocked_op {
  int clock;
  int stage;
  int micro;
  op_kind op;
  bool operator==(const clocked_op& o) const {
    return clock == o.clock && stage == o.stage && micro == o.micro && op == o.op;
  }
};

/// The order in which stage `stage` of `stages` runs its 2M operations.
std::vector<stage_op> stage_order(schedule_kind kind, int stages, int micro, int stage);

/// Every operation with the clock at which it runs when each takes one unit
/// of time, sorted by (clock, stage).
std::vector<clocked_op> clock_table(schedule_kind kind, int stages, int micro);

/// Clocks from the first operation to the end of the flush.
int makespan(const std::vector<clocked_op>& table);

/// The idle fraction of the ideal pipeline with equal stages,
/// (S-1)/(M+S-1).
double bubble_fraction_model(int stages, int micro);

/// Most forward activations a stage holds at once under this schedule.
int max_in_flight(schedule_kind kind, int stages, int micro, int stage);

/// Contiguous layer ranges [begin, end) for each stage.
using layer_ranges = std::vector<std::pair<size_t, size_t>>;

/// Splits `layers` layers into `stages` ranges whose sizes differ by at most
/// one. Throws std::invalid_argument if stages < 1 or stages > layers.
layer_ranges even_split(size_t layers, int stages);

/// Ranges from layers-per-stage counts, e.g. {1, 1, 2}. Throws
/// std::invalid_argument naming the balance when a count is zero or the
/// counts do not add up to `layers`.
layer_ranges ranges_from_balance(const std::vector<size_t>& balance, size_t layers);

} // namespace salamander::algorithms
