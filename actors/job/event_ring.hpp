// The job's recent events in memory: what the metrics log's event lines
// say, kept whether or not a log is written (`--metrics none`), numbered so
// a reader asks only for what it has not seen (the dashboard's timeline:
// GET /api/events?since=N). Owned by one job actor; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace salamander::actors {

class event_ring {
public:
  /// The newest events kept; older ones are gone (a reader that fell that
  /// far behind starts again at the oldest kept).
  static constexpr size_t capacity = 4096;
  /// At most this many events answer one `since`.
  static constexpr size_t answer_max = 1000;

  /// Appends one event (a JSON object's text whose "seq" is `next()`).
  void add(std::string line) {
    lines_.push_back(std::move(line));
    ++next_;
    if (lines_.size() > capacity) {
      lines_.pop_front();
    }
  }

  /// The number the next event gets (events so far).
  uint64_t next() const { return next_; }

  /// The events numbered `seq` and after, oldest first, at most answer_max.
  std::vector<std::string> since(uint64_t seq) const {
    uint64_t first = next_ - lines_.size();
    uint64_t from = seq < first ? first : seq;
    std::vector<std::string> out;
    for (uint64_t i = from; i < next_ && out.size() < answer_max; ++i) {
      out.push_back(lines_[static_cast<size_t>(i - first)]);
    }
    return out;
  }

private:
  std::deque<std::string> lines_;
  uint64_t next_ = 0;
};

} // namespace salamander::actors
