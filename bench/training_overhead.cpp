// One training epoch of the CNN through the layered-model path (what every
// salamander stage runs) against a plain LibTorch loop over the same network
// with the same weights and batches, interleaved in one run. Goal: within 3%.
#include "bench/benches.hpp"
#include "bench/report.hpp"
#include "models/trainer.hpp"

#include <algorithm>
#include <chrono>

namespace salamander::bench {

namespace nn = torch::nn;

// The CNN of the zoo written the ordinary way.
nn::Sequential plain_cnn(const models::model_desc& d) {
  auto& c1 = d.layers[0];
  auto& c2 = d.layers[1];
  auto& fc = d.layers[2];
  auto& head = d.layers[3];
  return nn::Sequential(
      nn::Conv2d(nn::Conv2dOptions(1, c1.attr("out_ch"), 5).padding(2)), nn::ReLU(),
      nn::MaxPool2d(2),
      nn::Conv2d(nn::Conv2dOptions(c1.attr("out_ch"), c2.attr("out_ch"), 5).padding(2)),
      nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(fc.attr("in"), fc.attr("out")),
      nn::ReLU(), nn::Linear(head.attr("in"), head.attr("out")));
}

double plain_epoch_seconds(const models::model_desc& desc, const models::dataset& data,
                           uint64_t seed, int64_t batch_size, int64_t batches, double lr) {
  models::layered_model m(desc, seed);
  auto net = plain_cnn(desc);
  {
    // same initial weights as the layered model
    torch::NoGradGuard g;
    auto src = m.all()->parameters();
    auto dst = net->parameters();
    for (size_t i = 0; i < dst.size(); ++i) {
      dst[i].copy_(src[i]);
    }
  }
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(lr));
  auto t = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < batches; ++b) {
    auto bt = models::get_batch(data, seed, 0, b, batch_size);
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net->forward(bt.x), bt.y);
    loss.backward();
    loss.item<double>(); // the layered path reads the loss too
    opt.step();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

} // namespace

int training_overhead(const bench_args& args) {
  torch::set_num_threads(1);
  auto desc = models::describe(models::model_spec::parse("cnn"));
  auto data = models::load_fashion_mnist(true);
  models::train_options opts;
  opts.batch_size = 64;
  int64_t batches = algorithms_batches(data.size(), opts.batch_size);
  if (args.quick) {
    opts.max_batches = batches = 150;
  }
  int rounds = args.quick ? 2 : 4;
  std::vector<double> layered_s, plain_s;
  auto run_layered = [&] {
    models::layered_model m(desc, 1);
    models::range_executor exec(m.all(), true, true);
    auto opt = models::make_optimizer({"adam", 2e-3, 0, 0}, m.all()->parameters());
    auto t = std::chrono::steady_clock::now();
    models::train_epoch(exec, *opt, data, 0, opts);
    layered_s.push_back(seconds_since(t));
  };
  auto run_plain = [&] {
    plain_s.push_back(plain_epoch_seconds(desc, data, opts.seed, opts.batch_size, batches, 2e-3));
  };
  for (int r = 0; r < rounds; ++r) {
    // alternate which runs first so that warm-up and drift favour neither
    if (r % 2 == 0) {
      run_layered();
      run_plain();
    } else {
      run_plain();
      run_layered();
    }
    std::fprintf(stderr, "round %d: layered %.2f s, plain %.2f s\n", r + 1, layered_s.back(),
                 plain_s.back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  report rep("training_overhead");
  rep.detail("model", "cnn");
  rep.detail("batches_per_epoch", static_cast<double>(batches));
  rep.detail("rounds", rounds);
  rep.detail("threads", 1);
  rep.detail("layered_epoch_s_median", median(layered_s));
  rep.detail("plain_epoch_s_median", median(plain_s));
  rep.detail("layered_samples_per_s", static_cast<double>(batches * opts.batch_size) /
                                          median(layered_s));
  rep.detail("plain_samples_per_s", static_cast<double>(batches * opts.batch_size) /
                                        median(plain_s));
  rep.headline("layered_over_plain", median(layered_s) / median(plain_s));
  rep.finish(args.out);
  return 0;
}

} // namespace salamander::bench
