#include "../support.hpp"

#include "models/layered_model.hpp"
#include "models/trainer.hpp"
#include "models/weights.hpp"

#include <limits>
#include <regex>

using namespace salamander::models;
using salamander::testing::max_abs_diff;

namespace {

// Small enough to run every cut quickly; every layer kind of the zoo appears.
const std::vector<std::string> test_models = {
    "mlp", "cnn", "resnet:width=4,blocks=1", "vit:size=tiny,depth=2",
    "vit:size=tiny,depth=2,sublayers=2,mlp=96",
};

torch::Tensor input_for(const model_desc& d, int64_t batch, uint64_t seed) {
  torch::manual_seed(seed);
  auto s = d.input;
  s.insert(s.begin(), batch);
  return torch::randn(s);
}

// All ways to cut `n` layers into contiguous ranges (n <= 6 here).
std::vector<std::vector<size_t>> all_cuts(size_t n) {
  std::vector<std::vector<size_t>> out;
  for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
    std::vector<size_t> bounds = {0};
    for (size_t i = 1; i < n; ++i) {
      if (mask & (1u << (i - 1))) {
        bounds.push_back(i);
      }
    }
    bounds.push_back(n);
    out.push_back(bounds);
  }
  return out;
}

} // namespace

TEST_CASE("described parameter counts and output shapes match the built layers",
          "[unit][layered_model]") {
  for (auto& name : test_models) {
    INFO(name);
    layered_model m(describe(model_spec::parse(name)), 1);
    auto x = input_for(m.desc(), 3, 2);
    for (size_t i = 0; i < m.desc().layers.size(); ++i) {
      auto& info = m.desc().layers[i];
      INFO(info.name);
      int64_t actual = 0;
      for (auto& p : m.layer(i).ptr()->parameters()) {
        actual += p.numel();
      }
      CHECK(actual == info.params);
      x = m.layer(i).forward(x);
      auto per_sample = x.sizes().vec();
      per_sample.erase(per_sample.begin());
      CHECK(per_sample == info.output);
    }
  }
}

TEST_CASE("a pooling layer answers the same under no-grad as while training",
          "[unit][layered_model]") {
  // Under no-grad a pooling layer runs another kernel (channels-last). Its
  // answers must be the same to the bit (compared as integers, so that -0
  // and +0 would tell), ties included; a NaN where the other has one; and
  // come back contiguous in NCHW, as the layers after it were given before.
  auto d = describe(model_spec::parse("cnn"));
  layered_model m(d, 4);
  auto bits = [](const torch::Tensor& t) { return t.contiguous().view(torch::kInt32); };
  auto both = [&](size_t layer, const torch::Tensor& x) {
    auto training = m.layer(layer).forward(x).detach();
    torch::Tensor serving;
    {
      torch::NoGradGuard no_grad;
      serving = m.layer(layer).forward(x);
    }
    CHECK(serving.is_contiguous());
    REQUIRE(serving.sizes() == training.sizes());
    auto nan = training.isnan();
    CHECK(torch::equal(serving.isnan(), nan));
    CHECK(torch::equal(bits(serving.masked_fill(nan, 0)),
                       bits(training.masked_fill(nan, 0))));
    return training;
  };
  REQUIRE(d.layers[0].name == "conv1");
  {
    // a zero bias and zero input rows: whole windows of ReLU's zeros (ties)
    torch::NoGradGuard no_grad;
    for (auto& p : m.layer(0).ptr()->named_parameters()) {
      if (p.key().find("bias") != std::string::npos) {
        p.value().zero_();
      }
    }
  }
  auto x = input_for(d, 5, 9);
  x.index_put_(
      {torch::indexing::Slice(), torch::indexing::Slice(), torch::indexing::Slice(0, 8)},
      0.0);
  for (size_t i = 0; i < d.layers.size(); ++i) {
    INFO(d.layers[i].name);
    x = both(i, x);
  }
  SECTION("one sample, an odd size, a NaN") {
    auto odd = torch::randn({1, 1, 27, 27});
    odd.index_put_({0, 0, 3, 3}, std::numeric_limits<float>::quiet_NaN());
    auto out = both(0, odd);
    CHECK(out.isnan().any().item<bool>()); // the NaN reached the answer
  }
  SECTION("an input that comes channels-last") {
    both(0, input_for(d, 3, 2).contiguous(at::MemoryFormat::ChannelsLast));
  }
}

