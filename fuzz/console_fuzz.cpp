// The console's command language (apps/console_parse.cpp): what an operator
// types at `salamander console`, or passes to --exec.
#include "apps/console_parse.hpp"
#include "fuzz/fuzz_support.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>

using namespace salamander;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto line = fuzz::as_string(data, size);
  auto r = apps::parse_console(line);
  FUZZ_CHECK(r.error.empty() || r.commands.empty(), "an error, yet commands: " + r.error);
  for (auto& c : r.commands) {
    FUZZ_CHECK(!c.text.empty(), "an empty command was kept");
    switch (c.op) {
    case apps::console_op::kill_stage: {
      // the stage to kill is the number typed, not that number modulo 2^32
      FUZZ_CHECK(c.args.size() == 1, c.text);
      auto typed = std::stoull(c.args[0]);
      FUZZ_CHECK(typed == c.stage, c.text + " kills stage " + std::to_string(c.stage));
      break;
    }
    case apps::console_op::slow_node:
      FUZZ_CHECK(c.args.size() == 2 && std::isfinite(c.factor) && c.factor > 0 &&
                     c.factor <= 1,
                 c.text);
      break;
    case apps::console_op::kill_node:
    case apps::console_op::checkpoint_save:
      FUZZ_CHECK(c.args.size() == 1, c.text);
      break;
    default:
      break;
    }
  }
  try {
    auto words = apps::split_words(line);
    if (!words.empty()) {
      apps::console_usage(words[0]);
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
