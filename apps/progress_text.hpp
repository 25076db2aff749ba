// The text of a progress line: fields fitted to the terminal, and an ETA
// that holds still while the job does not train.
//
// Why: a line longer than the terminal wraps, and "\r" then returns to the
// start of the wrapped part only, so every update left a stale copy above
// (80 columns and a pipeline's status did). And an ETA computed from the
// elapsed time grew all through a pause. Kept free of logging and CAF, so
// that the operator's unit tests can check it as is.
#pragma once

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace salamander::apps {

/// One field of a progress line; when the line must shrink, the fields with
/// the lowest `keep` go first.
struct progress_field {
  std::string text;
  int keep = 0;
};

inline std::string join_fields(const std::vector<progress_field>& fields,
                               const std::string& sep) {
  std::string out;
  for (auto& f : fields) {
    if (f.text.empty()) {
      continue;
    }
    out += (out.empty() ? "" : sep) + f.text;
  }
  return out;
}

/// The fields in their order, in at most `width` columns: two spaces
/// between them, then one, then without the least kept ones, and at last
/// cut with "...". Fields are ASCII.
inline std::string fit_line(std::vector<progress_field> fields, size_t width) {
  for (;;) {
    for (const char* sep : {"  ", " "}) {
      auto line = join_fields(fields, sep);
      if (line.size() <= width) {
        return line;
      }
    }
    if (fields.size() <= 1) {
      break;
    }
    auto least = std::min_element(fields.begin(), fields.end(),
                                  [](auto& a, auto& b) { return a.keep < b.keep; });
    fields.erase(least);
  }
  auto line = join_fields(fields, " ");
  return width < 4 ? line.substr(0, width) : line.substr(0, width - 3) + "...";
}

/// Columns of the terminal on `fd`, else $COLUMNS, else 80.
inline size_t terminal_width(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    return ws.ws_col;
  }
  if (const char* env = std::getenv("COLUMNS")) {
    long n = std::strtol(env, nullptr, 10);
    if (n > 0) {
      return static_cast<size_t>(n);
    }
  }
  return 80;
}

/// "45s", "4m05s", "2h03m"; "?" when not known.
inline std::string format_duration(double seconds) {
  if (seconds < 0 || seconds > 1e8) {
    return "?";
  }
  auto s = static_cast<long long>(seconds + 0.5);
  char out[32];
  if (s >= 3600) {
    std::snprintf(out, sizeof out, "%lldh%02lldm", s / 3600, (s / 60) % 60);
  } else if (s >= 60) {
    std::snprintf(out, sizeof out, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(out, sizeof out, "%llds", s);
  }
  return out;
}

/// The time a job still needs, from the time it spent training: between
/// two looks at its status, only while it was training does the
/// clock run. While it pauses, recovers, re-plans or evaluates, the ETA
/// holds its last value (and says so) instead of growing.
class eta_clock {
public:
  /// Seconds left (-1: not known yet) after a look at the job: whether it
  /// is training, batches committed so far and still to do, and its elapsed
  /// seconds.
  double update(bool training, int64_t committed, int64_t left, double elapsed_s) {
    // an interval counts when the job trained at both ends (one that ends
    // or starts in a pause is dropped whole: a fraction of a poll)
    if (seen_ && was_training_ && training && elapsed_s > last_elapsed_) {
      active_s_ += elapsed_s - last_elapsed_;
      watched_ += committed - last_committed_;
    }
    seen_ = true;
    was_training_ = training;
    last_elapsed_ = elapsed_s;
    last_committed_ = committed;
    held_ = !training && eta_ >= 0;
    if (!training) {
      return eta_;
    }
    if (watched_ > 0 && active_s_ > 0) {
      eta_ = static_cast<double>(left) * active_s_ / static_cast<double>(watched_);
    } else if (committed > 0 && elapsed_s > 0) {
      // just attached: the job's own average (start-up and pauses included)
      eta_ = static_cast<double>(left) * elapsed_s / static_cast<double>(committed);
    }
    return eta_;
  }

  /// Not a phase's text: a string would convert to `true`.
  double update(const char*, int64_t, int64_t, double) = delete;

  /// True when the last update did not train and the ETA is the one before.
  bool held() const { return held_; }

private:
  bool seen_ = false;
  bool was_training_ = false;
  bool held_ = false;
  double last_elapsed_ = 0;
  double active_s_ = 0; ///< seconds trained between looks
  int64_t watched_ = 0; ///< batches committed in those seconds
  int64_t last_committed_ = 0;
  double eta_ = -1;
};

} // namespace salamander::apps
