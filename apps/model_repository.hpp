// Where a server's models come from: `--load [NAME=]PATH` (repeatable; a
// checkpoint of `train --save`) or `--repository DIR` in Triton's layout
//
//   DIR/NAME/VERSION/model.ckpt      VERSION a whole number; the highest
//                                    holding a model.ckpt is served
//
// No LibTorch, no actors: the unit tests link this alone.
#pragma once

#include <map>
#include <string>

namespace salamander::apps {

/// Where one model comes from.
struct model_source {
  std::string name;
  std::string path;          ///< a checkpoint; "": `spec` with its seed's weights
  std::string spec;          ///< without a checkpoint
  std::string version = "1"; ///< in the repository: its directory
};

/// `--load [NAME=]PATH` split; the name is empty when not given (text
/// before '=' that cannot be a name is part of the path). Throws
/// std::invalid_argument for an empty path or an empty name.
model_source parse_load(const std::string& text);

/// Every model of a repository in Triton's layout, by name: its highest
/// version directory holding a model.ckpt. A model with none is listed with
/// an empty path and, in `version`, why. Throws std::invalid_argument when
/// `dir` is not a directory.
std::map<std::string, model_source> scan_repository(const std::string& dir);

/// Whether `name` can be a model's name in a URL (letters, digits, _ . -;
/// not "stats", which /v2/models/stats takes).
bool valid_model_name(const std::string& name);

} // namespace salamander::apps
