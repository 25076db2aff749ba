// The model zoo, described analytically (see model_desc.hpp for why).
//
// Costs follow the usual counting: a multiply-add is 2 FLOPs; element-wise
// operations (ReLU, GELU, normalisation, residual adds) are counted at a few
// FLOPs per element because on edge CPUs they are memory-bound and not free.
// ViT configurations are those of Dosovitskiy et al. 2021 (base/large/huge)
// and Touvron et al. 2021 (tiny/small).
#include "models/model_desc.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace salamander::models {

namespace {

constexpr int64_t float_bytes = 4;

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument(what);
}

// Upper bounds on the options keep every count below in int64 (the largest,
// a dense layer of 2^20 x 2^20 weights, is 2^40 parameters); a model near
// them is refused for its memory long before (see training_memory).
constexpr int64_t max_image = 4096;
constexpr int64_t max_channels = 1024;
constexpr int64_t max_classes = 1000000;
constexpr int64_t max_width = 1 << 20; ///< hidden, c1, c2
constexpr int64_t max_resnet_width = 4096;
constexpr int64_t max_depth = 100000; ///< layers, blocks

int64_t positive(const model_spec& spec, const std::string& key, int64_t fallback,
                 int64_t max) {
  int64_t v = spec.get_int(key, fallback);
  if (v <= 0) {
    bad("model option " + key + "=" + std::to_string(v) + " must be positive (1 to " +
        std::to_string(max) + ")");
  }
  if (v > max) {
    bad("model option " + key + "=" + std::to_string(v) + " is too large (at most " +
        std::to_string(max) + ")");
  }
  return v;
}

void finish(layer_info& l) {
  l.param_bytes = l.params * float_bytes;
  l.output_bytes = elements(l.output) * float_bytes;
}

int64_t conv_out(int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
  return (size + 2 * pad - kernel) / stride + 1;
}

layer_info dense(const std::string& name, const shape& in, int64_t out, bool relu) {
  layer_info l;
  l.name = name;
  l.kind = "dense";
  l.input = in;
  int64_t fan_in = elements(in);
  l.output = {out};
  l.params = fan_in * out + out;
  l.flops =
      2.0 * static_cast<double>(fan_in * out) + (relu ? static_cast<double>(out) : 0.0);
  l.activation_bytes = (fan_in + (relu ? 2 : 1) * out) * float_bytes;
  l.attrs = {{"in", fan_in}, {"out", out}, {"relu", relu ? 1 : 0}};
  finish(l);
  return l;
}

// conv (same padding) + ReLU + optional 2x2 max pool
layer_info conv_block(const std::string& name, const shape& in, int64_t out_ch,
                      int64_t kernel, bool pool) {
  if (in.size() != 3) {
    bad("layer " + name + " needs a CxHxW input, got " + to_string(in));
  }
  layer_info l;
  l.name = name;
  l.kind = "conv";
  l.input = in;
  int64_t c = in[0], h = in[1], w = in[2];
  int64_t pad = kernel / 2;
  int64_t ho = conv_out(h, kernel, 1, pad), wo = conv_out(w, kernel, 1, pad);
  int64_t conv_elems = out_ch * ho * wo;
  l.output = pool ? shape{out_ch, ho / 2, wo / 2} : shape{out_ch, ho, wo};
  l.params = c * out_ch * kernel * kernel + out_ch;
  l.flops =
      2.0 * static_cast<double>(c * kernel * kernel) * static_cast<double>(conv_elems) +
      2.0 * static_cast<double>(conv_elems);
  l.activation_bytes = (elements(in) + 2 * conv_elems + elements(l.output)) * float_bytes;
  l.attrs = {
      {"in_ch", c}, {"out_ch", out_ch}, {"kernel", kernel}, {"pool", pool ? 1 : 0}};
  finish(l);
  return l;
}

// ResNet basic block (He et al. 2016): conv-bn-relu-conv-bn + shortcut, relu.
layer_info residual(const std::string& name, const shape& in, int64_t out_ch,
                    int64_t stride) {
  layer_info l;
  l.name = name;
  l.kind = "residual";
  l.input = in;
  int64_t c = in[0];
  int64_t ho = conv_out(in[1], 3, stride, 1), wo = conv_out(in[2], 3, stride, 1);
  int64_t e = out_ch * ho * wo;
  bool project = stride != 1 || c != out_ch;
  l.output = {out_ch, ho, wo};
  l.params = c * out_ch * 9 + 2 * out_ch + out_ch * out_ch * 9 + 2 * out_ch +
             (project ? c * out_ch + 2 * out_ch : 0);
  l.flops =
      2.0 * static_cast<double>(c * 9 * e) + 2.0 * static_cast<double>(out_ch * 9 * e) +
      (project ? 2.0 * static_cast<double>(c * e) : 0.0) + 12.0 * static_cast<double>(e);
  l.activation_bytes = (elements(in) + (project ? 8 : 6) * e) * float_bytes;
  l.attrs = {{"in_ch", c}, {"out_ch", out_ch}, {"stride", stride}};
  finish(l);
  return l;
}

