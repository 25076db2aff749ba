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
// Asynchronous 1F1B (`async`: FTPipeHD, after PipeDream-2BW) has no flush
// per batch. Micro-batches are numbered across batches, g = batch x M +
// micro; a stage still steps its optimizer after each batch's last backward,
// but the next batch's forwards do not wait for that step. Every forward and
// backward of batch b, on every stage, uses the weights of version
//     u(b) = max(0, b - d)
// which each stage keeps until that batch's last backward (weight
// stashing), so that
//     w(b+1) = w(b) - lr * grad_b(w(u(b)))
// on one device as on S, whatever the timing: deterministic, and exact
// against a single device with the same delay d. A stage's row is a 1F1B
// over a segment of R batches (R x M micro-batches; R up to an epoch, or
// to where the job asks for a drain) with S-s-1 warm-up forwards, and up
// to (K-1)(S-s-1) more as far as d x M allows (async_warmup): never more
// than d x M, so stage s never needs a version it has not stepped to. K = 1 is
// FTPipeHD's batch_diff (stage s holds at most S-s micro-batches); with
// unit-time operations it never idles, but on real links every message's
// delay lands on the critical path of a row that alternates F and B with
// no forward to spare. K = 2 (the default, --async-slack) lets stage s run
// ahead of stage s+1 by two forwards instead of one, which absorbs a delay
// of about one operation (bench bubble: idle 0.31 -> 0.20 at 4 stages);
// the versions, and so the weights, do not depend on K. The pipeline
// drains only at the end of a segment; a snapshot taken anywhere carries
// the d versions before its own that the batches after it train on, so a
// recovery, re-plan or checkpoint replays them the same whichever segment
// they fall in. S=3, M=2, d=1, R=2, K=1 (a segment of 4 micro-batches,
// g = 0..3):
//
//   clock  0  1  2  3  4  5  6  7  8  9 10 11
//   s0     F0 F1 F2       B0 F3 B1    B2    B3
//   s1        F0 F1    B0 F2 B1 F3 B2    B3
//   s2           F0 B0 F1 B1 F2 B2 F3 B3
//
// (batch 1 = micro-batches 2 and 3 uses version max(0, 1-1) = 0: its
// forwards run before batch 0's step.)
//
// The last stage's backward includes the loss. clock_table() simulates unit-
// time operations with their dependencies; the stage actors execute their own
// row of it (stage_order) in order, whatever order messages arrive in.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace salamander::algorithms {

enum class schedule_kind { gpipe, one_f_one_b, async };
enum class op_kind { forward, backward };

/// "gpipe", "1f1b" or "async"; throws std::invalid_argument naming the bad
/// value.
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

/// The order in which stage `stage` of `stages` runs its 2M operations of
/// one batch (gpipe, 1f1b; async rows span segments: async_order).
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

/// One operation of an asynchronous row: micro-batch `micro` of `batch`.
struct async_op {
  op_kind op;
  uint64_t batch;
  int micro;
  bool operator==(const async_op& o) const {
    return op == o.op && batch == o.batch && micro == o.micro;
  }
};

/// The segment (first batch, one past its last) that batch `batch` belongs
/// to: segments end at multiples of `every` and of `epoch` (the job
/// flushes there to evaluate) and at `total` (the job's last batch), and one
/// begins at `start` (where the pipeline was last empty).
/// `every` or `epoch` 0: no such ends.
std::pair<uint64_t, uint64_t> async_segment(uint64_t batch, uint64_t start, uint64_t every,
                                            uint64_t epoch = 0,
                                            uint64_t total = UINT64_MAX);

/// The weight version that batch `batch` uses: max(floor, batch - delay)
/// (the stages' floor is 0: a batch's version never depends on a drain).
uint64_t async_version(uint64_t batch, uint64_t floor, uint64_t delay);

/// The smallest delay with which no stage of `stages` ever waits for a
/// version with `micro` micro-batches a batch: ceil((S-1)/M).
uint64_t async_delay(int stages, int micro);

/// The warm-up forwards of stage `stage` in an async row: S-s-1, plus
/// min((slack-1)(S-s-1), delay x M - (S-1)) where that is positive (stage
/// 0 never more than delay x M; each stage one more than the next at
/// least); it holds at most one more micro-batch.
uint64_t async_warmup(int stages, int stage, int micro, uint64_t delay, int slack);

/// Stage `stage`'s row over the segment [first, end) of batches: a 1F1B over
/// its (end - first) x `micro` micro-batches after async_warmup forwards.
std::vector<async_op> async_order(int stages, int stage, int micro, uint64_t first,
                                  uint64_t end, uint64_t delay, int slack);

/// Every operation of the segment [0, batches) with its unit-time clock,
/// micro numbered across batches (g = batch x M + micro).
std::vector<clocked_op> async_clock_table(int stages, int micro, uint64_t batches,
                                          uint64_t delay, int slack);

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