TEST_CASE("a range built on its own has the same weights as in the whole model",
          "[unit][layered_model]") {
  auto d = describe(model_spec::parse("resnet:width=4,blocks=1"));
  layered_model whole(d, 11);
  layered_model part(d, 11, 2, 4);
  CHECK(part.begin() == 2);
  CHECK(part.end() == 4);
  auto a = whole.slice(2, 4)->named_parameters();
  auto b = part.all()->named_parameters();
  REQUIRE(a.size() == b.size());
  for (auto& p : a) {
    CHECK(torch::equal(p.value(), b[p.key()]));
  }
  CHECK_THROWS_AS(part.layer(0), std::out_of_range);
  CHECK_THROWS_AS(layered_model(d, 1, 3, 3), std::invalid_argument);
  layered_model other_seed(d, 12, 2, 4);
  CHECK(!torch::equal(other_seed.all()->parameters()[0], b[a.begin()->key()]));
}

TEST_CASE("every cut of every zoo model gives the whole model's output and gradients",
          "[unit][layered_model]") {
  for (auto& name : test_models) {
    auto d = describe(model_spec::parse(name));
    size_t n = d.layers.size();
    auto x = input_for(d, 4, 5);
    torch::manual_seed(6);
    auto y = torch::randint(d.classes, {4}, torch::kInt64);

    layered_model whole(d, 3);
    range_executor ref(whole.all(), true, true);
    ref.forward(0, x);
    auto ref_loss = ref.loss_backward(0, y, 1.0);
    layered_model fresh(d, 3);
    auto whole_out = fresh.all()->forward(x).detach();

    REQUIRE(n <= 6); // keeps the 2^(n-1) cuts cheap
    for (auto& bounds : all_cuts(n)) {
      INFO(name << " cut into " << bounds.size() - 1 << " ranges");
      // Each range is its own model built from the same seed, as on
      // separate devices.
      std::vector<layered_model> parts;
      std::vector<range_executor> execs;
      for (size_t s = 0; s + 1 < bounds.size(); ++s) {
        parts.emplace_back(d, 3, bounds[s], bounds[s + 1]);
      }
      for (size_t s = 0; s < parts.size(); ++s) {
        execs.emplace_back(parts[s].all(), s == 0, s + 1 == parts.size());
      }
      auto act = x;
      for (auto& e : execs) {
        act = e.forward(0, act);
      }
      auto first_out = act;
      auto lr = execs.back().loss_backward(0, y, 1.0);
      CHECK(lr.loss == Approx(ref_loss.loss).margin(1e-6));
      auto grad = lr.grad_input;
      for (size_t s = execs.size() - 1; s-- > 0;) {
        grad = execs[s].backward(0, grad);
      }
      CHECK(!grad.defined()); // the first range returns no input gradient
      for (auto& e : execs) {
        CHECK(e.in_flight() == 0);
      }
      CHECK(max_abs_diff(first_out, whole_out) <= 1e-6);
      // gradients, parameter by parameter
      for (auto& part : parts) {
        auto got = part.all()->named_parameters();
        auto want = whole.slice(part.begin(), part.end())->named_parameters();
        for (auto& p : want) {
          REQUIRE(got[p.key()].grad().defined());
          CHECK(max_abs_diff(got[p.key()].grad(), p.value().grad()) <= 1e-5);
        }
      }
    }
  }
}

