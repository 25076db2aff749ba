// checkpoint harness: the decoding and its checks are in codec_fuzz_lib.cpp (the
// one translation unit with LibTorch).
#include "fuzz/codec_fuzz.hpp"
#include "fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto dir = salamander::fuzz::seed_dir();
  if (!dir.empty()) {
    salamander::fuzz::write_codec_seeds("checkpoint", dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return salamander::fuzz::fuzz_checkpoint(data, size);
}
