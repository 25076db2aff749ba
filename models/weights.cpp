#include "models/weights.hpp"

#include <cmath>
#include <set>
#include <stdexcept>

namespace salamander::models {

namespace {

std::string state_key(const torch::Tensor& p) {
  // The key LibTorch's own optimizers use (torch/optim/adam.cpp).
  return c10::guts::to_string(p.unsafeGetTensorImpl());
}

torch::Tensor copy_of(const torch::Tensor& t) {
  return t.detach().clone();
}

std::vector<named_tensor> optimizer_slots(const torch::optim::Optimizer& opt,
                                          const std::string& kind,
                                          const std::string& name,
                                          const torch::Tensor& p) {
  std::vector<named_tensor> out;
  auto it = opt.state().find(state_key(p));
  if (it == opt.state().end()) {
    return out; // no step taken yet
  }
  if (kind == "adam") {
    auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
    out.push_back({name + "/step", torch::tensor(s.step(), torch::kInt64)});
    out.push_back({name + "/exp_avg", copy_of(s.exp_avg())});
    out.push_back({name + "/exp_avg_sq", copy_of(s.exp_avg_sq())});
  } else if (kind == "sgd") {
    auto& s = static_cast<const torch::optim::SGDParamState&>(*it->second);
    if (s.momentum_buffer().defined()) {
      out.push_back({name + "/momentum_buffer", copy_of(s.momentum_buffer())});
    }
  }
  return out;
}

const torch::Tensor* find_slot(const layer_weights& lw, const std::string& key) {
  for (auto& nt : lw.optimizer_state) {
    if (nt.name == key) {
      return &nt.tensor;
    }
  }
  return nullptr;
}

void check_same(const std::string& where, const torch::Tensor& have,
                const torch::Tensor& got) {
  if (have.scalar_type() != got.scalar_type()) {
    throw std::invalid_argument(
        where + ": dtype " + std::string(c10::toString(got.scalar_type())) +
        " does not match the model's " + std::string(c10::toString(have.scalar_type())));
  }
  if (have.sizes() != got.sizes()) {
    throw std::invalid_argument(where + ": shape " + to_string(got.sizes().vec()) +
                                " does not match the model's " +
                                to_string(have.sizes().vec()));
  }
}

void check_names(const std::string& where, const std::vector<named_tensor>& got,
                 const torch::OrderedDict<std::string, torch::Tensor>& have) {
  if (got.size() != have.size()) {
    throw std::invalid_argument(where + " has " + std::to_string(got.size()) +
                                " tensors, the model has " + std::to_string(have.size()));
  }
  for (auto& nt : got) {
    auto* t = have.find(nt.name);
    if (!t) {
      throw std::invalid_argument(where + ": the model has no tensor " + nt.name);
    }
    check_same(where + " " + nt.name, *t, nt.tensor);
  }
}

// Why `snap` is not for `model`'s architecture, as specific as we can say:
// the specs that differ, else the first tensor whose shape does not match.
std::string fingerprint_mismatch(const layered_model& model,
                                 const weight_snapshot& snap) {
  const auto& desc = model.desc();
  auto ours = desc.spec.canonical();
  if (snap.model != ours) {
    std::string diff;
    try {
      diff = spec_difference(model_spec::parse(snap.model), desc.spec);
    } catch (const std::invalid_argument&) {
      // a label that is no spec: the two names say enough
    }
    return "weights are for model " + snap.model + ", not " + ours +
           (diff.empty() ? "" : " (" + diff + ")");
  }
  // the same label, another architecture: the label was changed, or the
  // weights were written for another model
  for (auto& lw : snap.layers) {
    if (lw.index < model.begin() || lw.index >= model.end()) {
      continue;
    }
    auto params = model.layer(lw.index).ptr()->named_parameters();
    for (auto& nt : lw.params) {
      auto* t = params.find(nt.name);
      if (!t || t->sizes() != nt.tensor.sizes()) {
        return "weights labelled " + ours + " do not fit " + ours + ": layer " + lw.name +
               "'s " + nt.name + " is " + to_string(nt.tensor.sizes().vec()) +
               " in them, " + (t ? to_string(t->sizes().vec()) : std::string("absent")) +
               " in " + ours + " (fingerprint " + snap.fingerprint + ", " + ours +
               "'s is " + desc.fingerprint + "): their model label is wrong";
      }
    }
  }
  return "weights labelled " + ours + " carry fingerprint " + snap.fingerprint +
         ", but " + ours + "'s is " + desc.fingerprint +
         " (every tensor's shape matches: the fingerprint was changed, or this build "
         "describes " +
         ours + " differently)";
}

} // namespace

int64_t weight_snapshot::bytes() const {
  int64_t n = 0;
  for (auto& l : layers) {
    for (auto* group : {&l.params, &l.buffers, &l.optimizer_state, &l.stashed}) {
      for (auto& nt : *group) {
        n += static_cast<int64_t>(nt.tensor.nbytes());
      }
    }
  }
  return n;
}

std::unique_ptr<torch::optim::Optimizer>
make_optimizer(const optimizer_config& cfg, std::vector<torch::Tensor> params) {
  if (!(cfg.lr > 0.0)) {
    throw std::invalid_argument("learning rate must be > 0, got " +
                                std::to_string(cfg.lr));
  }
  if (cfg.kind == "adam") {
    return std::make_unique<torch::optim::Adam>(
        std::move(params),
        torch::optim::AdamOptions(cfg.lr).weight_decay(cfg.weight_decay));
  }
  if (cfg.kind == "sgd") {
    return std::make_unique<torch::optim::SGD>(std::move(params),
                                               torch::optim::SGDOptions(cfg.lr)
                                                   .momentum(cfg.momentum)
                                                   .weight_decay(cfg.weight_decay));
  }
  throw std::invalid_argument("unknown optimizer '" + cfg.kind + "'; use adam or sgd");
}

double warmup_lr(double lr, uint64_t batch, uint64_t warmup) {
  if (warmup == 0 || batch + 1 >= warmup) {
    return lr;
  }
  return lr * static_cast<double>(batch + 1) / static_cast<double>(warmup);
}

void set_lr(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) {
    group.options().set_lr(lr);
  }
}

