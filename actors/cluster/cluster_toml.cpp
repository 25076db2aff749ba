// The cluster file (TOML): which nodes a job runs on. Kept apart from the
// connecting (cluster_file.cpp) so that it is read, tested and fuzzed
// without CAF or LibTorch (fuzz/cluster_file_fuzz.cpp).
#include "actors/cluster/cluster_toml.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace salamander::actors {

std::pair<std::string, uint16_t> parse_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    throw std::invalid_argument("address '" + address + "' is not HOST:PORT");
  }
  auto host = address.substr(0, colon);
  auto port_text = address.substr(colon + 1);
  // decimal digits only: stol alone would take " 80" and "+80"
  long port = -1;
  if (port_text.size() <= 5 && port_text.find_first_not_of("0123456789") == std::string::npos) {
    port = std::stol(port_text);
  }
  if (port < 0 || port > 65535) {
    throw std::invalid_argument("address '" + address + "' has no valid port (0-65535)");
  }
  return {host, static_cast<uint16_t>(port)};
}

namespace {

// What a TOML value is, for messages: "the integer 7101", "a table".
std::string what_is(const toml::node& n) {
  std::ostringstream text;
  switch (n.type()) {
  case toml::node_type::string:
    return "the string \"" + std::string(*n.as_string()) + "\"";
  case toml::node_type::integer:
    return "the integer " + std::to_string(n.as_integer()->get());
  case toml::node_type::floating_point:
    text << n.as_floating_point()->get();
    return "the number " + text.str();
  case toml::node_type::boolean:
    return n.as_boolean()->get() ? "true" : "false";
  case toml::node_type::array:
    return "an array";
  case toml::node_type::table:
    return "a table";
  default:
    return "a date or time";
  }
}

// "cluster file PATH:LINE" for a value (toml++ counts lines from 1).
std::string at(const std::string& path, const toml::node& n) {
  auto line = n.source().begin.line;
  return "cluster file " + path + (line > 0 ? ":" + std::to_string(line) : "");
}

// The string under `key` of a node's table, or an error naming the file,
// the line, the node and what was there instead.
std::string string_field(const std::string& path, const toml::table& t,
                         const std::string& key, const std::string& node,
                         const std::string& example) {
  auto* n = t.get(key);
  if (!n) {
    throw std::invalid_argument(at(path, t) + ": " + node + " has no " + key +
                                " (write " + key + " = \"" + example + "\")");
  }
  auto* text = n->as_string();
  if (!text) {
    throw std::invalid_argument(at(path, *n) + ": " + node + ": " + key +
                                " must be a string like \"" + example + "\", got " +
                                what_is(*n));
  }
  return text->get();
}

// toml++ 3.3.0 (Debian 12) reaches __builtin_unreachable, undefined
// behaviour, when it asks whether some characters outside ASCII are
// whitespace (is_non_ascii_horizontal_whitespace, for U+00A1..U+0499 among
// others). It asks between tokens, after a backslash in a """string""", and
// of every character of a malformed value up to the next blank ("1=1..[n\"=\u0490\""
// reached it inside what reads as a string): fuzz/regressions/cluster_file/.
// A cluster file holds names and addresses, so characters outside ASCII are
// allowed in comments only, which toml++ reads without asking; this finds
// the first one elsewhere, before toml++ sees it. The offset, or npos.
size_t stray_non_ascii(std::string_view text) {
  enum class in { plain, comment, basic, literal, ml_basic, ml_literal };
  auto st = in::plain;
  auto at = [&](size_t i, std::string_view what) { return text.substr(i, what.size()) == what; };
  size_t i = at(0, "\xEF\xBB\xBF") ? 3 : 0; // a UTF-8 byte order mark
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (st != in::comment && static_cast<unsigned char>(c) >= 0x80) {
      return i;
    }
    switch (st) {
    case in::plain:
      if (c == '#') {
        st = in::comment;
      } else if (at(i, "\"\"\"")) {
        st = in::ml_basic;
        i += 2;
      } else if (c == '"') {
        st = in::basic;
      } else if (at(i, "'''")) {
        st = in::ml_literal;
        i += 2;
      } else if (c == '\'') {
        st = in::literal;
      }
      break;
    case in::comment:
      st = c == '\n' ? in::plain : st;
      break;
    case in::basic:
    case in::ml_basic:
      if (c == '\\' && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0x80) {
        ++i; // an escaped quote does not end the string
      } else if (st == in::basic && (c == '"' || c == '\n')) {
        st = in::plain;
      } else if (st == in::ml_basic && at(i, "\"\"\"")) {
        st = in::plain;
        i += 2;
      }
      break;
    case in::literal:
      st = c == '\'' || c == '\n' ? in::plain : st;
      break;
    case in::ml_literal:
      if (at(i, "'''")) {
        st = in::plain;
        i += 2;
      }
      break;
    }
  }
  return std::string_view::npos;
}

} // namespace

