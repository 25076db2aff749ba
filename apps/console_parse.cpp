#include "apps/console_parse.hpp"
#include "actors/tuning.hpp"
#include "apps/number_word.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <sstream>
#include <stdexcept>

namespace salamander::apps {

namespace {

struct usage_line {
  const char* word;
  const char* usage;
  const char* what;
};

const usage_line usages[] = {
    {"status", "status", "job, phase, batch, samples/s, loss, plan version, health"},
    {"nodes", "nodes", "every node: health, role, CPU share, speed, memory, link, last heartbeat"},
    {"plan", "plan", "layer ranges per node, predicted vs measured stage times"},
    {"metrics", "metrics", "throughput, stage times, recoveries, re-plans, replicas, lineage"},
    {"kill", "kill stage N | kill client N | kill node NAME",
     "crash stage N (or a federated or split job's client N), or make node NAME's process die "
     "(SIGKILL)"},
    {"slow", "slow node NAME FACTOR", "an emulated node runs at FACTOR (0 < FACTOR <= 1) of its share"},
    {"cut", "cut node NAME SECONDS",
     "node NAME's link goes silent for SECONDS (0 < SECONDS <= 600): nothing in or out, "
     "connections kept (EMULATED)"},
    {"repartition", "repartition [BALANCE]", "re-plan at the next flush (BALANCE e.g. 1,2,1; default: the planner)"},
    {"replicate", "replicate", "replicate every stage's weights now (at the next version all reach)"},
    {"checkpoint", "checkpoint save PATH", "write the weights at the next flush to PATH (on the supervisor's host)"},
    {"pause", "pause", "stop feeding batches; the ones in flight finish"},
    {"resume", "resume", "carry on after pause"},
    {"help", "help [COMMAND]", "this list, or one command's usage"},
    {"quit", "quit", "leave the console (the job goes on); also exit or Ctrl-D"},
};

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

constexpr double cut_longest_s = static_cast<double>(actors::tuning::cut_longest.count());
static_assert(actors::tuning::cut_longest == std::chrono::seconds(600),
              "the usage and the error below say 600");

// A whole word as a finite number in (0, most]; 0 when it is not one.
double number_in(const std::string& word, double most) {
  auto v = finite_number(word);
  return v && *v > 0 && *v <= most ? *v : 0;
}

std::string bad(const std::string& text, const std::string& why, const std::string& word) {
  return "'" + text + "': " + why + "; usage: " + console_usage(word);
}

// `kill stage N`, `kill client N` (a federated or split job's), `kill node NAME`.
void parse_kill(const std::string& text, const std::vector<std::string>& w,
                console_command& c) {
  const auto& verb = w[0];
  auto n = w.size();
  if (n == 3 && (w[1] == "stage" || w[1] == "client")) {
    c.op = console_op::kill_stage;
    size_t used = 0;
    long v = -1;
    try {
      v = std::stol(w[2], &used);
    } catch (const std::exception&) {
    }
    // (beyond 2^32 - 1 it would wrap round to another stage)
    if (used != w[2].size() || v < 0 || v > static_cast<long>(UINT32_MAX)) {
      throw std::invalid_argument(bad(text, "'" + w[2] + "' is not a " + w[1] + " number", verb));
    }
    c.stage = static_cast<unsigned>(v);
    c.args = {w[2]};
  } else if (n == 3 && w[1] == "node") {
    c.op = console_op::kill_node;
    c.args = {w[2]};
  } else {
    throw std::invalid_argument(bad(text, "kill what?", verb));
  }
}

// A word that is no command, with the nearest command's name when one is near.
std::invalid_argument unknown_command(const std::string& verb) {
  std::string best;
  size_t dist = 3;
  for (auto& u : usages) {
    auto d = edit_distance(verb, u.word);
    if (d < dist) {
      dist = d;
      best = u.word;
    }
  }
  return std::invalid_argument("unknown command '" + verb + "'" +
                               (best.empty() ? "" : "; did you mean '" + best + "'?") +
                               " (help lists the commands)");
}

// The commands that take no arguments.
const std::map<std::string, console_op> bare_commands = {
    {"status", console_op::status},       {"nodes", console_op::nodes},
    {"plan", console_op::plan},           {"metrics", console_op::metrics},
    {"replicate", console_op::replicate}, {"pause", console_op::pause},
    {"resume", console_op::resume},       {"quit", console_op::quit},
    {"exit", console_op::quit}};

// Parses one command or throws std::invalid_argument with a helpful message.
console_command parse_one(const std::string& text) {
  auto w = split_words(text);
  console_command c;
  c.text = text;
  const auto& verb = w[0];
  auto n = w.size();
  if (auto bare = bare_commands.find(verb); bare != bare_commands.end()) {
    if (n != 1) {
      throw std::invalid_argument(bad(text, "takes no arguments", verb));
    }
    c.op = bare->second;
  } else if (verb == "help") {
    if (n > 2) {
      throw std::invalid_argument(bad(text, "takes at most one command name", verb));
    }
    c.op = console_op::help;
    c.args.assign(w.begin() + 1, w.end());
  } else if (verb == "kill") {
    parse_kill(text, w, c);
  } else if (verb == "slow") {
    if (n != 4 || w[1] != "node") {
      throw std::invalid_argument(bad(text, "slow what?", verb));
    }
    c.op = console_op::slow_node;
    c.factor = number_in(w[3], 1);
    if (c.factor <= 0) {
      throw std::invalid_argument(
          bad(text, "FACTOR must be a number in (0, 1], got '" + w[3] + "'", verb));
    }
    c.args = {w[2], w[3]};
  } else if (verb == "cut") {
    if (n != 4 || w[1] != "node") {
      throw std::invalid_argument(bad(text, "cut what?", verb));
    }
    c.op = console_op::cut_node;
    c.seconds = number_in(w[3], cut_longest_s);
    if (c.seconds <= 0) {
      throw std::invalid_argument(bad(
          text, "SECONDS must be a number in (0, 600], got '" + w[3] + "'", verb));
    }
    c.args = {w[2], w[3]};
  } else if (verb == "repartition") {
    if (n > 2) {
      throw std::invalid_argument(bad(text, "takes at most a balance", verb));
    }
    c.op = console_op::repartition;
    c.args.assign(w.begin() + 1, w.end());
  } else if (verb == "checkpoint") {
    if (n != 3 || w[1] != "save") {
      throw std::invalid_argument(bad(text, "checkpoint save needs a PATH", verb));
    }
    c.op = console_op::checkpoint_save;
    c.args = {w[2]};
  } else {
    throw unknown_command(verb);
  }
  return c;
}

} // namespace

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (char ch : text) {
    if (quote) {
      if (ch == quote) {
        quote = 0;
      } else {
        cur += ch;
      }
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
    } else if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
      if (in_word) {
        out.push_back(cur);
        cur.clear();
        in_word = false;
      }
    } else {
      cur += ch;
      in_word = true;
    }
  }
  if (quote) {
    throw std::invalid_argument("unterminated quote in '" + text + "'");
  }
  if (in_word) {
    out.push_back(cur);
  }
  return out;
}