void predict_weights(const torch::optim::Optimizer& opt, const std::string& kind,
                     const torch::Tensor& p, double steps, torch::Tensor& out) {
  torch::NoGradGuard no_grad;
  out.copy_(p);
  auto it = opt.state().find(state_key(p));
  if (it == opt.state().end() || steps <= 0) {
    return; // no step taken yet: no direction
  }
  auto& group = opt.param_groups().at(0).options();
  if (kind == "adam") {
    auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
    auto& o = static_cast<const torch::optim::AdamOptions&>(group);
    auto t = static_cast<double>(s.step());
    auto bias1 = 1 - std::pow(std::get<0>(o.betas()), t);
    auto bias2 = 1 - std::pow(std::get<1>(o.betas()), t);
    auto denom = (s.exp_avg_sq().sqrt() / std::sqrt(bias2)).add_(o.eps());
    out.addcdiv_(s.exp_avg(), denom, -steps * o.lr() / bias1);
  } else if (kind == "sgd") {
    auto& s = static_cast<const torch::optim::SGDParamState&>(*it->second);
    if (s.momentum_buffer().defined()) {
      auto& o = static_cast<const torch::optim::SGDOptions&>(group);
      out.add_(s.momentum_buffer(), -steps * o.lr());
    }
  }
}

weight_snapshot capture(const layered_model& model, size_t b, size_t e,
                        const torch::optim::Optimizer* opt, const std::string& opt_kind,
                        uint64_t version) {
  weight_snapshot snap;
  snap.fingerprint = model.desc().fingerprint;
  snap.model = model.desc().spec.canonical();
  snap.version = version;
  snap.optimizer = opt ? opt_kind : "";
  torch::NoGradGuard no_grad;
  for (size_t i = b; i < e; ++i) {
    auto module = model.layer(i).ptr();
    layer_weights lw;
    lw.index = static_cast<uint32_t>(i);
    lw.name = model.desc().layers[i].name;
    for (auto& p : module->named_parameters()) {
      lw.params.push_back({p.key(), copy_of(p.value())});
      if (opt) {
        auto slots = optimizer_slots(*opt, opt_kind, p.key(), p.value());
        lw.optimizer_state.insert(lw.optimizer_state.end(), slots.begin(), slots.end());
      }
    }
    for (auto& buf : module->named_buffers()) {
      lw.buffers.push_back({buf.key(), copy_of(buf.value())});
    }
    snap.layers.push_back(std::move(lw));
  }
  return snap;
}

