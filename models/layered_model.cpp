#include "models/layered_model.hpp"

#include "algorithms/sampling.hpp"

#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>

namespace salamander::models {

namespace nn = torch::nn;

namespace {

// --- layer modules ---------------------------------------------------------

struct dense_impl : nn::Module {
  dense_impl(int64_t in, int64_t out, bool relu)
      : fc(register_module("fc", nn::Linear(in, out))), relu(relu) {}
  torch::Tensor forward(torch::Tensor x) {
    if (x.dim() > 2) {
      x = x.flatten(1);
    }
    x = fc(x);
    return relu ? torch::relu(x) : x;
  }
  nn::Linear fc;
  bool relu;
};
TORCH_MODULE_IMPL(dense, dense_impl);

struct conv_impl : nn::Module {
  conv_impl(int64_t in, int64_t out, int64_t kernel, bool pool)
      : conv(register_module(
            "conv", nn::Conv2d(nn::Conv2dOptions(in, out, kernel).padding(kernel / 2)))),
        pool(pool) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(conv(x));
    if (!pool) {
      return x;
    }
    if (!torch::GradMode::is_enabled() && x.dim() == 4) {
      // Serving and evaluation: LibTorch 1.13 pools an NCHW tensor with a
      // scalar loop that also writes indices; its channels-last kernel is
      // vectorised. Measured for 16x32x28x28 on one thread: 1.6-1.9 ms
      // against 0.37 ms with both layout changes. A maximum is the same
      // value whichever kernel finds it, so the answers are bit-identical.
      // Training keeps the NCHW kernel: its indices route the gradient,
      // and which of two equal values wins is the kernel's choice.
      return torch::max_pool2d(x.contiguous(at::MemoryFormat::ChannelsLast), 2).contiguous();
    }
    return torch::max_pool2d(x, 2);
  }
  nn::Conv2d conv;
  bool pool;
};
TORCH_MODULE_IMPL(conv, conv_impl);

struct stem_impl : nn::Module {
  stem_impl(int64_t in, int64_t out)
      : conv(register_module(
            "conv", nn::Conv2d(nn::Conv2dOptions(in, out, 3).padding(1).bias(false)))),
        bn(register_module("bn", nn::BatchNorm2d(out))) {}
  torch::Tensor forward(torch::Tensor x) { return torch::relu(bn(conv(x))); }
  nn::Conv2d conv;
  nn::BatchNorm2d bn;
};
TORCH_MODULE_IMPL(stem, stem_impl);

struct residual_impl : nn::Module {
  residual_impl(int64_t in, int64_t out, int64_t stride)
      : conv1(register_module(
            "conv1",
            nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)))),
        bn1(register_module("bn1", nn::BatchNorm2d(out))),
        conv2(register_module(
            "conv2", nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out) {
      proj = register_module(
          "proj", nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      proj_bn = register_module("proj_bn", nn::BatchNorm2d(out));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = bn2(conv2(torch::relu(bn1(conv1(x)))));
    auto shortcut = proj ? proj_bn(proj(x)) : x;
    return torch::relu(y + shortcut);
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Conv2d proj{nullptr};
  nn::BatchNorm2d proj_bn{nullptr};
};
TORCH_MODULE_IMPL(residual, residual_impl);

struct pool_head_impl : nn::Module {
  pool_head_impl(int64_t in, int64_t classes)
      : fc(register_module("fc", nn::Linear(in, classes))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x.mean({2, 3})); }
  nn::Linear fc;
};
TORCH_MODULE_IMPL(pool_head, pool_head_impl);

struct vit_embed_impl : nn::Module {
  vit_embed_impl(int64_t channels, int64_t patch, int64_t dim, int64_t tokens)
      : proj(register_module(
            "proj", nn::Conv2d(nn::Conv2dOptions(channels, dim, patch).stride(patch)))),
        cls(register_parameter("cls", torch::randn({1, 1, dim}) * 0.02)),
        pos(register_parameter("pos", torch::randn({1, tokens, dim}) * 0.02)) {}
  torch::Tensor forward(torch::Tensor x) {
    auto p = proj(x).flatten(2).transpose(1, 2); // B x N x dim
    auto c = cls.expand({p.size(0), 1, p.size(2)});
    return torch::cat({c, p}, 1) + pos;
  }
  nn::Conv2d proj;
  torch::Tensor cls, pos;
};
TORCH_MODULE_IMPL(vit_embed, vit_embed_impl);

// A transformer block's two residual halves, x + attention(ln1(x)) and
// x + mlp(ln2(x)): one layer (vit_block), or two (vit_attn, vit_mlp) that a
// plan may cut between. The halves name their parameters as the block does.
struct attention_half {
  attention_half(nn::Module& m, int64_t dim, int64_t heads)
      : heads(heads),
        ln1(m.register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({dim})))),
        qkv(m.register_module("qkv", nn::Linear(dim, 3 * dim))),
        out(m.register_module("out", nn::Linear(dim, dim))) {}
  torch::Tensor operator()(const torch::Tensor& x) {
    auto b = x.size(0), t = x.size(1), d = x.size(2);
    auto q_k_v = qkv(ln1(x)).reshape({b, t, 3, heads, d / heads}).permute({2, 0, 3, 1, 4});
    auto q = q_k_v[0], k = q_k_v[1], v = q_k_v[2];
    auto att = torch::softmax(
        torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d / heads)),
        -1);
    auto ctx = torch::matmul(att, v).transpose(1, 2).reshape({b, t, d});
    return x + out(ctx);
  }
  int64_t heads;
  nn::LayerNorm ln1;
  nn::Linear qkv, out;
};

