// The body of an Open Inference Protocol request (POST /v2/models/NAME/infer),
// read and checked apart from the HTTP server and from LibTorch, so that it
// is tested and fuzzed alone (fuzz/infer_request_fuzz.cpp). http_front.cpp
// answers a request_error with 400 and its message.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace salamander::apps {

class request_error : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

struct infer_request {
  std::vector<int64_t> shape; ///< rows first; shape[1..] is the model's input
  std::vector<float> data;    ///< shape's product of values, row-major
  bool has_id = false;
  nlohmann::json id; ///< the request's "id", when has_id
};

/// `input_shape` is the model's input with -1 (any number of rows) first.
/// Throws request_error saying what is wrong.
infer_request parse_infer_request(const std::string& body,
                                  const std::vector<int64_t>& input_shape);

/// "[1,28,28]"
std::string shape_text(const std::vector<int64_t>& s);

} // namespace salamander::apps
