// A server's model sources, see model_repository.hpp.
#include "apps/model_repository.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <stdexcept>

namespace salamander::apps {

namespace fs = std::filesystem;

bool valid_model_name(const std::string& name) {
  return !name.empty() && name.size() <= 128 && name != "stats" &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' ||
                  c == '.' || c == '-';
         });
}

model_source parse_load(const std::string& text) {
  model_source out;
  auto eq = text.find('=');
  // a path may hold '=' too: only a name before it that URLs can carry
  // counts as one
  if (eq != std::string::npos && eq > 0 && valid_model_name(text.substr(0, eq))) {
    out.name = text.substr(0, eq);
    out.path = text.substr(eq + 1);
  } else if (eq == 0) {
    throw std::invalid_argument("--load '" + text + "': a name before '=' (NAME=PATH)");
  } else {
    out.path = text;
  }
  if (out.path.empty()) {
    throw std::invalid_argument("--load '" + text + "': no checkpoint after '='");
  }
  return out;
}

namespace {

bool whole_number(const std::string& s) {
  return !s.empty() && s.size() < 19 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

} // namespace

std::map<std::string, model_source> scan_repository(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw std::invalid_argument("--repository " + dir +
                                " is not a directory (Triton's layout: "
                                "DIR/NAME/VERSION/model.ckpt)");
  }
  std::map<std::string, model_source> out;
  for (auto& m : fs::directory_iterator(dir, ec)) {
    if (!m.is_directory()) {
      continue;
    }
    model_source src;
    src.name = m.path().filename().string();
    if (!valid_model_name(src.name)) {
      continue; // (a directory URLs cannot name: not a model)
    }
    long long best = -1;
    for (auto& v : fs::directory_iterator(m.path(), ec)) {
      auto version = v.path().filename().string();
      if (!v.is_directory() || !whole_number(version) ||
          !fs::is_regular_file(v.path() / "model.ckpt")) {
        continue;
      }
      if (std::stoll(version) > best) {
        best = std::stoll(version);
        src.path = (v.path() / "model.ckpt").string();
        src.version = std::to_string(best);
      }
    }
    if (best < 0) {
      src.version = "no version directory with a model.ckpt in " + m.path().string();
    }
    out[src.name] = std::move(src);
  }
  return out;
}

} // namespace salamander::apps