model_desc describe_mlp(const model_spec& spec, const shape& input, int64_t classes) {
  int64_t hidden = positive(spec, "hidden", 256, max_width);
  int64_t depth = positive(spec, "depth", 2, max_depth);
  model_desc d;
  shape cur = input;
  for (int64_t i = 0; i < depth; ++i) {
    d.layers.push_back(dense("fc" + std::to_string(i + 1), cur, hidden, true));
    cur = d.layers.back().output;
  }
  d.layers.push_back(dense("head", cur, classes, false));
  return d;
}

model_desc describe_cnn(const model_spec& spec, const shape& input, int64_t classes) {
  int64_t c1 = positive(spec, "c1", 8, max_width);
  int64_t c2 = positive(spec, "c2", 16, max_width);
  // Narrow on purpose: 87-88% on Fashion-MNIST after one epoch at ~7,500
  // samples/s on one thread; wider variants gain little and cost 3-5x.
  int64_t hidden = positive(spec, "hidden", 64, max_width);
  model_desc d;
  d.layers.push_back(conv_block("conv1", input, c1, 5, true));
  d.layers.push_back(conv_block("conv2", d.layers.back().output, c2, 5, true));
  d.layers.push_back(dense("fc1", d.layers.back().output, hidden, true));
  d.layers.push_back(dense("head", d.layers.back().output, classes, false));
  return d;
}

model_desc describe_resnet(const model_spec& spec, const shape& input, int64_t classes) {
  int64_t width = positive(spec, "width", 16, max_resnet_width);
  int64_t blocks = positive(spec, "blocks", 2, max_depth);
  model_desc d;
  if (input.size() != 3) {
    bad("resnet needs a CxHxW input, got " + to_string(input));
  }
  layer_info stem;
  stem.name = "stem";
  stem.kind = "stem";
  stem.input = input;
  int64_t e = width * input[1] * input[2];
  stem.output = {width, input[1], input[2]};
  stem.params = input[0] * width * 9 + 2 * width;
  stem.flops = 2.0 * static_cast<double>(input[0] * 9 * e) + 6.0 * static_cast<double>(e);
  stem.activation_bytes = (elements(input) + 3 * e) * float_bytes;
  stem.attrs = {{"in_ch", input[0]}, {"out_ch", width}};
  finish(stem);
  d.layers.push_back(stem);
  shape cur = stem.output;
  for (int64_t group = 0; group < 3; ++group) {
    int64_t ch = width << group;
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t stride = (group > 0 && b == 0) ? 2 : 1;
      d.layers.push_back(
          residual("res" + std::to_string(group + 1) + "_" + std::to_string(b + 1), cur,
                   ch, stride));
      cur = d.layers.back().output;
    }
  }
  layer_info head;
  head.name = "head";
  head.kind = "pool_head";
  head.input = cur;
  head.output = {classes};
  head.params = cur[0] * classes + classes;
  head.flops =
      static_cast<double>(elements(cur)) + 2.0 * static_cast<double>(cur[0] * classes);
  head.activation_bytes = (elements(cur) + cur[0] + classes) * float_bytes;
  head.attrs = {{"in_ch", cur[0]}, {"classes", classes}};
  finish(head);
  d.layers.push_back(head);
  return d;
}

struct vit_config {
  int64_t dim, depth, heads, mlp;
};

vit_config vit_size(const std::string& size) {
  if (size == "tiny")
    return {192, 12, 3, 768};
  if (size == "small")
    return {384, 12, 6, 1536};
  if (size == "base")
    return {768, 12, 12, 3072};
  if (size == "large")
    return {1024, 24, 16, 4096};
  if (size == "huge")
    return {1280, 32, 16, 5120};
  bad("vit size '" + size + "' is not one of tiny, small, base, large, huge");
}

