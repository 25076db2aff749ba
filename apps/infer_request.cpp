// Reading an inference request and writing its answer, see infer_request.hpp.
#include "apps/infer_request.hpp"

#include "apps/json_depth.hpp"

#include <cmath>
#include <cstring>
#include <set>

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

size_t element_bytes(const std::string& datatype) {
  return datatype == "FP32" ? 4 : 2;
}

constexpr bool little_endian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

float from_fp16(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) { // zero or subnormal: mantissa x 2^-24
    auto v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  uint32_t bits = exponent == 0x1f ? sign | 0x7f800000u | (mantissa << 13)
                                   : sign | ((exponent + 112) << 23) | (mantissa << 13);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The values of `datatype` in little-endian `bytes`.
void convert(std::string_view bytes, const std::string& datatype, std::vector<float>& out) {
  auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  auto n = bytes.size() / element_bytes(datatype);
  out.resize(n);
  if (datatype == "FP32") {
    if constexpr (little_endian) {
      std::memcpy(out.data(), p, 4 * n);
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      auto* b = p + 4 * i;
      out[i] = from_bits(uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 |
                         uint32_t{b[3]} << 24);
    }
    return;
  }
  bool half = datatype == "FP16";
  for (size_t i = 0; i < n; ++i) {
    auto h = static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8);
    out[i] = half ? from_fp16(h) : from_bits(static_cast<uint32_t>(h) << 16);
  }
}

std::string takes(const model_io& io) {
  return "the model takes one input '" + io.input + "' of shape " + shape_text(io.input_shape) +
         " (rows first), FP32 (FP16 and BF16 are converted)";
}

// The datatype of `in`, checked.
std::string datatype_of(const json& in) {
  auto datatype = in.contains("datatype") && in["datatype"].is_string()
                      ? in["datatype"].get<std::string>()
                  : in.contains("datatype") ? in["datatype"].dump()
                                            : std::string();
  for (auto& known : input_datatypes()) {
    if (datatype == known) {
      return datatype;
    }
  }
  throw request_error("input datatype '" + datatype +
                      "', the model takes FP32 (FP16 and BF16 are converted)");
}

std::vector<int64_t> shape_of(const json& in, const model_io& io) {
  std::vector<int64_t> shape;
  for (auto& d : in["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1) {
      throw request_error("input shape " + in["shape"].dump() +
                          " is not a list of positive whole numbers");
    }
    shape.push_back(d.get<int64_t>());
  }
  auto& want = io.input_shape;
  bool fits = shape.size() == want.size();
  for (size_t i = 1; fits && i < shape.size(); ++i) {
    fits = shape[i] == want[i];
  }
  if (!fits) {
    throw request_error("input shape " + shape_text(shape) + ", the model takes " +
                        shape_text(want) + " (rows first)");
  }
  return shape;
}

// Values in one row of the model's input.
int64_t sample_size(const model_io& io) {
  int64_t sample = 1;
  for (size_t i = 1; i < io.input_shape.size(); ++i) {
    sample *= io.input_shape[i];
  }
  return sample;
}

// "far more" when `rows` x `per_row` would not fit in what was `given`
// (rows come from the client and may be anything: no overflow).
std::string needed(int64_t rows, int64_t per_row, int64_t given) {
  return rows <= given / per_row + 1 ? std::to_string(rows * per_row) : "far more";
}

bool flag(const json& object, const char* key) {
  if (!object.contains("parameters") || !object["parameters"].is_object()) {
    return false;
  }
  auto& p = object["parameters"];
  if (!p.contains(key)) {
    return false;
  }
  if (!p[key].is_boolean()) {
    throw request_error(std::string("parameter \"") + key + "\" must be true or false, got " +
                        p[key].dump());
  }
  return p[key].get<bool>();
}

