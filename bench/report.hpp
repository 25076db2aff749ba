// A benchmark's results: written as JSON to bench/results/NAME.json, and
// its headline figures printed last, one `key: value` per line.
#pragma once

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace salamander::bench {

class report {
public:
  explicit report(std::string name) : name_(std::move(name)) {}

  void detail(const std::string& key, double value) { details_.emplace_back(key, fmt(value)); }
  void detail(const std::string& key, const std::string& value) {
    details_.emplace_back(key, quote(value));
  }
  void headline(const std::string& key, double value) {
    headlines_.emplace_back(key, value);
    for (auto& [k, v] : details_) {
      if (k == key) {
        v = fmt(value);
        return;
      }
    }
    detail(key, value);
  }

  /// The goal of a headline figure: at least (or at most) `bound`. Written
  /// with the results; over several seeds (--seeds) the interval is judged
  /// against it.
  void goal(const std::string& key, bool at_least, double bound) {
    goals_.emplace_back(key, std::make_pair(at_least, bound));
  }

  /// Over several seeds, the interval's lower bound of headline `key` is
  /// also written and printed as `name` (an issue's own key for it).
  void ci_low_name(const std::string& key, const std::string& name) {
    ci_low_names_.emplace_back(key, name);
  }

  /// Writes the JSON file and prints the headline figures.
  void finish(const std::string& path) const {
    std::ofstream out(path);
    out << "{\n  \"benchmark\": " << quote(name_);
    for (auto& [k, v] : details_) {
      out << ",\n  " << quote(k) << ": " << v;
    }
    out << ",\n  \"headlines\": [";
    for (size_t i = 0; i < headlines_.size(); ++i) {
      out << (i ? ", " : "") << quote(headlines_[i].first);
    }
    out << "],\n  \"goals\": {";
    for (size_t i = 0; i < goals_.size(); ++i) {
      auto& [k, g] = goals_[i];
      out << (i ? ", " : "") << quote(k) << ": {" << quote(g.first ? "at_least" : "at_most")
          << ": " << fmt(g.second) << "}";
    }
    out << "},\n  \"ci_low_names\": {";
    for (size_t i = 0; i < ci_low_names_.size(); ++i) {
      out << (i ? ", " : "") << quote(ci_low_names_[i].first) << ": "
          << quote(ci_low_names_[i].second);
    }
    out << "}\n}\n";
    std::printf("results: %s\n", path.c_str());
    for (auto& [k, v] : headlines_) {
      std::printf("%s: %s\n", k.c_str(), fmt(v).c_str());
    }
  }

private:
  static std::string fmt(double v) {
    if (!std::isfinite(v)) {
      return "null"; // JSON has no infinity; "not reached", "not measured"
    }
    std::ostringstream s;
    s.precision(6);
    s << v;
    return s.str();
  }
  static std::string quote(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
      }
      out += c;
    }
    return out + "\"";
  }
  std::string name_;
  std::vector<std::pair<std::string, std::string>> details_;
  std::vector<std::pair<std::string, double>> headlines_;
  std::vector<std::pair<std::string, std::pair<bool, double>>> goals_;
  std::vector<std::pair<std::string, std::string>> ci_low_names_;
};

} // namespace salamander::bench
