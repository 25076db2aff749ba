// An Open Inference Protocol request body (apps/infer_request.cpp): from any
// HTTP client of `salamander serve`. Read against two models' inputs, the
// CNN's [-1,1,28,28] and a flat [-1,4], twice: as all JSON, and as the binary
// tensor data extension, the input's last two bytes (little-endian) giving
// Inference-Header-Content-Length for the bytes before them.
#include "apps/infer_request.hpp"
#include "fuzz/fuzz_support.hpp"

using namespace salamander;

namespace {

void check(std::string_view body, std::optional<size_t> json_length,
           const std::vector<int64_t>& input) {
  apps::model_io io;
  io.input_shape = input;
  try {
    auto r = apps::parse_infer_request(body, json_length, io);
    FUZZ_CHECK(r.shape.size() == input.size() && r.shape[0] >= 1,
               "shape " + apps::shape_text(r.shape));
    uint64_t values = static_cast<uint64_t>(r.shape[0]);
    for (size_t i = 1; i < input.size(); ++i) {
      FUZZ_CHECK(r.shape[i] == input[i], "shape " + apps::shape_text(r.shape));
      values *= static_cast<uint64_t>(input[i]);
    }
    FUZZ_CHECK(r.data.size() == values, std::to_string(r.data.size()) + " values for " +
                                            apps::shape_text(r.shape));
    // the answer to it reads back as JSON up to its declared header length
    std::vector<int64_t> out_shape{r.shape[0], 2};
    std::vector<float> out(static_cast<size_t>(r.shape[0]) * 2, 1.5f);
    auto res = apps::write_infer_response(r, io, "m", "1", out_shape, out.data());
    auto header = res.json_length ? res.body.substr(0, *res.json_length) : res.body;
    FUZZ_CHECK(nlohmann::json::accept(header), "the answer's JSON does not parse");
    FUZZ_CHECK(res.body.size() == header.size() + (r.binary_output ? out.size() * 4 : 0),
               "the answer's binary part has the wrong size");
  } catch (const apps::request_error&) {
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto body = fuzz::as_string(data, size);
  check(body, std::nullopt, {-1, 1, 28, 28});
  check(body, std::nullopt, {-1, 4});
  if (size >= 2) {
    auto length = static_cast<size_t>(data[size - 2] | data[size - 1] << 8);
    std::string_view head(body.data(), size - 2);
    check(head, length, {-1, 1, 28, 28});
    check(head, length, {-1, 4});
  }
  return 0;
}