struct mlp_half {
  mlp_half(nn::Module& m, int64_t dim, int64_t mlp)
      : ln2(m.register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({dim})))),
        fc1(m.register_module("fc1", nn::Linear(dim, mlp))),
        fc2(m.register_module("fc2", nn::Linear(mlp, dim))) {}
  torch::Tensor operator()(const torch::Tensor& x) {
    return x + fc2(torch::gelu(fc1(ln2(x))));
  }
  nn::LayerNorm ln2;
  nn::Linear fc1, fc2;
};

struct vit_block_impl : nn::Module {
  vit_block_impl(int64_t dim, int64_t heads, int64_t mlp)
      : attention(*this, dim, heads), feed_forward(*this, dim, mlp) {}
  torch::Tensor forward(torch::Tensor x) { return feed_forward(attention(x)); }
  attention_half attention;
  mlp_half feed_forward;
};
TORCH_MODULE_IMPL(vit_block, vit_block_impl);

struct vit_attn_impl : nn::Module {
  vit_attn_impl(int64_t dim, int64_t heads) : attention(*this, dim, heads) {}
  torch::Tensor forward(torch::Tensor x) { return attention(x); }
  attention_half attention;
};
TORCH_MODULE_IMPL(vit_attn, vit_attn_impl);

struct vit_mlp_impl : nn::Module {
  vit_mlp_impl(int64_t dim, int64_t mlp) : feed_forward(*this, dim, mlp) {}
  torch::Tensor forward(torch::Tensor x) { return feed_forward(x); }
  mlp_half feed_forward;
};
TORCH_MODULE_IMPL(vit_mlp, vit_mlp_impl);

struct vit_head_impl : nn::Module {
  vit_head_impl(int64_t dim, int64_t classes)
      : ln(register_module("ln", nn::LayerNorm(nn::LayerNormOptions({dim})))),
        fc(register_module("fc", nn::Linear(dim, classes))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(ln(x.select(1, 0))); }
  nn::LayerNorm ln;
  nn::Linear fc;
};
TORCH_MODULE_IMPL(vit_head, vit_head_impl);

// torch::manual_seed sets a process-wide generator: several stage actors in
// one process must not interleave their initialisation.
std::mutex& init_mutex() {
  static std::mutex m;
  return m;
}

} // namespace

nn::AnyModule build_layer(const layer_info& l) {
  if (!l.source.empty()) {
    return build_script_layer(l);
  }
  if (l.kind == "dense") {
    return nn::AnyModule(dense(l.attr("in"), l.attr("out"), l.attr("relu") != 0));
  }
  if (l.kind == "conv") {
    return nn::AnyModule(
        conv(l.attr("in_ch"), l.attr("out_ch"), l.attr("kernel"), l.attr("pool") != 0));
  }
  if (l.kind == "stem") {
    return nn::AnyModule(stem(l.attr("in_ch"), l.attr("out_ch")));
  }
  if (l.kind == "residual") {
    return nn::AnyModule(residual(l.attr("in_ch"), l.attr("out_ch"), l.attr("stride")));
  }
  if (l.kind == "pool_head") {
    return nn::AnyModule(pool_head(l.attr("in_ch"), l.attr("classes")));
  }
  if (l.kind == "vit_embed") {
    return nn::AnyModule(
        vit_embed(l.attr("channels"), l.attr("patch"), l.attr("dim"), l.attr("tokens")));
  }
  if (l.kind == "vit_block") {
    return nn::AnyModule(vit_block(l.attr("dim"), l.attr("heads"), l.attr("mlp")));
  }
  if (l.kind == "vit_attn") {
    return nn::AnyModule(vit_attn(l.attr("dim"), l.attr("heads")));
  }
  if (l.kind == "vit_mlp") {
    return nn::AnyModule(vit_mlp(l.attr("dim"), l.attr("mlp")));
  }
  if (l.kind == "vit_head") {
    return nn::AnyModule(vit_head(l.attr("dim"), l.attr("classes")));
  }
  throw std::invalid_argument("layer " + l.name + " has unknown kind " + l.kind);
}

