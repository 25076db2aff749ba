// The console's command language, parsed without a cluster in sight (so it
// is tested alone): `salamander console` and `--exec 'cmd; cmd'` share it.
#pragma once

#include <string>
#include <vector>

namespace salamander::apps {

enum class console_op {
  status,
  nodes,
  plan,
  metrics,
  kill_stage,
  kill_node,
  slow_node,
  cut_node,
  repartition,
  replicate,
  checkpoint_save,
  pause,
  resume,
  help,
  quit,
};

struct console_command {
  console_op op = console_op::help;
  std::string text;          ///< the command as typed, trimmed
  std::vector<std::string> args; ///< NAME, N, FACTOR, PATH, BALANCE, help topic
  unsigned stage = 0;        ///< kill stage N
  double factor = 0;         ///< slow node NAME FACTOR
  double seconds = 0;        ///< cut node NAME SECONDS
};

struct parse_result {
  std::vector<console_command> commands;
  std::string error; ///< "" when every command parsed; else what and how to fix
};

/// Parses "cmd; cmd; ..." (empty commands are skipped).
parse_result parse_console(const std::string& line);

/// One line per command: usage and what it does.
std::string console_help();
/// The usage of one command word ("kill", "slow", ...), "" when unknown.
std::string console_usage(const std::string& word);

/// Every first word the console knows (for completion).
const std::vector<std::string>& console_words();

/// Splits on blanks; '...' and "..." group words (paths with spaces).
std::vector<std::string> split_words(const std::string& text);

} // namespace salamander::apps
