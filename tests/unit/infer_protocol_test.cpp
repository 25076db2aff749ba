// The inference protocol's bodies as Triton's and KServe's clients send them
// (apps/infer_request.cpp): the binary tensor data extension both ways,
// FP16 and BF16 inputs, and strict requests that name what is wrong.
#include "apps/infer_request.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

using namespace salamander;

namespace {

apps::model_io flat4() {
  apps::model_io io;
  io.input_shape = {-1, 4};
  return io;
}

// `header` then `payload`, and the header's length (the request as a
// binary client sends it).
std::pair<std::string, size_t> binary_body(const std::string& header, const std::string& payload) {
  return {header + payload, header.size()};
}

std::string le32(const std::vector<float>& v) {
  std::string out;
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    for (int b = 0; b < 4; ++b) {
      out.push_back(static_cast<char>((bits >> (8 * b)) & 0xffu));
    }
  }
  return out;
}

std::string le16(const std::vector<uint16_t>& v) {
  std::string out;
  for (auto h : v) {
    out.push_back(static_cast<char>(h & 0xffu));
    out.push_back(static_cast<char>(h >> 8));
  }
  return out;
}

// The message of the request_error `body` raises (fails when it is read).
std::string refusal(const std::string& body, std::optional<size_t> json_length = std::nullopt) {
  try {
    apps::parse_infer_request(body, json_length, flat4());
  } catch (const apps::request_error& e) {
    return e.what();
  }
  FAIL("accepted: " << body.substr(0, 200));
  return "";
}

const std::string input_fp32 = R"({"name":"input","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]})";

} // namespace

TEST_CASE("a binary FP32 input is read exactly and the output goes back as raw bytes",
          "[unit][serve][protocol]") {
  std::vector<float> values{1.5f, -2.25f, 3e-8f, 1e30f, 0.f, 7.f, -0.f, 1.f / 3};
  auto [body, length] = binary_body(
      R"({"id":"b1","inputs":[{"name":"input","shape":[2,4],"datatype":"FP32",)"
      R"("parameters":{"binary_data_size":32}}],"parameters":{"binary_data_output":true}})",
      le32(values));
  auto r = apps::parse_infer_request(body, length, flat4());
  CHECK(r.shape == std::vector<int64_t>{2, 4});
  CHECK(r.data == values);
  CHECK(r.binary_output);
  std::vector<float> out{0.25f, -1.f, 2.f, 8.5f};
  auto res = apps::write_infer_response(r, flat4(), "m", "1", {2, 2}, out.data());
  REQUIRE(res.json_length);
  auto header = nlohmann::json::parse(res.body.substr(0, *res.json_length));
  CHECK(header["id"] == "b1");
  CHECK(header["model_name"] == "m");
  auto& o = header["outputs"][0];
  CHECK(o["name"] == "output");
  CHECK(o["datatype"] == "FP32");
  CHECK(o["shape"] == nlohmann::json::array({2, 2}));
  CHECK(o["parameters"]["binary_data_size"] == 16);
  CHECK_FALSE(o.contains("data"));
  CHECK(res.body.substr(*res.json_length) == le32(out));
}