TEST_CASE("a ViT cut inside its blocks computes what the whole blocks compute",
          "[unit][layered_model]") {
  // sublayers=2 describes each block as its attention half and its MLP half;
  // with the block's weights the halves give the block's output, and the
  // description costs the same in all
  auto blocks = describe(model_spec::parse("vit:size=tiny,depth=3"));
  auto halves = describe(model_spec::parse("vit:size=tiny,depth=3,sublayers=2"));
  REQUIRE(halves.layers.size() == blocks.layers.size() + 3);
  CHECK(halves.layers[1].name == "block1_attn");
  CHECK(halves.layers[2].name == "block1_mlp");
  CHECK(halves.total_params() == blocks.total_params());
  CHECK(halves.total_flops() == Approx(blocks.total_flops()));
  CHECK(halves.fingerprint != blocks.fingerprint);
  for (size_t b = 0; b < 3; ++b) {
    auto& whole = blocks.layers[1 + b];
    auto& attn = halves.layers[1 + 2 * b];
    auto& mlp = halves.layers[2 + 2 * b];
    CHECK(attn.activation_bytes + mlp.activation_bytes == whole.activation_bytes);
    CHECK(attn.output_bytes == whole.output_bytes);
  }

  layered_model a(blocks, 4), h(halves, 9);
  torch::NoGradGuard no_grad;
  auto from = a.all()->named_parameters();
  for (auto& p : h.all()->named_parameters()) {
    // block2_attn.ln1.weight -> block2.ln1.weight
    auto key = std::regex_replace(p.key(), std::regex("_(attn|mlp)\\."), ".");
    INFO(p.key() << " from " << key);
    REQUIRE(from.contains(key));
    p.value().copy_(from[key]);
  }
  auto x = input_for(blocks, 3, 7);
  CHECK(max_abs_diff(h.all()->forward(x), a.all()->forward(x)) <= 1e-5);
  CHECK_THROWS_WITH(describe(model_spec::parse("vit:sublayers=3")),
                    Catch::Contains("sublayers=3 is too large"));
}

TEST_CASE("backward without a forward in flight is an error, not a crash",
          "[unit][layered_model]") {
  layered_model m(describe(model_spec::parse("mlp")), 1, 1, 3);
  range_executor e(m.all(), false, true);
  CHECK_THROWS_AS(e.backward(4, torch::zeros({2, 10})), std::invalid_argument);
  CHECK_THROWS_AS(e.loss_backward(4, torch::zeros({2}, torch::kInt64), 1.0),
                  std::invalid_argument);
  range_executor mid(m.all(), false, false);
  mid.forward(0, torch::randn({2, 256}));
  CHECK_THROWS_AS(mid.loss_backward(0, torch::zeros({2}, torch::kInt64), 1.0), std::logic_error);
  mid.drop_in_flight();
  CHECK(mid.in_flight() == 0);
}

TEST_CASE("micro-batch accumulation gives the full batch's gradient", "[unit][trainer]") {
  auto d = describe(model_spec::parse("cnn"));
  auto data = make_synthetic(1, 64, d.input, d.classes);
  auto b = get_batch(data, 1, 0, 0, 30);
  std::vector<torch::Tensor> grads[2];
  int slot = 0;
  for (int64_t m : {1, 4}) {
    layered_model model(d, 9);
    range_executor e(model.all(), true, true);
    auto opt = make_optimizer({"sgd", 0.1, 0.0, 0.0}, model.all()->parameters());
    auto r = train_step(e, *opt, b, m);
    CHECK(r.samples == 30);
    // the step changed the weights; the gradient is still there
    for (auto& p : model.all()->parameters()) {
      grads[slot].push_back(p.grad().clone());
    }
    slot++;
  }
  for (size_t i = 0; i < grads[0].size(); ++i) {
    CHECK(max_abs_diff(grads[0][i], grads[1][i]) <= 1e-5);
  }
  auto parts = split_micro(torch::arange(10), 4);
  REQUIRE(parts.size() == 4);
  CHECK(parts[0].numel() == 3);
  CHECK(parts[3].numel() == 2);
  CHECK_THROWS_AS(split_micro(torch::arange(3), 4), std::invalid_argument);
  CHECK_THROWS_AS(split_micro(torch::arange(3), 0), std::invalid_argument);
}

