// Tensor codec throughput against memcpy, for 1, 16 and 64 MB tensors.
//
// A hop encodes once (the tensor's bytes are referenced, then written once
// into the frame) and the receiver decodes by aliasing the frame: ideally one
// memcpy's worth of work, so codec_over_memcpy_64mb near 1 is the goal.
// Decoding into a fresh tensor (copy mode) is reported beside it.
#include "bench/benches.hpp"
#include "bench/report.hpp"
#include "messages/tensor_codec.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace salamander::bench {

namespace {

template <class F>
double best_seconds(int reps, F&& fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t = std::chrono::steady_clock::now();
    fn();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  return best;
}

} // namespace

int codec(const bench_args& args) {
  report rep("codec");
  int reps = args.quick ? 3 : 10;
  double ratio_64 = 0;
  for (int64_t mb : {1, 16, 64}) {
    auto t = torch::randn({mb * 1024 * 1024 / 4});
    std::vector<char> dst(static_cast<size_t>(t.nbytes()));
    double bytes = static_cast<double>(t.nbytes());
    double memcpy_s = best_seconds(reps, [&] {
      std::memcpy(dst.data(), t.data_ptr(), dst.size());
    });
    messages::frame f;
    // a sender reuses its previous frame (messages::encode_tensor's `reuse`)
    double encode_s =
        best_seconds(reps, [&] { f = messages::encode_tensor(t, std::move(f)); });
    double encode_fresh_s = best_seconds(reps, [&] { f = messages::encode_tensor(t); });
    double alias_s = best_seconds(reps, [&] {
      auto x = messages::decode_tensor(f, messages::decode_mode::alias);
    });
    double copy_s = best_seconds(reps, [&] {
      auto x = messages::decode_tensor(f, messages::decode_mode::copy);
    });
    auto back = messages::decode_tensor(f, messages::decode_mode::alias);
    if (!torch::equal(back, t)) {
      std::fprintf(stderr, "codec round trip changed the tensor\n");
      return 1;
    }
    std::string k = std::to_string(mb) + "mb";
    double hop_mbps = bytes / (encode_s + alias_s) / 1e6;
    rep.detail("memcpy_mbps_" + k, bytes / memcpy_s / 1e6);
    rep.detail("encode_mbps_" + k, bytes / encode_s / 1e6);
    rep.detail("encode_fresh_buffer_mbps_" + k, bytes / encode_fresh_s / 1e6);
    rep.detail("decode_alias_us_" + k, alias_s * 1e6);
    rep.detail("decode_copy_mbps_" + k, bytes / copy_s / 1e6);
    rep.detail("hop_mbps_" + k, hop_mbps);
    rep.detail("codec_over_memcpy_" + k, (bytes / (encode_s + alias_s)) / (bytes / memcpy_s));
    std::fprintf(stderr,
                 "%3lld MB: memcpy %7.0f MB/s  encode %7.0f MB/s (fresh buffer %7.0f)  "
                 "decode(alias) %6.1f us  decode(copy) %7.0f MB/s\n",
                 static_cast<long long>(mb), bytes / memcpy_s / 1e6, bytes / encode_s / 1e6,
                 bytes / encode_fresh_s / 1e6,
                 alias_s * 1e6, bytes / copy_s / 1e6);
    if (mb == 64) {
      ratio_64 = memcpy_s / (encode_s + alias_s);
    }
  }
  rep.headline("codec_over_memcpy_64mb", ratio_64);
  rep.finish(args.out);
  return 0;
}

} // namespace salamander::bench