model_desc describe_vit(const model_spec& spec, const shape& input, int64_t classes) {
  vit_config cfg = vit_size(spec.get("size", "tiny"));
  cfg.depth = positive(spec, "depth", cfg.depth, max_depth);
  cfg.mlp = positive(spec, "mlp", cfg.mlp, max_width); // the MLP's hidden width
  int64_t patch = positive(spec, "patch", input[1] >= 224 ? 16 : 7, max_image);
  if (input.size() != 3 || input[1] % patch != 0 || input[2] % patch != 0) {
    bad("vit cuts its image into patch x patch squares: image=" +
        std::to_string(input[1]) + " is not a multiple of patch=" +
        std::to_string(patch) + " (give a patch that divides the image)");
  }
  if (cfg.dim % cfg.heads != 0) {
    bad("vit dim " + std::to_string(cfg.dim) + " is not divisible by heads");
  }
  int64_t n = (input[1] / patch) * (input[2] / patch);
  int64_t t = n + 1; // + class token
  int64_t dim = cfg.dim;
  model_desc d;

  layer_info embed;
  embed.name = "embed";
  embed.kind = "vit_embed";
  embed.input = input;
  embed.output = {t, dim};
  embed.params = input[0] * patch * patch * dim + dim + dim + t * dim;
  embed.flops = 2.0 * static_cast<double>(n * input[0] * patch * patch * dim) +
                static_cast<double>(t * dim);
  embed.activation_bytes = (elements(input) + 2 * t * dim) * float_bytes;
  embed.attrs = {{"channels", input[0]}, {"patch", patch}, {"dim", dim}, {"tokens", t}};
  finish(embed);
  d.layers.push_back(embed);

  // a block's costs by half: attention (ln1, qkv, scores, context, out) and
  // MLP (ln2, fc1, GELU, fc2); each half adds its residual
  auto td = static_cast<double>(t * dim);
  int64_t attn_params = 2 * dim + (dim * 3 * dim + 3 * dim) + (dim * dim + dim);
  int64_t mlp_params = 2 * dim + (dim * cfg.mlp + cfg.mlp) + (cfg.mlp * dim + dim);
  double attn_flops = 2.0 * td * static_cast<double>(3 * dim) +
                      4.0 * static_cast<double>(t) * td + 2.0 * td * static_cast<double>(dim) +
                      5.0 * static_cast<double>(cfg.heads * t * t) + 10.0 * td;
  double mlp_flops = 4.0 * td * static_cast<double>(cfg.mlp) + 10.0 * td;
  // saved for backward: the norm, qkv, attention weights, context and the
  // residual sum; the norm, the MLP hidden (pre and post GELU) and the sum
  int64_t attn_bytes = (4 * t * dim + 3 * t * dim + 2 * cfg.heads * t * t) * float_bytes;
  int64_t mlp_bytes = (4 * t * dim + 2 * t * cfg.mlp) * float_bytes;
  int64_t sublayers = positive(spec, "sublayers", 1, 2);
  auto block = [&](const std::string& name, const std::string& kind, int64_t params,
                   double flops, int64_t bytes, std::map<std::string, int64_t> attrs) {
    layer_info b;
    b.name = name;
    b.kind = kind;
    b.input = {t, dim};
    b.output = {t, dim};
    b.params = params;
    b.flops = flops;
    b.activation_bytes = bytes;
    b.attrs = std::move(attrs);
    finish(b);
    d.layers.push_back(b);
  };
  for (int64_t i = 0; i < cfg.depth; ++i) {
    auto name = "block" + std::to_string(i + 1);
    if (sublayers == 2) { // two layers a plan may cut between
      block(name + "_attn", "vit_attn", attn_params, attn_flops, attn_bytes,
            {{"dim", dim}, {"heads", cfg.heads}});
      block(name + "_mlp", "vit_mlp", mlp_params, mlp_flops, mlp_bytes,
            {{"dim", dim}, {"mlp", cfg.mlp}});
    } else {
      block(name, "vit_block", attn_params + mlp_params, attn_flops + mlp_flops,
            attn_bytes + mlp_bytes, {{"dim", dim}, {"heads", cfg.heads}, {"mlp", cfg.mlp}});
    }
  }

  layer_info head;
  head.name = "head";
  head.kind = "vit_head";
  head.input = {t, dim};
  head.output = {classes};
  head.params = 2 * dim + dim * classes + classes;
  head.flops = 2.0 * static_cast<double>(dim * classes) + 5.0 * static_cast<double>(dim);
  head.activation_bytes = (2 * dim + classes) * float_bytes;
  head.attrs = {{"dim", dim}, {"classes", classes}};
  finish(head);
  d.layers.push_back(head);
  return d;
}

} // namespace

int64_t elements(const shape& s) {
  int64_t n = 1;
  for (auto x : s) {
    n *= x;
  }
  return n;
}