layered_model::layered_model(model_desc desc, uint64_t seed, size_t begin, size_t end)
    : desc_(std::move(desc)), begin_(begin), end_(std::min(end, desc_.layers.size())) {
  if (begin_ >= end_) {
    throw std::invalid_argument("layer range [" + std::to_string(begin) + ", " +
                                std::to_string(end) + ") of model " + desc_.spec.canonical() +
                                " with " + std::to_string(desc_.layers.size()) +
                                " layers is empty");
  }
  std::lock_guard<std::mutex> guard(init_mutex());
  for (size_t i = begin_; i < end_; ++i) {
    torch::manual_seed(algorithms::mix_seed(seed, i, 0x1a7e));
    layers_.push_back(build_layer(desc_.layers[i]));
  }
}

layered_model layered_model::build(const model_spec& spec, uint64_t seed) {
  return layered_model(describe(spec), seed);
}

nn::AnyModule layered_model::layer(size_t i) const {
  if (i < begin_ || i >= end_) {
    throw std::out_of_range("layer " + std::to_string(i) + " is not held here (holding [" +
                            std::to_string(begin_) + ", " + std::to_string(end_) + "))");
  }
  return layers_[i - begin_];
}

nn::Sequential layered_model::slice(size_t b, size_t e) const {
  if (b < begin_ || e > end_ || b >= e) {
    throw std::out_of_range("slice [" + std::to_string(b) + ", " + std::to_string(e) +
                            ") is not within the held layers [" + std::to_string(begin_) +
                            ", " + std::to_string(end_) + ")");
  }
  nn::Sequential seq;
  for (size_t i = b; i < e; ++i) {
    seq->push_back(desc_.layers[i].name, layers_[i - begin_]);
  }
  return seq;
}

range_executor::range_executor(nn::Sequential net, bool first, bool last)
    : net_(std::move(net)), first_(first), last_(last) {}

torch::Tensor range_executor::forward(int64_t micro, const torch::Tensor& input) {
  saved s;
  s.input = first_ ? input : input.detach().requires_grad_(true);
  s.output = net_->forward(s.input);
  auto out = s.output.detach();
  pending_[micro] = std::move(s);
  return out;
}

torch::Tensor range_executor::backward(int64_t micro, const torch::Tensor& grad_output) {
  auto it = pending_.find(micro);
  if (it == pending_.end()) {
    throw std::invalid_argument("backward for micro-batch " + std::to_string(micro) +
                                " that has no forward in flight");
  }
  saved s = std::move(it->second);
  pending_.erase(it);
  s.output.backward(grad_output);
  return first_ ? torch::Tensor() : s.input.grad();
}

range_executor::loss_result range_executor::loss_backward(int64_t micro,
                                                          const torch::Tensor& labels,
                                                          double scale) {
  if (!last_) {
    throw std::logic_error("loss_backward on a range that is not the last");
  }
  auto it = pending_.find(micro);
  if (it == pending_.end()) {
    throw std::invalid_argument("loss for micro-batch " + std::to_string(micro) +
                                " that has no forward in flight");
  }
  saved s = std::move(it->second);
  pending_.erase(it);
  auto loss = torch::nn::functional::cross_entropy(s.output, labels);
  if (scale == 1.0) {
    loss.backward();
  } else {
    (loss * scale).backward();
  }
  loss_result r;
  r.loss = loss.item<double>();
  r.correct = count_correct(s.output.detach(), labels);
  if (!first_) {
    r.grad_input = s.input.grad();
  }
  return r;
}

