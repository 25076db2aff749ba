// `salamander describe`: a model's per-layer cost table, without weights.
#include "apps/cli_options.hpp"
#include "apps/commands.hpp"
#include "models/model_desc.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <nlohmann/json.hpp>

namespace salamander::apps {

std::string describe_json(const models::model_desc& desc) {
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (auto& l : desc.layers) {
    layers.push_back({{"name", l.name},
                      {"kind", l.kind},
                      {"input", l.input},
                      {"output", l.output},
                      {"params", l.params},
                      {"flops", l.flops},
                      {"attrs", l.attrs}});
  }
  nlohmann::ordered_json out = {{"model", desc.spec.canonical()},
                                {"fingerprint", desc.fingerprint},
                                {"input", desc.input},
                                {"classes", desc.classes},
                                {"layers", std::move(layers)}};
  return out.dump(1) + "\n";
}

namespace {

struct describe_cli {
  std::string model = "cnn";
  bool json = false; ///< the description as JSON (what deploy/pytorch reads)
};

int run_describe(const describe_cli& cli) {
  auto desc = models::describe(models::model_spec::parse(cli.model));
  if (cli.json) {
    fmt::print("{}", describe_json(desc));
    return 0;
  }
  fmt::print("model {}  input {}  classes {}  fingerprint {}\n", desc.spec.canonical(),
             models::to_string(desc.input), desc.classes, desc.fingerprint);
  size_t name_w = 10, kind_w = 10; // wider for longer names (block12_attn)
  for (auto& l : desc.layers) {
    name_w = std::max(name_w, l.name.size());
    kind_w = std::max(kind_w, l.kind.size());
  }
  fmt::print("{:>3}  {:<{}} {:<{}} {:>14} {:>12} {:>12} {:>14} {:>12}\n", "#", "layer", name_w,
             "kind", kind_w, "output", "params", "param MB", "act KB/sample", "MFLOP/sample");
  for (size_t i = 0; i < desc.layers.size(); ++i) {
    auto& l = desc.layers[i];
    fmt::print("{:>3}  {:<{}} {:<{}} {:>14} {:>12} {:>12.2f} {:>14.1f} {:>12.2f}\n", i, l.name,
               name_w, l.kind, kind_w, models::to_string(l.output), l.params,
               l.param_bytes / 1e6, l.activation_bytes / 1e3, l.flops / 1e6);
  }
  fmt::print("total: {} parameters ({:.1f} MB float32), {:.1f} MFLOP forward per sample\n",
             desc.total_params(), desc.total_params() * 4 / 1e6, desc.total_flops() / 1e6);
  return 0;
}

} // namespace

command add_describe(CLI::App& app) {
  auto cli = std::make_shared<describe_cli>();
  auto* sub = app.add_subcommand(
      "describe",
      "print a model's per-layer parameters, activations and FLOPs (no weights "
      "are allocated, so ViT-Huge works too)");
  sub->add_option("model", cli->model, model_help)->capture_default_str();
  sub->add_flag("--json", cli->json,
                "print the description as JSON: every layer's name, kind, shapes, costs "
                "and hyper-parameters (deploy/pytorch/salamander_torch.py builds the "
                "equivalent torch.nn module from it)");
  return {sub, [cli] { return run_describe(*cli); }};
}

} // namespace salamander::apps