TEST_CASE("FP16 and BF16 inputs are converted to FP32, from binary and from JSON",
          "[unit][serve][protocol]") {
  // 1, -2, 0.5, the smallest subnormal (2^-24), 65504, +inf, 0, -0
  std::vector<uint16_t> half{0x3c00, 0xc000, 0x3800, 0x0001, 0x7bff, 0x7c00, 0x0000, 0x8000};
  auto [body, length] = binary_body(
      R"({"inputs":[{"name":"input","shape":[2,4],"datatype":"FP16",)"
      R"("parameters":{"binary_data_size":16}}]})",
      le16(half));
  auto r = apps::parse_infer_request(body, length, flat4());
  REQUIRE(r.data.size() == 8);
  CHECK(r.data[0] == 1.f);
  CHECK(r.data[1] == -2.f);
  CHECK(r.data[2] == 0.5f);
  CHECK(r.data[3] == std::ldexp(1.f, -24));
  CHECK(r.data[4] == 65504.f);
  CHECK(std::isinf(r.data[5]));
  CHECK(r.data[6] == 0.f);
  CHECK(std::signbit(r.data[7]));
  CHECK_FALSE(r.binary_output); // nothing asked it
  // bfloat16 is the top half of an FP32: 1, -2, 0.5, 3.140625
  std::vector<uint16_t> bf{0x3f80, 0xc000, 0x3f00, 0x4049};
  auto [bbody, blength] = binary_body(
      R"({"inputs":[{"name":"input","shape":[1,4],"datatype":"BF16",)"
      R"("parameters":{"binary_data_size":8}}]})",
      le16(bf));
  auto b = apps::parse_infer_request(bbody, blength, flat4());
  CHECK(b.data == std::vector<float>{1.f, -2.f, 0.5f, 3.140625f});
  auto j = apps::parse_infer_request(
      R"({"inputs":[{"name":"input","shape":[1,4],"datatype":"FP16","data":[1,2,3,4]}]})",
      std::nullopt, flat4());
  CHECK(j.data == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("a binary body whose declared sizes disagree with its length is refused",
          "[unit][serve][protocol]") {
  auto header = std::string(R"({"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32",)"
                            R"("parameters":{"binary_data_size":16}}]})");
  auto payload = le32({1, 2, 3, 4});
  // the header length past the body
  CHECK(refusal(header + payload, header.size() + payload.size() + 1)
            .find("the body has only") != std::string::npos);
  // the data short of its declared size
  CHECK(refusal(header + payload.substr(0, 15), header.size())
            .find("declares 16 bytes of binary data, the body has 15") != std::string::npos);
  // bytes that no input claims
  CHECK(refusal(header + payload + "x", header.size())
            .find("1 bytes after its JSON header that no input") != std::string::npos);
  // a declared size the shape does not need
  auto wrong = std::string(R"({"inputs":[{"name":"input","shape":[2,4],"datatype":"FP32",)"
                           R"("parameters":{"binary_data_size":16}}]})");
  CHECK(refusal(wrong + payload, wrong.size()).find("the shape [2,4] of FP32 needs 32") !=
        std::string::npos);
  auto odd = std::string(R"({"inputs":[{"name":"input","shape":[1,4],"datatype":"FP16",)"
                         R"("parameters":{"binary_data_size":7}}]})");
  CHECK(refusal(odd + "1234567", odd.size()).find("needs 8") != std::string::npos);
  // binary data without the header length: the whole body is read as JSON,
  // which has no binary part (nlohmann stops at the payload's first NUL)
  CHECK(refusal(header + payload).find("Inference-Header-Content-Length") !=
        std::string::npos);
  // a declared size with no binary part
  CHECK(refusal(header).find("declares 16 bytes of binary data, the body has 0") !=
        std::string::npos);
  // data twice, and data nowhere
  CHECK(refusal(R"({"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[1,2,3,4],)"
                R"("parameters":{"binary_data_size":16}}]})")
            .find("both \"data\" and a binary_data_size") != std::string::npos);
  CHECK(refusal(R"({"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32"}]})")
            .find("no \"data\"") != std::string::npos);
  CHECK(refusal(R"({"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32",)"
                R"("parameters":{"binary_data_size":-4}}]})")
            .find("whole number of bytes") != std::string::npos);
  CHECK_THROWS_AS(apps::parse_json_length("12a"), apps::request_error);
  CHECK_THROWS_AS(apps::parse_json_length(""), apps::request_error);
  CHECK_THROWS_AS(apps::parse_json_length("-1"), apps::request_error);
  CHECK_THROWS_AS(apps::parse_json_length("99999999999999999999"), apps::request_error);
  CHECK(apps::parse_json_length("120") == 120);
}

TEST_CASE("a request that names an input or output the model does not have is refused, "
          "naming what it takes",
          "[unit][serve][protocol]") {
  auto unknown = refusal(R"({"inputs":[{"name":"inptu","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]})");
  CHECK(unknown.find("unknown input 'inptu'") != std::string::npos);
  CHECK(unknown.find("the model takes one input 'input' of shape [-1,4]") != std::string::npos);
  CHECK(refusal(R"({"inputs":[{"shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]})")
            .find("an input needs a \"name\"") != std::string::npos);
  CHECK(refusal(R"({"inputs":[]})").find("the request has no inputs") != std::string::npos);
  CHECK(refusal(R"({"inputs":[)" + input_fp32 + "," + input_fp32 + "]}")
            .find("input 'input' is given twice") != std::string::npos);
  CHECK(refusal(R"({"inputs":[)" + input_fp32 + R"(],"outputs":[{"name":"probs"}]})")
            .find("unknown output 'probs'; the model gives 'output'") != std::string::npos);
  CHECK(refusal(R"({"inputs":[)" + input_fp32 +
                R"(],"outputs":[{"name":"output"},{"name":"output"}]})")
            .find("output 'output' is requested twice") != std::string::npos);
  CHECK(refusal(R"({"inputs":[)" + input_fp32 +
                R"(],"outputs":[{"name":"output","parameters":{"classification":3}}]})")
            .find("classification") != std::string::npos);
  CHECK(refusal(R"({"inputs":[{"name":"input","shape":[1,4],"datatype":"INT8","data":[1,2,3,4]}]})")
            .find("input datatype 'INT8', the model takes FP32") != std::string::npos);
  CHECK(refusal(R"({"inputs":[)" + input_fp32 + R"(],"parameters":{"binary_data_output":1}})")
            .find("must be true or false") != std::string::npos);
}

TEST_CASE("binary output is asked for the whole answer or per output, and JSON stays the "
          "default",
          "[unit][serve][protocol]") {
  auto read = [](const std::string& rest) {
    return apps::parse_infer_request(R"({"inputs":[)" + input_fp32 + "]" + rest + "}",
                                     std::nullopt, flat4())
        .binary_output;
  };
  CHECK_FALSE(read(""));
  CHECK(read(R"(,"parameters":{"binary_data_output":true})"));
  CHECK(read(R"(,"outputs":[{"name":"output","parameters":{"binary_data":true}}])"));
  // the output's own setting wins over the request's
  CHECK_FALSE(read(R"(,"parameters":{"binary_data_output":true},)"
                   R"("outputs":[{"name":"output","parameters":{"binary_data":false}}])"));
  CHECK(read(R"(,"parameters":{"binary_data_output":true},"outputs":[{"name":"output"}])"));
  CHECK_FALSE(read(R"(,"outputs":[])"));
  // a JSON answer carries the values and no header length
  auto r = apps::parse_infer_request(R"({"inputs":[)" + input_fp32 + "]}", std::nullopt,
                                     flat4());
  std::vector<float> out{1.f, 2.f};
  auto res = apps::write_infer_response(r, flat4(), "m", "1", {1, 2}, out.data());
  CHECK_FALSE(res.json_length);
  auto j = nlohmann::json::parse(res.body);
  CHECK(j["outputs"][0]["data"] == nlohmann::json::array({1.0, 2.0}));
  CHECK_FALSE(j.contains("id"));
}