TEST_CASE("weight prediction lands where the optimizer's next steps land when the "
          "direction holds",
          "[unit][trainer]") {
  // Adam under a constant gradient keeps m-hat = g and v-hat = g^2 from its
  // first step on, so every step moves by the same amount and the prediction
  // k steps ahead is exact; before any step there is no direction.
  auto p = torch::tensor({0.5F, -1.0F, 2.0F}).requires_grad_();
  auto g = torch::tensor({0.3F, -0.02F, 4.0F});
  auto opt = make_optimizer({"adam", 0.01, 0.0, 0.0}, {p});
  auto predicted = torch::empty_like(p);
  predict_weights(*opt, "adam", p, 4, predicted);
  CHECK(max_abs_diff(predicted, p) == 0);
  auto step = [&] {
    p.mutable_grad() = g.clone();
    opt->step();
  };
  for (int i = 0; i < 3; ++i) {
    step();
  }
  predict_weights(*opt, "adam", p, 4, predicted);
  CHECK(max_abs_diff(predicted, p) > 0.03); // 4 steps of about lr each
  for (int i = 0; i < 4; ++i) {
    step();
  }
  CHECK(max_abs_diff(predicted, p) < 1e-6);

  // SGD: its momentum buffer, lr times steps; without momentum, no buffer
  auto q = torch::tensor({1.0F, 2.0F}).requires_grad_();
  auto sgd = make_optimizer({"sgd", 0.1, 0.9, 0.0}, {q});
  q.mutable_grad() = torch::tensor({1.0F, -2.0F});
  sgd->step();
  q.mutable_grad() = torch::tensor({1.0F, -2.0F});
  sgd->step(); // buffer: 0.9 g + g = 1.9 g
  auto ahead = torch::empty_like(q);
  predict_weights(*sgd, "sgd", q, 2, ahead);
  CHECK(max_abs_diff(ahead, q.detach() - 2 * 0.1 * 1.9 * torch::tensor({1.0F, -2.0F})) <
        1e-6);
  auto r = torch::tensor({1.0F}).requires_grad_();
  auto plain = make_optimizer({"sgd", 0.1, 0.0, 0.0}, {r});
  r.mutable_grad() = torch::tensor({1.0F});
  plain->step();
  auto same = torch::empty_like(r);
  predict_weights(*plain, "sgd", r, 2, same);
  CHECK(max_abs_diff(same, r) == 0);
}

TEST_CASE("a warm-up raises the rate linearly over its batches, counted across epochs",
          "[unit][trainer]") {
  CHECK(warmup_lr(0.01, 0, 0) == 0.01);
  CHECK(warmup_lr(0.01, 0, 4) == Approx(0.0025));
  CHECK(warmup_lr(0.01, 2, 4) == Approx(0.0075));
  CHECK(warmup_lr(0.01, 3, 4) == 0.01);
  CHECK(warmup_lr(0.01, 1000, 4) == 0.01);
  // SGD without momentum moves by exactly rate x gradient: the rate set is
  // the one the step takes
  auto p = torch::tensor({1.0F}).requires_grad_();
  auto sgd = make_optimizer({"sgd", 0.1, 0.0, 0.0}, {p});
  set_lr(*sgd, 0.025);
  p.mutable_grad() = torch::tensor({2.0F});
  sgd->step();
  CHECK(p.item<float>() == Approx(1.0F - 0.05F));

  // train_epoch counts the warm-up over the run's batches, not each epoch's:
  // two epochs of 3 batches with a warm-up of 5 are one device stepping
  // batch g at warmup_lr(lr, g, 5), g = 0..5
  auto desc = describe(model_spec::parse("mlp:hidden=16"));
  auto data = make_synthetic(7, 96, desc.input, desc.classes);
  train_options opts;
  opts.batch_size = 32;
  opts.warmup_batches = 5;
  opts.lr = 0.01;
  layered_model a(desc, 1), b(desc, 1), c(desc, 1);
  range_executor ea(a.all(), true, true), eb(b.all(), true, true),
      ec(c.all(), true, true);
  auto oa = make_optimizer({"sgd", opts.lr, 0.9, 0.0}, a.all()->parameters());
  auto ob = make_optimizer({"sgd", opts.lr, 0.9, 0.0}, b.all()->parameters());
  auto oc = make_optimizer({"sgd", opts.lr, 0.9, 0.0}, c.all()->parameters());
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    train_epoch(ea, *oa, data, epoch, opts, {});
    for (int64_t k = 0; k < 3; ++k) {
      auto g = epoch * 3 + static_cast<uint64_t>(k);
      set_lr(*ob, warmup_lr(opts.lr, g, 5));
      train_step(eb, *ob, get_batch(data, opts.seed, epoch, k, opts.batch_size), 1);
      train_step(ec, *oc, get_batch(data, opts.seed, epoch, k, opts.batch_size), 1);
    }
  }
  auto pa = a.all()->parameters(), pb = b.all()->parameters(), pc = c.all()->parameters();
  double same = 0, apart = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    same = std::max(same, max_abs_diff(pa[i], pb[i]));
    apart = std::max(apart, max_abs_diff(pa[i], pc[i]));
  }
  CHECK(same == 0);
  CHECK(apart > 1e-4); // and the warm-up did change the steps
}