torch::Tensor range_executor::infer(const torch::Tensor& input) {
  torch::NoGradGuard no_grad;
  return net_->forward(input);
}

int64_t count_correct(const torch::Tensor& logits, const torch::Tensor& labels) {
  return logits.argmax(1).eq(labels).sum().item<int64_t>();
}

namespace {

struct bn_view {
  torch::Tensor mean;
  torch::Tensor var;
  torch::Tensor tracked;
  double momentum;
};

template <class Impl>
bool add_bn(const std::shared_ptr<nn::Module>& m, std::vector<bn_view>& out) {
  auto* bn = dynamic_cast<Impl*>(m.get());
  if (!bn) {
    return false;
  }
  if (!bn->options.track_running_stats()) {
    return true;
  }
  if (!bn->options.momentum()) {
    throw std::invalid_argument("data parallelism needs BatchNorm with a momentum (a cumulative "
                                "average cannot be merged)");
  }
  out.push_back({bn->running_mean, bn->running_var, bn->num_batches_tracked,
                 *bn->options.momentum()});
  return true;
}

std::vector<bn_view> batchnorms(nn::Module& net) {
  std::vector<bn_view> out;
  for (auto& m : net.modules(/*include_self=*/false)) {
    if (!add_bn<nn::BatchNorm1dImpl>(m, out) && !add_bn<nn::BatchNorm2dImpl>(m, out)) {
      add_bn<nn::BatchNorm3dImpl>(m, out);
    }
  }
  return out;
}

} // namespace

std::vector<torch::Tensor> batchnorm_stats(nn::Module& net) {
  std::vector<torch::Tensor> out;
  for (auto& b : batchnorms(net)) {
    out.push_back(b.mean);
    out.push_back(b.var);
  }
  return out;
}

torch::Tensor dp_contribution(nn::Module& net, const std::vector<torch::Tensor>& stats_before,
                              int64_t micro_count, bool leader, int64_t& grad_values) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (auto& p : net.parameters()) {
    auto g = p.grad();
    grads.push_back(g.defined() ? g.reshape(-1) : torch::zeros({p.numel()}, p.options()));
  }
  auto bns = batchnorms(net);
  if (stats_before.size() != 2 * bns.size()) {
    throw std::logic_error("BatchNorm statistics before the batch do not match the model");
  }
  std::vector<torch::Tensor> contrib;
  std::vector<torch::Tensor> decay;
  for (size_t i = 0; i < bns.size(); ++i) {
    double d = std::pow(1.0 - bns[i].momentum, static_cast<double>(micro_count));
    for (auto [now, before] : {std::pair{bns[i].mean, stats_before[2 * i]},
                               std::pair{bns[i].var, stats_before[2 * i + 1]}}) {
      auto c = leader ? now.reshape(-1).to(torch::kFloat32)
                      : (now.to(torch::kFloat64) - d * before.to(torch::kFloat64))
                            .reshape(-1)
                            .to(torch::kFloat32);
      contrib.push_back(c);
      decay.push_back(torch::full({now.numel()}, d, torch::kFloat32));
    }
  }
  auto g = grads.empty() ? torch::zeros({0}) : torch::cat(grads).to(torch::kFloat32);
  grad_values = g.numel();
  std::vector<torch::Tensor> all{g};
  all.insert(all.end(), contrib.begin(), contrib.end());
  all.insert(all.end(), decay.begin(), decay.end());
  return torch::cat(all);
}

dp_chunks dp_chunks::of(const torch::Tensor& contribution, int64_t grad_values,
                        int64_t chunk_values) {
  auto n = contribution.numel();
  if (grad_values < 0 || n < grad_values || (n - grad_values) % 2 != 0 ||
      contribution.dim() != 1 || contribution.scalar_type() != torch::kFloat32) {
    throw std::invalid_argument("malformed data-parallel contribution");
  }
  if (chunk_values <= 0) {
    throw std::invalid_argument("a data-parallel chunk needs at least one value");
  }
  dp_chunks c;
  c.grad_values = grad_values;
  c.stats = (n - grad_values) / 2;
  c.chunk_values = chunk_values;
  if (c.grad_chunks() + int64_t{1} > std::numeric_limits<uint32_t>::max()) {
    throw std::invalid_argument("data-parallel chunks too small for the model");
  }
  return c;
}

uint32_t dp_chunks::grad_chunks() const {
  return static_cast<uint32_t>((grad_values + chunk_values - 1) / chunk_values);
}

