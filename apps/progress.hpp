// One updating progress line on a terminal, plain log lines otherwise.
//
// Why: people watch long training runs. On a terminal they want one line that
// changes in place; in a log file (CI, systemd) they want a line every few
// seconds, not thousands of carriage returns.
#pragma once

#include "apps/progress_text.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

namespace salamander::apps {

class progress_line {
public:
  explicit progress_line(
      std::shared_ptr<spdlog::logger> log,
      std::chrono::milliseconds tty_period = std::chrono::milliseconds(200),
      std::chrono::milliseconds log_period = std::chrono::seconds(5))
      : log_(std::move(log)), tty_(::isatty(STDERR_FILENO) != 0), tty_period_(tty_period),
        log_period_(log_period) {}

  ~progress_line() { finish(); }

  /// Shows the fields if enough time has passed since the last update (or
  /// if `force`): on a terminal fitted to its width, one column short of
  /// it (a line that wraps cannot be overwritten in place); in a log whole.
  void update(const std::vector<progress_field>& fields, bool force = false) {
    auto now = std::chrono::steady_clock::now();
    auto period = tty_ ? tty_period_ : log_period_;
    if (!force && shown_ && now - last_ < period) {
      return;
    }
    last_ = now;
    shown_ = true;
    if (tty_) {
      // asked each time: the terminal may have been resized
      auto text = fit_line(fields, terminal_width(STDERR_FILENO) - 1);
      std::fprintf(stderr, "\r\033[K%s", text.c_str());
      std::fflush(stderr);
      open_ = true;
    } else {
      log_->info("{}", join_fields(fields, "  "));
    }
  }

  /// Ends the updating line so that normal output continues below it.
  void finish() {
    if (open_) {
      std::fprintf(stderr, "\n");
      open_ = false;
    }
  }

private:
  std::shared_ptr<spdlog::logger> log_;
  bool tty_;
  std::chrono::milliseconds tty_period_;
  std::chrono::milliseconds log_period_;
  std::chrono::steady_clock::time_point last_{};
  bool shown_ = false;
  bool open_ = false;
};

} // namespace salamander::apps
