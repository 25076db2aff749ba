#include "actors/federated/width.hpp"

#include <stdexcept>

namespace salamander::actors {

namespace {

bool width_kind(const std::string& kind) { return kind == "dense" || kind == "conv"; }

// The layer's output units (channels or neurons).
int64_t units_of(const models::layer_info& l) {
  return l.kind == "conv" ? l.attr("out_ch") : l.attr("out");
}

} // namespace

fed::model_layout width_layout(const models::model_desc& desc) {
  fed::model_layout layout;
  for (size_t i = 0; i < desc.layers.size(); ++i) {
    const auto& l = desc.layers[i];
    if (!width_kind(l.kind)) {
      throw std::invalid_argument(
          "federated learning slices dense and conv layers (models mlp and cnn); layer " +
          l.name + " of " + desc.spec.canonical() + " is a " + l.kind + " layer");
    }
    bool last = i + 1 == desc.layers.size();
    layout.layers.push_back({l.name, units_of(l), !last});
    int in_layer = i == 0 ? -1 : static_cast<int>(i - 1);
    auto out_layer = static_cast<int>(i);
    if (l.kind == "conv") {
      int64_t k = l.attr("kernel");
      layout.params.push_back({l.name + ".conv.weight",
                               {l.attr("out_ch"), l.attr("in_ch"), k, k},
                               out_layer,
                               in_layer,
                               1});
      layout.params.push_back({l.name + ".conv.bias", {l.attr("out_ch")}, out_layer, -1, 1});
    } else {
      // a dense layer after a conv one reads C x H x W: H*W values per unit
      int64_t spatial = 1;
      if (i > 0 && desc.layers[i - 1].kind == "conv") {
        const auto& out = desc.layers[i - 1].output;
        spatial = out[1] * out[2];
      }
      layout.params.push_back(
          {l.name + ".fc.weight", {l.attr("out"), l.attr("in")}, out_layer, in_layer, spatial});
      layout.params.push_back({l.name + ".fc.bias", {l.attr("out")}, out_layer, -1, 1});
    }
  }
  return layout;
}

models::model_desc sub_desc(const models::model_desc& desc, const fed::unit_sets& kept) {
  auto layout = width_layout(desc);
  bool whole = true;
  for (size_t i = 0; i < kept.size() && i < layout.layers.size(); ++i) {
    whole = whole && static_cast<int64_t>(kept[i].size()) == layout.layers[i].units;
  }
  if (kept.empty() || (whole && kept.size() == layout.layers.size())) {
    return desc; // the whole model is the model
  }
  if (kept.size() != desc.layers.size()) {
    throw std::invalid_argument("a sub-model of " + desc.spec.canonical() + " needs " +
                                std::to_string(desc.layers.size()) + " unit sets, got " +
                                std::to_string(kept.size()));
  }
  models::model_desc sub = desc;
  std::string widths;
  models::shape cur = desc.input;
  for (size_t i = 0; i < sub.layers.size(); ++i) {
    auto& l = sub.layers[i];
    auto units = static_cast<int64_t>(kept[i].size());
    l.input = cur;
    if (l.kind == "conv") {
      l.attrs["in_ch"] = cur[0];
      l.attrs["out_ch"] = units;
      l.output[0] = units;
    } else {
      l.attrs["in"] = models::elements(cur);
      l.attrs["out"] = units;
      l.output = {units};
    }
    cur = l.output;
    widths += (i ? "," : "") + std::to_string(units);
  }
  sub.fingerprint = desc.fingerprint + "/w" + widths;
  return sub;
}

fed::flat_params to_flat(const models::weight_snapshot& snap, const fed::model_layout& layout) {
  fed::flat_params out;
  out.reserve(layout.params.size());
  for (const auto& p : layout.params) {
    const torch::Tensor* found = nullptr;
    for (const auto& l : snap.layers) {
      for (const auto& t : l.params) {
        if (l.name + "." + t.name == p.name) {
          found = &t.tensor;
        }
      }
    }
    if (!found) {
      throw std::invalid_argument("the weights hold no parameter " + p.name);
    }
    auto c = found->to(torch::kFloat32).contiguous();
    const float* data = c.data_ptr<float>();
    out.emplace_back(data, data + c.numel());
  }
  return out;
}

models::weight_snapshot to_snapshot(const fed::flat_params& values,
                                    const fed::model_layout& layout,
                                    const models::model_desc& sub, uint64_t version) {
  if (values.size() != layout.params.size()) {
    throw std::invalid_argument("expected " + std::to_string(layout.params.size()) +
                                " parameters, got " + std::to_string(values.size()));
  }
  models::weight_snapshot snap;
  snap.fingerprint = sub.fingerprint;
  snap.model = sub.spec.canonical();
  snap.version = version;
  // the sub-model's own parameter shapes, in layout order (two per layer)
  for (size_t i = 0; i < sub.layers.size(); ++i) {
    const auto& l = sub.layers[i];
    models::layer_weights lw;
    lw.index = static_cast<uint32_t>(i);
    lw.name = l.name;
    std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
    if (l.kind == "conv") {
      int64_t k = l.attr("kernel");
      shapes = {{"conv.weight", {l.attr("out_ch"), l.attr("in_ch"), k, k}},
                {"conv.bias", {l.attr("out_ch")}}};
    } else {
      shapes = {{"fc.weight", {l.attr("out"), l.attr("in")}}, {"fc.bias", {l.attr("out")}}};
    }
    for (size_t j = 0; j < shapes.size(); ++j) {
      const auto& v = values[2 * i + j];
      auto t = torch::empty(shapes[j].second, torch::kFloat32);
      if (t.numel() != static_cast<int64_t>(v.size())) {
        throw std::invalid_argument("parameter " + l.name + "." + shapes[j].first + " has " +
                                    std::to_string(v.size()) + " values, its shape " +
                                    std::to_string(t.numel()));
      }
      std::copy(v.begin(), v.end(), t.data_ptr<float>());
      lw.params.push_back({shapes[j].first, t});
    }
    snap.layers.push_back(std::move(lw));
  }
  return snap;
}

void load_params(models::layered_model& model, const models::weight_snapshot& snap) {
  models::restore(model, nullptr, snap);
}

} // namespace salamander::actors
