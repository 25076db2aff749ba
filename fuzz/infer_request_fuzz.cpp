// An Open Inference Protocol request body (apps/infer_request.cpp): JSON from
// any HTTP client of `salamander serve`. Read against two models' inputs:
// the CNN's [-1,1,28,28] and a flat [-1,4].
#include "apps/infer_request.hpp"
#include "fuzz/fuzz_support.hpp"

using namespace salamander;

namespace {

void check(const std::string& body, const std::vector<int64_t>& input) {
  try {
    auto r = apps::parse_infer_request(body, input);
    FUZZ_CHECK(r.shape.size() == input.size() && r.shape[0] >= 1,
               "shape " + apps::shape_text(r.shape));
    uint64_t values = static_cast<uint64_t>(r.shape[0]);
    for (size_t i = 1; i < input.size(); ++i) {
      FUZZ_CHECK(r.shape[i] == input[i], "shape " + apps::shape_text(r.shape));
      values *= static_cast<uint64_t>(input[i]);
    }
    FUZZ_CHECK(r.data.size() == values, std::to_string(r.data.size()) + " values for " +
                                            apps::shape_text(r.shape));
  } catch (const apps::request_error&) {
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto body = fuzz::as_string(data, size);
  check(body, {-1, 1, 28, 28});
  check(body, {-1, 4});
  return 0;
}