std::pair<int64_t, int64_t> dp_chunks::grad_range(uint32_t chunk) const {
  auto begin = static_cast<int64_t>(chunk) * chunk_values;
  return {begin, std::min(grad_values, begin + chunk_values)};
}

torch::Tensor dp_chunks::fold(const torch::Tensor& partial,
                              const torch::Tensor& contribution, uint32_t chunk) const {
  torch::NoGradGuard no_grad;
  if (contribution.numel() != grad_values + 2 * stats) {
    throw std::invalid_argument(
        "data-parallel members sent contributions of different sizes (" +
        std::to_string(contribution.numel()) + " and " +
        std::to_string(grad_values + 2 * stats) + ")");
  }
  if (chunk >= count()) {
    throw std::invalid_argument("data-parallel chunk " + std::to_string(chunk) + " of " +
                                std::to_string(count()));
  }
  if (chunk < grad_chunks()) {
    auto [begin, end] = grad_range(chunk);
    auto own = contribution.narrow(0, begin, end - begin);
    if (!partial.defined()) {
      return own.clone();
    }
    if (partial.numel() != end - begin || partial.scalar_type() != torch::kFloat32) {
      throw std::invalid_argument("a data-parallel gradient chunk of the wrong shape");
    }
    return partial + own;
  }
  // the statistics: r <- decay * r + c, member by member (member 0's c is its
  // statistics as they are)
  auto c = contribution.narrow(0, grad_values, stats).to(torch::kFloat64);
  if (!partial.defined()) {
    return c;
  }
  if (partial.numel() != stats || partial.scalar_type() != torch::kFloat64) {
    throw std::invalid_argument("a data-parallel statistics chunk of the wrong shape");
  }
  return contribution.narrow(0, grad_values + stats, stats).to(torch::kFloat64) *
             partial +
         c;
}

torch::Tensor dp_chunks::finish(const torch::Tensor& folded, uint32_t chunk) const {
  return chunk < grad_chunks() ? folded : folded.to(torch::kFloat32);
}

torch::Tensor dp_chunks::assemble(const std::vector<torch::Tensor>& finished) const {
  if (finished.size() != count()) {
    throw std::invalid_argument("the merged update has " +
                                std::to_string(finished.size()) + " chunks, not " +
                                std::to_string(count()));
  }
  for (uint32_t j = 0; j < count(); ++j) {
    auto want = j < grad_chunks() ? grad_range(j).second - grad_range(j).first : stats;
    if (!finished[j].defined() || finished[j].numel() != want ||
        finished[j].scalar_type() != torch::kFloat32) {
      throw std::invalid_argument("chunk " + std::to_string(j) +
                                  " of the merged update is missing or malformed");
    }
  }
  return torch::cat(finished);
}

torch::Tensor dp_chunks::merge(const std::vector<torch::Tensor>& parts) const {
  std::vector<torch::Tensor> finished;
  for (uint32_t j = 0; j < count(); ++j) {
    torch::Tensor partial;
    for (auto& p : parts) {
      partial = fold(partial, p, j);
    }
    finished.push_back(finish(partial, j));
  }
  return assemble(finished);
}

torch::Tensor dp_merge(const std::vector<torch::Tensor>& parts, int64_t grad_values) {
  if (parts.empty()) {
    throw std::invalid_argument("nothing to merge");
  }
  return dp_chunks::of(parts[0], grad_values, std::max<int64_t>(grad_values, 1))
      .merge(parts);
}

void dp_apply(nn::Module& net, const torch::Tensor& merged, int64_t other_forwards) {
  torch::NoGradGuard no_grad;
  int64_t at = 0;
  for (auto& p : net.parameters()) {
    auto part = merged.narrow(0, at, p.numel()).view(p.sizes()).to(p.dtype());
    at += p.numel();
    if (p.grad().defined()) {
      p.mutable_grad().copy_(part);
    } else {
      p.mutable_grad() = part.clone();
    }
  }
  for (auto& b : batchnorms(net)) {
    for (auto& t : {b.mean, b.var}) {
      t.copy_(merged.narrow(0, at, t.numel()).view(t.sizes()));
      at += t.numel();
    }
    b.tracked.add_(other_forwards);
  }
  if (at != merged.numel()) {
    throw std::invalid_argument("the merged update has " + std::to_string(merged.numel()) +
                                " values, this model needs " + std::to_string(at));
  }
}

} // namespace salamander::models