// The one input's values: from "data", or from the binary part at `offset`.
void read_values(const json& in, const std::string& datatype, std::string_view binary,
                 size_t& offset, const model_io& io, infer_request& r) {
  auto sample = sample_size(io);
  bool has_size = in.contains("parameters") && in["parameters"].is_object() &&
                  in["parameters"].contains("binary_data_size");
  if (has_size && in.contains("data")) {
    throw request_error("input '" + io.input +
                        "' has both \"data\" and a binary_data_size: send one");
  }
  if (!has_size) {
    if (!in.contains("data")) {
      throw request_error("input '" + io.input +
                          "' has no \"data\" and no \"parameters\": {\"binary_data_size\"}");
    }
    if (!flatten(in["data"], r.data)) {
      throw request_error("input data must be numbers (flat, or nested as the shape)");
    }
    auto given = static_cast<int64_t>(r.data.size());
    if (given % sample != 0 || given / sample != r.shape[0]) {
      throw request_error("input data has " + std::to_string(r.data.size()) +
                          " values, the shape " + shape_text(r.shape) + " needs " +
                          needed(r.shape[0], sample, given));
    }
    return;
  }
  auto& size = in["parameters"]["binary_data_size"];
  if (!size.is_number_unsigned()) {
    throw request_error("binary_data_size must be a whole number of bytes, got " + size.dump());
  }
  auto bytes = size.get<uint64_t>();
  auto per_row = sample * static_cast<int64_t>(element_bytes(datatype));
  auto left = binary.size() - offset;
  if (bytes > left) {
    throw request_error("input '" + io.input + "' declares " + std::to_string(bytes) +
                        " bytes of binary data, the body has " + std::to_string(left) +
                        " after its JSON header (Inference-Header-Content-Length)");
  }
  auto given = static_cast<int64_t>(bytes);
  if (given % per_row != 0 || given / per_row != r.shape[0]) {
    throw request_error("input '" + io.input + "' has " + std::to_string(bytes) +
                        " bytes of binary data, the shape " + shape_text(r.shape) + " of " +
                        datatype + " needs " + needed(r.shape[0], per_row, given));
  }
  convert(binary.substr(offset, bytes), datatype, r.data);
  offset += bytes;
}

// "outputs": names the model gives, each once; whether the answer is binary.
bool binary_output(const json& body, const model_io& io) {
  bool binary = flag(body, "binary_data_output");
  if (!body.contains("outputs")) {
    return binary;
  }
  auto& outputs = body["outputs"];
  if (!outputs.is_array()) {
    throw request_error("\"outputs\" must be a list of {\"name\"}");
  }
  std::set<std::string> seen;
  for (auto& out : outputs) {
    if (!out.is_object() || !out.contains("name") || !out["name"].is_string()) {
      throw request_error("a requested output needs a \"name\"; the model gives '" +
                          io.output + "'");
    }
    auto name = out["name"].get<std::string>();
    if (name != io.output) {
      throw request_error("unknown output '" + name + "'; the model gives '" + io.output +
                          "'");
    }
    if (!seen.insert(name).second) {
      throw request_error("output '" + name + "' is requested twice");
    }
    if (out.contains("parameters") && out["parameters"].is_object() &&
        out["parameters"].contains("classification")) {
      throw request_error("output '" + name +
                          "' asks for classification, an extension this server does not "
                          "offer: ask for the output itself");
    }
    if (out.contains("parameters") && out["parameters"].is_object() &&
        out["parameters"].contains("binary_data")) {
      binary = flag(out, "binary_data");
    }
  }
  return binary;
}

} // namespace

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    out += (i ? "," : "") + std::to_string(s[i]);
  }
  return out + "]";
}

size_t parse_json_length(const std::string& text) {
  if (text.empty() || text.size() > 15 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    throw request_error("Inference-Header-Content-Length must be a number of bytes, got '" +
                        text.substr(0, 32) + "'");
  }
  return static_cast<size_t>(std::stoull(text));
}