std::string to_string(const shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    out += (i ? "x" : "") + std::to_string(s[i]);
  }
  return out.empty() ? "scalar" : out;
}

int64_t layer_info::attr(const std::string& key) const {
  auto i = attrs.find(key);
  if (i == attrs.end()) {
    throw std::invalid_argument("layer " + name + " (" + kind + ") has no attribute " +
                                key);
  }
  return i->second;
}

model_spec model_spec::parse(const std::string& text) {
  model_spec spec;
  auto colon = text.find(':');
  spec.name = text.substr(0, colon);
  if (spec.name.empty()) {
    bad("model spec '" + text + "' has no model name");
  }
  if (colon == std::string::npos) {
    return spec;
  }
  std::stringstream rest(text.substr(colon + 1));
  std::string item;
  bool first = true;
  while (std::getline(rest, item, ',')) {
    auto eq = item.find('=');
    if (first && spec.name == "torchscript" && eq == std::string::npos && !item.empty()) {
      // torchscript:PATH is short for torchscript:file=PATH
      spec.options["file"] = item;
    } else if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      bad("model option '" + item + "' in '" + text + "' is not key=value");
    } else {
      spec.options[item.substr(0, eq)] = item.substr(eq + 1);
    }
    first = false;
  }
  if (auto f = spec.options.find("file"); spec.name == "torchscript" && f != spec.options.end()) {
    // every process that reads the spec (nodes started elsewhere) finds the same file
    std::error_code ec;
    auto absolute = std::filesystem::absolute(f->second, ec);
    if (!ec) {
      f->second = absolute.lexically_normal().string();
    }
  }
  return spec;
}

std::string model_spec::canonical() const {
  std::string out = name;
  char sep = ':';
  for (auto& [k, v] : options) {
    out += sep + k + "=" + v;
    sep = ',';
  }
  return out;
}

int64_t model_spec::get_int(const std::string& key, int64_t fallback) const {
  auto i = options.find(key);
  if (i == options.end()) {
    return fallback;
  }
  try {
    size_t used = 0;
    int64_t v = std::stoll(i->second, &used);
    if (used != i->second.size()) {
      throw std::invalid_argument("trailing characters");
    }
    return v;
  } catch (const std::exception&) {
    bad("model option " + key + "=" + i->second + " is not an integer");
  }
}

std::string model_spec::get(const std::string& key, const std::string& fallback) const {
  auto i = options.find(key);
  return i == options.end() ? fallback : i->second;
}

int64_t model_desc::total_params() const {
  int64_t n = 0;
  for (auto& l : layers) {
    n += l.params;
  }
  return n;
}

double model_desc::total_flops() const {
  double n = 0;
  for (auto& l : layers) {
    n += l.flops;
  }
  return n;
}

size_t model_desc::index_of(const std::string& layer_name) const {
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].name == layer_name) {
      return i;
    }
  }
  throw std::invalid_argument("model " + spec.canonical() + " has no layer " +
                              layer_name);
}

std::string spec_difference(const model_spec& a, const model_spec& b) {
  if (a.name != b.name) {
    return a.name + " vs " + b.name;
  }
  std::string out;
  auto side = [](const model_spec& s, const std::string& key) {
    auto i = s.options.find(key);
    return i == s.options.end() ? key + " not given (its default)"
                                : key + "=" + i->second;
  };
  std::map<std::string, int> keys;
  for (auto* s : {&a, &b}) {
    for (auto& kv : s->options) {
      keys[kv.first]++;
    }
  }
  for (auto& kv : keys) {
    if (a.get(kv.first, "\n") != b.get(kv.first, "\n")) {
      out += (out.empty() ? "" : ", ") + side(a, kv.first) + " vs " + side(b, kv.first);
    }
  }
  return out;
}

memory_estimate training_memory(const model_desc& desc, const std::string& optimizer,
                                int64_t batch_size) {
  memory_estimate m;
  double activations = 0;
  for (auto& l : desc.layers) {
    m.weights += static_cast<double>(l.param_bytes);
    activations += static_cast<double>(l.activation_bytes);
  }
  m.gradients = m.weights;
  m.optimizer = (optimizer == "adam" ? 2.0 : 1.0) * m.weights;
  m.activations = activations * static_cast<double>(batch_size);
  m.optimizer_kind = optimizer;
  m.batch_size = batch_size;
  return m;
}

std::string memory_estimate::describe() const {
  return format_bytes(total()) + " (weights " + format_bytes(weights) + ", gradients " +
         format_bytes(gradients) + ", " + optimizer_kind + " state " +
         format_bytes(optimizer) + ", activations " + format_bytes(activations) +
         " for a batch of " + std::to_string(batch_size) + ")";
}