parse_result parse_console(const std::string& line) {
  parse_result r;
  std::string part;
  std::vector<std::string> parts;
  char quote = 0;
  for (char ch : line) {
    if (quote) {
      quote = ch == quote ? 0 : quote;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
    } else if (ch == ';') {
      parts.push_back(part);
      part.clear();
      continue;
    }
    part += ch;
  }
  parts.push_back(part);
  for (auto& p : parts) {
    auto b = p.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) {
      continue;
    }
    auto e = p.find_last_not_of(" \t\r\n");
    auto text = p.substr(b, e - b + 1);
    try {
      r.commands.push_back(parse_one(text));
    } catch (const std::invalid_argument& ex) {
      r.commands.clear();
      r.error = ex.what();
      return r;
    }
  }
  return r;
}

std::string console_help() {
  std::ostringstream out;
  for (auto& u : usages) {
    out << "  " << u.usage;
    for (size_t i = std::string(u.usage).size(); i < 32; ++i) {
      out << ' ';
    }
    out << ' ' << u.what << '\n';
  }
  return out.str();
}

std::string console_usage(const std::string& word) {
  for (auto& u : usages) {
    if (word == u.word || (word == "exit" && std::string(u.word) == "quit")) {
      return std::string(u.usage) + "  (" + u.what + ")";
    }
  }
  return "";
}

const std::vector<std::string>& console_words() {
  static const std::vector<std::string> words = [] {
    std::vector<std::string> w;
    for (auto& u : usages) {
      w.emplace_back(u.word);
    }
    return w;
  }();
  return words;
}

} // namespace salamander::apps