std::vector<cluster_node> read_cluster_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::invalid_argument("cannot read the cluster file " + path);
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_cluster_file(text.str(), path);
}

std::vector<cluster_node> parse_cluster_file(const std::string& text, const std::string& path) {
  if (auto bad = stray_non_ascii(text); bad != std::string_view::npos) {
    auto line = std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n') + 1;
    throw std::invalid_argument("cluster file " + path + ":" + std::to_string(line) +
                                ": a character outside ASCII outside a # comment (names and "
                                "addresses are ASCII)");
  }
  toml::table tbl;
  try {
    tbl = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    std::ostringstream where;
    where << e.source().begin;
    throw std::invalid_argument("cluster file " + path + ": " +
                                std::string(e.description()) + " at " + where.str());
  }
  for (auto& [key, value] : tbl) {
    if (key != "node") {
      throw std::invalid_argument(at(path, value) + ": unknown key '" +
                                  std::string(key.str()) +
                                  "' (a cluster file holds [[node]] tables)");
    }
  }
  auto* entry = tbl.get("node");
  if (entry && !entry->is_array()) {
    throw std::invalid_argument(
        at(path, *entry) + ": node must be a list of [[node]] tables, " + "got " +
        what_is(*entry) + " (write [[node]], with two brackets, before each node)");
  }
  auto* nodes = entry ? entry->as_array() : nullptr;
  if (!nodes || nodes->empty()) {
    throw std::invalid_argument("cluster file " + path +
                                " names no nodes (expected [[node]] tables with name and "
                                "address)");
  }
  std::vector<cluster_node> out;
  std::map<std::string, uint32_t> lines; // name -> where it was first given
  for (size_t i = 0; i < nodes->size(); ++i) {
    auto* n = nodes->get(i);
    std::string node = "node " + std::to_string(i + 1);
    auto* t = n->as_table();
    if (!t) {
      throw std::invalid_argument(at(path, *n) + ": " + node + " is " + what_is(*n) +
                                  ", not a [[node]] table");
    }
    auto name = string_field(path, *t, "name", node, "board-1");
    if (name.empty()) {
      throw std::invalid_argument(at(path, *t->get("name")) + ": " + node +
                                  " has an empty name");
    }
    node = "node '" + name + "'";
    for (auto& [key, value] : *t) {
      if (key != "name" && key != "address") {
        throw std::invalid_argument(at(path, value) + ": " + node + ": unknown key '" +
                                    std::string(key.str()) +
                                    "' (a node has a name and an address)");
      }
    }
    auto address = string_field(path, *t, "address", node, "127.0.0.1:7101");
    auto line = t->get("name")->source().begin.line;
    if (auto [first, fresh] = lines.emplace(name, line); !fresh) {
      throw std::invalid_argument(at(path, *t->get("name")) + ": the name " + name +
                                  " is used twice (first on line " +
                                  std::to_string(first->second) + ")");
    }
    cluster_node c;
    c.name = name;
    try {
      std::tie(c.host, c.port) = parse_address(address);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(at(path, *t->get("address")) + ": " + node + ": " +
                                  e.what());
    }
    out.push_back(c);
  }
  return out;
}

} // namespace salamander::actors