infer_request parse_infer_request(std::string_view body, std::optional<size_t> json_length,
                                  const model_io& io) {
  if (json_length && *json_length > body.size()) {
    throw request_error("Inference-Header-Content-Length is " + std::to_string(*json_length) +
                        ", the body has only " + std::to_string(body.size()) + " bytes");
  }
  auto header = json_length ? body.substr(0, *json_length) : body;
  auto binary = json_length ? body.substr(*json_length) : std::string_view();
  return parse_infer_request_parts(header, binary, io);
}

infer_request parse_infer_request_parts(std::string_view header, std::string_view binary,
                                        const model_io& io) {
  if (auto depth = json_depth(header); depth > max_json_depth) {
    throw request_error("the request nests arrays or objects " + std::to_string(depth) +
                        " deep, more than the limit of " + std::to_string(max_json_depth));
  }
  json request;
  try {
    request = json::parse(header);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number past a double ("1E1111":
    // fuzz/regressions/infer_request/), which escaped as a 500
    throw request_error(std::string("malformed JSON: ") + e.what());
  }
  if (!request.is_object() || !request.contains("inputs") || !request["inputs"].is_array()) {
    throw request_error("the request needs \"inputs\": [{\"name\", \"shape\", \"datatype\", "
                        "\"data\"}]; " + takes(io));
  }
  auto& inputs = request["inputs"];
  const json* found = nullptr;
  for (auto& in : inputs) {
    if (!in.is_object() || !in.contains("name") || !in["name"].is_string()) {
      throw request_error("an input needs a \"name\"; " + takes(io));
    }
    auto name = in["name"].get<std::string>();
    if (name != io.input) {
      throw request_error("unknown input '" + name + "'; " + takes(io));
    }
    if (found) {
      throw request_error("input '" + name + "' is given twice");
    }
    found = &in;
  }
  if (!found) {
    throw request_error("the request has no inputs; " + takes(io));
  }
  auto& in = *found;
  if (!in.contains("shape") || !in["shape"].is_array()) {
    throw request_error("an input needs \"shape\" (an array) and \"data\"");
  }
  auto datatype = datatype_of(in);
  infer_request r;
  r.shape = shape_of(in, io);
  size_t offset = 0;
  read_values(in, datatype, binary, offset, io, r);
  if (offset != binary.size()) {
    throw request_error("the body has " + std::to_string(binary.size() - offset) +
                        " bytes after its JSON header that no input's binary_data_size "
                        "claims");
  }
  r.binary_output = binary_output(request, io);
  if (request.contains("id")) {
    r.has_id = true;
    r.id = request["id"];
  }
  return r;
}

infer_response write_infer_response(const infer_request& request, const model_io& io,
                                    const std::string& model_name,
                                    const std::string& version,
                                    const std::vector<int64_t>& shape, const float* values) {
  size_t n = 1;
  for (auto d : shape) {
    n *= static_cast<size_t>(d);
  }
  json output{{"name", io.output}, {"datatype", "FP32"}, {"shape", shape}};
  if (request.binary_output) {
    output["parameters"] = json{{"binary_data_size", n * 4}};
  } else {
    output["data"] = std::vector<float>(values, values + n);
  }
  json answer{{"model_name", model_name},
              {"model_version", version},
              {"outputs", json::array({output})}};
  if (request.has_id) {
    answer["id"] = request.id;
  }
  infer_response res;
  res.body = answer.dump();
  if (request.binary_output) {
    res.json_length = res.body.size();
    if constexpr (little_endian) {
      res.body.append(reinterpret_cast<const char*>(values), n * 4);
      return res;
    }
    res.body.reserve(res.body.size() + n * 4);
    for (size_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, values + i, sizeof bits);
      for (int b = 0; b < 4; ++b) {
        res.body.push_back(static_cast<char>((bits >> (8 * b)) & 0xffu));
      }
    }
  }
  return res;
}

} // namespace salamander::apps
