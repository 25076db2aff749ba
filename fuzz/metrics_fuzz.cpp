// The metrics reader behind `salamander plot` and `salamander audit`
// (apps/cmd_plot.cpp): JSON lines a job wrote, possibly cut short by a
// crash, hand-edited, or someone else's file. The reader and the code that
// asks it for fields are file-local, so this harness includes the file and
// runs everything plot and audit do short of starting gnuplot. Their one
// documented failure is log_error (exit code 2, "FILE:LINE: the EVENT
// event's field ...").
#include "apps/cmd_plot.cpp"

#include "fuzz/fuzz_support.hpp"

#include <spdlog/sinks/null_sink.h>

#include <sstream>

namespace salamander::apps {

// The one thing cmd_plot.cpp takes from runtime_env.cpp (which needs LibTorch).
std::shared_ptr<spdlog::logger> logger(const std::string&) {
  static auto quiet =
      std::make_shared<spdlog::logger>("fuzz", std::make_shared<spdlog::sinks::null_sink_mt>());
  return quiet;
}

} // namespace salamander::apps

using namespace salamander::apps;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // audit prints its verdict on stdout: not wanted a million times
  if (!std::freopen("/dev/null", "w", stdout)) {
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(salamander::fuzz::as_string(data, size));
  auto r = read_log(in, "fuzz.jsonl");
  FUZZ_CHECK(r.batches.size() + r.events.size() + r.bad_lines == r.lines,
             "lines lost by the reader");
  plot_cli cli;
  cli.output = "/dev/null";
  std::map<std::string, size_t> counts;
  auto attempt = [](auto&& step) {
    try {
      step();
    } catch (const log_error&) {
    }
  };
  attempt([&] { gnuplot_script(r, cli, counts); });
  attempt([&] { serve_script(r, cli, counts); });
  attempt([&] {
    if (federated(r) || split_run(r)) {
      rounds_script({r}, cli, counts);
    }
  });
  attempt([&] { audit_run(r); });
  return 0;
}