std::string format_bytes(double bytes) {
  const char* units[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB"};
  size_t u = 0;
  while (bytes >= 1000 && u + 1 < std::size(units)) {
    bytes /= 1000;
    ++u;
  }
  char out[32];
  std::snprintf(out, sizeof out, u == 0 || bytes >= 100 ? "%.0f %s" : "%.1f %s", bytes,
                units[u]);
  return out;
}

std::vector<std::string> zoo_names() {
  return {"mlp", "cnn", "resnet", "vit"};
}

uint64_t fnv1a(const void* data, size_t size, uint64_t hash) {
  auto p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

namespace {

layers_describer torchscript_describer = nullptr;

// The layers of `spec`, unchecked for sizes that shrink to nothing.
model_desc describe_layers(const model_spec& spec) {
  static const std::vector<std::string> known_common = {"image", "channels", "classes"};
  int64_t image = positive(spec, "image", 28, max_image);
  shape input = {positive(spec, "channels", 1, max_channels), image, image};
  int64_t classes = positive(spec, "classes", 10, max_classes);
  model_desc d;
  std::vector<std::string> known;
  if (spec.name == "mlp") {
    d = describe_mlp(spec, input, classes);
    known = {"hidden", "depth"};
  } else if (spec.name == "cnn") {
    d = describe_cnn(spec, input, classes);
    known = {"c1", "c2", "hidden"};
  } else if (spec.name == "resnet") {
    d = describe_resnet(spec, input, classes);
    known = {"width", "blocks"};
  } else if (spec.name == "vit") {
    d = describe_vit(spec, input, classes);
    known = {"size", "depth", "patch", "mlp", "sublayers"};
  } else if (spec.name == "torchscript") {
    if (!torchscript_describer) {
      bad("model " + spec.canonical() + ": this program cannot load TorchScript files");
    }
    d = torchscript_describer(spec, input, classes);
    known = {"file"};
  } else {
    bad("unknown model '" + spec.name +
        "'; the zoo has mlp, cnn, resnet, vit (or give torchscript:FILE)");
  }
  for (auto& [k, v] : spec.options) {
    if (std::find(known.begin(), known.end(), k) == known.end() &&
        std::find(known_common.begin(), known_common.end(), k) == known_common.end()) {
      bad("model " + spec.name + " has no option '" + k + "'");
    }
  }
  d.spec = spec;
  d.input = input;
  d.classes = classes;
  return d;
}

// The first layer whose output has a side of zero (an image too small for
// its convolutions and pools), or nullptr.
const layer_info* vanishing_layer(const model_desc& d) {
  for (auto& l : d.layers) {
    if (std::any_of(l.output.begin(), l.output.end(), [](int64_t x) { return x <= 0; })) {
      return &l;
    }
  }
  return nullptr;
}

// The smallest image `spec` takes, searched upwards (a few steps for the
// zoo's pools); 0 if none up to the bound.
int64_t smallest_image(model_spec spec) {
  for (int64_t image = spec.get_int("image", 28) + 1; image <= max_image; ++image) {
    spec.options["image"] = std::to_string(image);
    try {
      if (!vanishing_layer(describe_layers(spec))) {
        return image;
      }
    } catch (const std::invalid_argument&) {
      // e.g. not divisible by a patch: try the next size
    }
  }
  return 0;
}

} // namespace

void set_torchscript_describer(layers_describer describer) {
  torchscript_describer = describer;
}

model_desc describe(const model_spec& spec) {
  auto d = describe_layers(spec);
  if (auto* l = vanishing_layer(d)) {
    auto smallest = smallest_image(spec);
    bad("model " + spec.canonical() + ": image=" + std::to_string(d.input[1]) +
        " is too small, layer " + l->name + " would output " + to_string(l->output) +
        (smallest > 0
             ? " (" + spec.name + " takes image=" + std::to_string(smallest) + " or more)"
             : ""));
  }
  std::string key = spec.canonical();
  uint64_t h = fnv1a(key.data(), key.size());
  for (auto& l : d.layers) {
    std::string part = l.name + "/" + l.kind + "/" + std::to_string(l.params) + "/" +
                       to_string(l.output);
    if (!l.source.empty()) {
      // another file under the same name is another model
      part += "/" + std::to_string(l.attr("file_hash"));
    }
    h = fnv1a(part.data(), part.size(), h);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  d.fingerprint = hex;
  return d;
}

} // namespace salamander::models
