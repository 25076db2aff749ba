// The body of an Open Inference Protocol request (POST /v2/models/NAME/infer)
// and of its answer, read, checked and written apart from the HTTP server and
// from LibTorch, so that they are tested and fuzzed alone
// (fuzz/infer_request_fuzz.cpp). http_front.cpp answers a request_error with
// 400 and its message.
//
// Both forms of the protocol are read: all JSON, and the binary tensor data
// extension (Triton's clients send it by default), where the body is a JSON
// header of `Inference-Header-Content-Length` bytes followed by each binary
// input's raw little-endian values in the order of "inputs", each input
// saying its byte count in "parameters": {"binary_data_size": N}.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace salamander::apps {

class request_error : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

/// What the model takes and gives, by the protocol's names. The model takes
/// one input and gives one output, both FP32.
struct model_io {
  std::string input = "input";
  std::vector<int64_t> input_shape; ///< -1 (any number of rows) first
  std::string output = "output";
};

/// Input datatypes read (converted to FP32 for the model).
inline const std::vector<std::string>& input_datatypes() {
  static const std::vector<std::string> all = {"FP32", "FP16", "BF16"};
  return all;
}

struct infer_request {
  std::vector<int64_t> shape; ///< rows first; shape[1..] is the model's input
  std::vector<float> data;    ///< shape's product of values, row-major
  bool has_id = false;
  nlohmann::json id;          ///< the request's "id", when has_id
  bool binary_output = false; ///< answer the output as raw bytes (binary extension)
};

/// `body` is the whole request body; `json_length` the value of its
/// Inference-Header-Content-Length header (nullopt: all of it is JSON).
/// Throws request_error saying what is wrong and what the model takes.
infer_request parse_infer_request(std::string_view body, std::optional<size_t> json_length,
                                  const model_io& io);

/// The answer's body: JSON, with the output's values appended raw when the
/// request asked for binary output; `json_length` is then the header
/// Inference-Header-Content-Length to send.
struct infer_response {
  std::string body;
  std::optional<size_t> json_length;
};

infer_response write_infer_response(const infer_request& request, const model_io& io,
                                    const std::string& model_name,
                                    const std::string& version,
                                    const std::vector<int64_t>& shape, const float* values);

/// The same from the two parts apart: the JSON header, and the binary
/// inputs' bytes that follow it (gRPC's raw contents, uncopied).
infer_request parse_infer_request_parts(std::string_view header, std::string_view binary,
                                        const model_io& io);

/// Reads an Inference-Header-Content-Length value: whole decimal digits only.
/// Throws request_error otherwise.
size_t parse_json_length(const std::string& text);

/// "[1,28,28]"
std::string shape_text(const std::vector<int64_t>& s);

} // namespace salamander::apps