TEST_CASE("the data-parallel sum merges in member order to the last bit, through the "
          "supervisor or along the chain in chunks of any size",
          "[unit][dp]") {
  // three members' contributions: [ gradients (10) | statistics (3) | decays (3) ]
  torch::manual_seed(5);
  const int64_t grads = 10, stats = 3;
  std::vector<torch::Tensor> parts;
  for (int m = 0; m < 3; ++m) {
    parts.push_back(torch::cat(
        {torch::randn({grads}) * 1e3, torch::randn({stats}), torch::rand({stats})}));
  }
  // what one sum in member order gives: gradients added in float32, the
  // statistics chained r <- decay * r + c in float64
  auto g = parts[0].narrow(0, 0, grads) + parts[1].narrow(0, 0, grads);
  g = g + parts[2].narrow(0, 0, grads);
  auto r = parts[0].narrow(0, grads, stats).to(torch::kFloat64);
  for (int m = 1; m < 3; ++m) {
    r = parts[m].narrow(0, grads + stats, stats).to(torch::kFloat64) * r +
        parts[m].narrow(0, grads, stats).to(torch::kFloat64);
  }
  auto expected = torch::cat({g, r.to(torch::kFloat32)});
  // not what adding in another order gives, or the test would prove nothing
  auto other = parts[2].narrow(0, 0, grads) + parts[1].narrow(0, 0, grads);
  other = other + parts[0].narrow(0, 0, grads);
  REQUIRE_FALSE(torch::equal(other, g));

  for (int64_t chunk : {1, 3, 4, 10, 1000}) {
    INFO("chunks of " << chunk << " values");
    auto c = dp_chunks::of(parts[0], grads, chunk);
    CHECK(c.count() == (grads + chunk - 1) / chunk + 1);
    auto merged = c.merge(parts);
    CHECK(merged.numel() == grads + stats);
    CHECK(torch::equal(merged, expected));
  }

  // the supervisor's sum, all at once
  CHECK(torch::equal(dp_merge(parts, grads), expected));

  auto c = dp_chunks::of(parts[0], grads, 4);
  CHECK_THROWS_WITH(c.fold({}, torch::zeros({grads + 2 * stats + 2}), 0),
                    Catch::Contains("contributions of different sizes"));
  CHECK_THROWS_WITH(c.fold({}, parts[0], c.count()), Catch::Contains("chunk 4 of 4"));
  CHECK_THROWS_WITH(c.fold(torch::zeros({3}), parts[1], 0),
                    Catch::Contains("wrong shape"));
  CHECK_THROWS_WITH(c.assemble({torch::zeros({4})}), Catch::Contains("1 chunks, not 4"));
  CHECK_THROWS_WITH(dp_chunks::of(parts[0], grads, 0),
                    Catch::Contains("at least one value"));
  CHECK_THROWS_WITH(dp_chunks::of(parts[0], grads + 1, 4), Catch::Contains("malformed"));
}
