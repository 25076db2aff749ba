// A word of a command line read as a number: the whole word and finite, or
// nothing. The options' validators, the console's parser and the options
// that take numbers in a list (--client-shares, --stragglers) share it.
#pragma once

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

namespace salamander::apps {

inline std::optional<double> finite_number(const std::string& word) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(word, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != word.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

} // namespace salamander::apps
