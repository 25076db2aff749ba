// How deeply JSON text nests, read before it is parsed. nlohmann::json
// parses any depth, but copying, printing and walking a value recurse: a
// request body or a metrics line of a million '[' overflows the stack
// (fuzz/regressions/infer_request/deep-*, fuzz/regressions/metrics/deep-*).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace salamander::apps {

/// The nesting depth our JSON readers accept: far beyond any request or
/// metrics line salamander writes (a rank-4 input nests 7 deep).
constexpr size_t max_json_depth = 64;

/// Brackets and braces open at once, at most, outside strings.
inline size_t json_depth(std::string_view text) {
  size_t depth = 0;
  size_t deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

} // namespace salamander::apps