weight_snapshot capture(const layered_model& model, const torch::optim::Optimizer* opt,
                        const std::string& opt_kind, uint64_t version) {
  return capture(model, model.begin(), model.end(), opt, opt_kind, version);
}

// Entries from this index on are not layers but what a job keeps beside
// them in one snapshot (split learning's tagged entries: masks, per-client
// models, counters; actors/split/split_client.hpp): restore passes over them,
// so `eval --load` reads a split job's checkpoint.
constexpr uint32_t extra_entries = 1u << 24;

void restore(layered_model& model, torch::optim::Optimizer* opt,
             const weight_snapshot& snap) {
  const auto& desc = model.desc();
  if (snap.fingerprint != desc.fingerprint) {
    throw std::invalid_argument(fingerprint_mismatch(model, snap));
  }
  // Validate everything first: a failed restore must leave the model as it was.
  if (opt && !snap.optimizer.empty()) {
    bool fits = (snap.optimizer == "adam" && dynamic_cast<torch::optim::Adam*>(opt)) ||
                (snap.optimizer == "sgd" && dynamic_cast<torch::optim::SGD*>(opt));
    if (!fits) {
      throw std::invalid_argument("snapshot holds " + snap.optimizer +
                                  " optimizer state, which does not fit this optimizer");
    }
  }
  std::set<uint32_t> seen;
  for (auto& lw : snap.layers) {
    if (lw.index >= extra_entries) {
      continue;
    }
    if (lw.index >= desc.layers.size() || desc.layers[lw.index].name != lw.name) {
      throw std::invalid_argument("snapshot layer " + std::to_string(lw.index) + " '" +
                                  lw.name + "' is not a layer of " +
                                  desc.spec.canonical());
    }
    if (!seen.insert(lw.index).second) {
      throw std::invalid_argument("snapshot holds layer " + lw.name + " twice");
    }
    if (lw.index < model.begin() || lw.index >= model.end()) {
      continue;
    }
    auto module = model.layer(lw.index).ptr();
    check_names("layer " + lw.name + " parameters", lw.params,
                module->named_parameters());
    check_names("layer " + lw.name + " buffers", lw.buffers, module->named_buffers());
    if (opt && !lw.optimizer_state.empty() && snap.optimizer.empty()) {
      throw std::invalid_argument("snapshot has optimizer state of no named kind");
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& lw : snap.layers) {
    if (lw.index >= extra_entries || lw.index < model.begin() || lw.index >= model.end()) {
      continue;
    }
    auto module = model.layer(lw.index).ptr();
    auto params = module->named_parameters();
    for (auto& nt : lw.params) {
      params[nt.name].copy_(nt.tensor);
    }
    auto buffers = module->named_buffers();
    for (auto& nt : lw.buffers) {
      buffers[nt.name].copy_(nt.tensor);
    }
    if (!opt) {
      continue;
    }
    for (auto& p : params) {
      auto key = state_key(p.value());
      opt->state().erase(key);
      if (snap.optimizer == "adam") {
        auto* step = find_slot(lw, p.key() + "/step");
        auto* m = find_slot(lw, p.key() + "/exp_avg");
        auto* v = find_slot(lw, p.key() + "/exp_avg_sq");
        if (step && m && v) {
          auto s = std::make_unique<torch::optim::AdamParamState>();
          s->step(step->item<int64_t>());
          s->exp_avg(m->clone());
          s->exp_avg_sq(v->clone());
          opt->state()[key] = std::move(s);
        }
      } else if (snap.optimizer == "sgd") {
        if (auto* buf = find_slot(lw, p.key() + "/momentum_buffer")) {
          auto s = std::make_unique<torch::optim::SGDParamState>();
          s->momentum_buffer(buf->clone());
          opt->state()[key] = std::move(s);
        }
      }
    }
  }
}

} // namespace salamander::models
