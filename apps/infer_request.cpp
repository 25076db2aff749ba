// Reading an inference request's JSON, see infer_request.hpp.
#include "apps/infer_request.hpp"

#include "apps/json_depth.hpp"

namespace salamander::apps {

namespace {

using json = nlohmann::json;

// Flattens a (possibly nested) JSON array of numbers; false on anything else.
bool flatten(const json& j, std::vector<float>& out) {
  if (j.is_number()) {
    out.push_back(j.get<float>());
    return true;
  }
  if (!j.is_array()) {
    return false;
  }
  for (auto& e : j) {
    if (!flatten(e, out)) {
      return false;
    }
  }
  return true;
}

} // namespace

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    out += (i ? "," : "") + std::to_string(s[i]);
  }
  return out + "]";
}

infer_request parse_infer_request(const std::string& text,
                                  const std::vector<int64_t>& input_shape) {
  if (auto depth = json_depth(text); depth > max_json_depth) {
    throw request_error("the request nests arrays or objects " + std::to_string(depth) +
                        " deep, more than the limit of " + std::to_string(max_json_depth));
  }
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number past a double ("1E1111":
    // fuzz/regressions/infer_request/), which escaped as a 500
    throw request_error(std::string("malformed JSON: ") + e.what());
  }
  if (!body.is_object() || !body.contains("inputs") || !body["inputs"].is_array()) {
    throw request_error("the request needs \"inputs\": [{\"name\", \"shape\", \"datatype\", "
                        "\"data\"}]");
  }
  auto& inputs = body["inputs"];
  if (inputs.size() != 1) {
    throw request_error("the model takes one input, got " + std::to_string(inputs.size()));
  }
  auto& in = inputs[0];
  if (!in.is_object() || !in.contains("shape") || !in["shape"].is_array() ||
      !in.contains("data")) {
    throw request_error("an input needs \"shape\" (an array) and \"data\"");
  }
  auto datatype = in.contains("datatype") && in["datatype"].is_string()
                      ? in["datatype"].get<std::string>()
                  : in.contains("datatype") ? in["datatype"].dump()
                                            : std::string();
  if (datatype != "FP32") {
    throw request_error("input datatype '" + datatype + "', the model takes FP32");
  }
  infer_request r;
  for (auto& d : in["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1) {
      throw request_error("input shape " + in["shape"].dump() +
                          " is not a list of positive "
                          "whole numbers");
    }
    r.shape.push_back(d.get<int64_t>());
  }
  bool fits = r.shape.size() == input_shape.size();
  for (size_t i = 1; fits && i < r.shape.size(); ++i) {
    fits = r.shape[i] == input_shape[i];
  }
  if (!fits) {
    throw request_error("input shape " + shape_text(r.shape) + ", the model takes " +
                        shape_text(input_shape) + " (rows first)");
  }
  if (!flatten(in["data"], r.data)) {
    throw request_error("input data must be numbers (flat, or nested as the shape)");
  }
  // rows x the model's sample size, without overflow: the rows come
  // from the client and may be anything
  int64_t sample = 1;
  for (size_t i = 1; i < r.shape.size(); ++i) {
    sample *= r.shape[i];
  }
  auto given = static_cast<int64_t>(r.data.size());
  bool matches = given % sample == 0 && given / sample == r.shape[0];
  int64_t want = r.shape[0] <= given / sample + 1 ? r.shape[0] * sample : -1;
  if (!matches) {
    throw request_error("input data has " + std::to_string(r.data.size()) +
                        " values, the shape " + shape_text(r.shape) + " needs " +
                        (want > 0 ? std::to_string(want) : std::string("far more")));
  }
  if (body.contains("id")) {
    r.has_id = true;
    r.id = body["id"];
  }
  return r;
}

} // namespace salamander::apps
