#include "models/torchscript.hpp"
#include "models/layered_model.hpp"

#include <torch/script.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace salamander::models {

namespace {

namespace nn = torch::nn;

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument(what);
}

std::string first_line(const c10::Error& e) {
  std::string text = e.what_without_backtrace();
  return text.substr(0, text.find('\n'));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    bad("TorchScript file " + path + " cannot be read");
  }
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

torch::jit::Module load_module(const std::string& path, const std::string& bytes) {
  try {
    std::istringstream in(bytes);
    return torch::jit::load(in, torch::kCPU);
  } catch (const c10::Error& e) {
    bad("TorchScript file " + path + " does not load: " + first_line(e));
  }
}

std::string type_name(const torch::jit::Module& m) {
  auto name = m.type()->name();
  return name ? name->name() : "Module";
}

std::vector<torch::jit::NameModule> children_of(const torch::jit::Module& m) {
  std::vector<torch::jit::NameModule> out;
  for (auto c : m.named_children()) {
    out.push_back(c);
  }
  return out;
}

// A child of the scripted Sequential as one layer. Its parameters and
// buffers are registered under holder modules that mirror its submodules,
// so they keep their PyTorch names; they are the very tensors the scripted
// code reads, so training, restore and replication change what it computes.
struct script_layer_impl : nn::Module {
  // `root` keeps the file's compilation unit (the code of every method)
  // alive: a child holds only a weak reference to it.
  script_layer_impl(torch::jit::Module root, torch::jit::Module m)
      : root(std::move(root)), module(std::move(m)) {
    for (const auto& p : module.named_parameters(/*recurse=*/true)) {
      auto [holder, leaf] = holder_for(p.name);
      holder->register_parameter(leaf, p.value, p.value.requires_grad());
    }
    for (const auto& b : module.named_buffers(/*recurse=*/true)) {
      auto [holder, leaf] = holder_for(b.name);
      holder->register_buffer(leaf, b.value);
    }
  }

  torch::Tensor forward(torch::Tensor x) { return module.forward({std::move(x)}).toTensor(); }

  void train(bool on = true) override {
    nn::Module::train(on);
    module.train(on);
  }

  torch::jit::Module root;
  torch::jit::Module module;

private:
  // "block.bn.weight" -> (the holder for block.bn, "weight"), creating holders
  std::pair<nn::Module*, std::string> holder_for(const std::string& dotted) {
    nn::Module* at = this;
    size_t start = 0;
    for (size_t dot = dotted.find('.'); dot != std::string::npos;
         start = dot + 1, dot = dotted.find('.', start)) {
      auto part = dotted.substr(start, dot - start);
      auto children = at->named_children();
      auto* found = children.find(part);
      at = found ? found->get()
                 : at->register_module(part, std::make_shared<nn::Module>()).get();
    }
    return {at, dotted.substr(start)};
  }
};
TORCH_MODULE_IMPL(script_layer, script_layer_impl);

// Forward FLOPs per sample, estimated: the file says nothing about its
// arithmetic. A layer with weights does about 2 x weights multiply-adds per
// output position (exact for Linear and Conv2d: positions = output
// elements / output channels); one without (ReLU, pooling, Flatten) about
// one operation per output element. The profilers measure the real time;
// this only seeds the plan until they have.
double estimate_flops(int64_t params, const shape& out) {
  int64_t out_elements = elements(out);
  if (params == 0) {
    return static_cast<double>(out_elements);
  }
  int64_t positions = out.size() >= 2 && out[0] > 0 ? out_elements / out[0] : 1;
  return 2.0 * static_cast<double>(params) * static_cast<double>(positions) +
         static_cast<double>(out_elements);
}

model_desc describe_script(const model_spec& spec, const shape& input, int64_t classes) {
  auto path = spec.get("file", "");
  if (path.empty()) {
    bad("model torchscript needs its file: torchscript:PATH (a scripted nn.Sequential, "
        "torch.jit.script(model).save(PATH))");
  }
  auto bytes = read_file(path);
  auto module = load_module(path, bytes);
  auto top = type_name(module);
  if (top != "Sequential") {
    bad("TorchScript file " + path + " holds a " + top +
        ", not an nn.Sequential: salamander cuts a model between the top-level children "
        "of a Sequential");
  }
  auto children = children_of(module);
  if (children.empty()) {
    bad("TorchScript file " + path + " is an empty nn.Sequential");
  }
  auto file_hash = static_cast<int64_t>(fnv1a(bytes.data(), bytes.size()));
  model_desc d;
  torch::NoGradGuard no_grad;
  module.eval();
  shape in = input;
  std::vector<int64_t> batch_shape = {1};
  batch_shape.insert(batch_shape.end(), input.begin(), input.end());
  auto x = torch::zeros(batch_shape);
  for (size_t i = 0; i < children.size(); ++i) {
    auto& [name, child] = children[i];
    layer_info l;
    l.name = name;
    l.kind = type_name(child);
    l.source = path;
    l.input = in;
    for (const auto& p : child.parameters(/*recurse=*/true)) {
      if (p.scalar_type() != torch::kFloat32) {
        bad("TorchScript file " + path + ": layer " + name + " (" + l.kind + ") holds " +
            std::string(c10::toString(p.scalar_type())) +
            " parameters; salamander trains in float32 (call .float() before scripting)");
      }
      l.params += p.numel();
    }
    try {
      auto y = child.forward({x});
      if (!y.isTensor()) {
        bad("TorchScript file " + path + ": layer " + name + " (" + l.kind +
            ") returns a " + y.tagKind() + ", not a tensor");
      }
      x = y.toTensor();
    } catch (const c10::Error& e) {
      bad("TorchScript file " + path + ": layer " + name + " (" + l.kind +
          ") fails on an input of shape " + to_string(in) + " per sample: " + first_line(e));
    }
    l.output = shape(x.sizes().begin() + 1, x.sizes().end());
    l.param_bytes = l.params * 4;
    l.output_bytes = elements(l.output) * 4;
    l.activation_bytes = (elements(l.input) + elements(l.output)) * 4;
    l.flops = estimate_flops(l.params, l.output);
    l.attrs = {{"child", static_cast<int64_t>(i)}, {"file_hash", file_hash}};
    in = l.output;
    d.layers.push_back(std::move(l));
  }
  if (in != shape{classes}) {
    bad("TorchScript file " + path + " outputs " + to_string(in) + " values per sample, not " +
        std::to_string(classes) + " class scores (give classes=N for another data set)");
  }
  return d;
}

} // namespace

void enable_torchscript() {
  set_torchscript_describer(&describe_script);
}

nn::AnyModule build_script_layer(const layer_info& info) {
  auto module = load_module(info.source, read_file(info.source));
  auto children = children_of(module);
  auto index = static_cast<size_t>(info.attr("child"));
  if (index >= children.size() || children[index].name != info.name) {
    bad("TorchScript file " + info.source + " has changed: layer " + info.name +
        " is no longer its child " + std::to_string(index));
  }
  return nn::AnyModule(script_layer(module, children[index].value));
}

} // namespace salamander::models
