#include "models/model_desc.hpp"

#include <catch2/catch.hpp>

using namespace salamander::models;

TEST_CASE("model specs parse and print canonically", "[unit][zoo]") {
  auto s = model_spec::parse("vit:size=base,image=224");
  CHECK(s.name == "vit");
  CHECK(s.get("size", "") == "base");
  CHECK(s.get_int("image", 0) == 224);
  CHECK(s.canonical() == "vit:image=224,size=base");
  CHECK(model_spec::parse(s.canonical()).canonical() == s.canonical());
  CHECK(model_spec::parse("cnn").canonical() == "cnn");
}

TEST_CASE("bad model specs are rejected with the bad part named", "[unit][zoo]") {
  CHECK_THROWS_WITH(model_spec::parse(":a=1"), Catch::Contains("no model name"));
  CHECK_THROWS_WITH(model_spec::parse("cnn:c1"), Catch::Contains("'c1'"));
  CHECK_THROWS_WITH(describe(model_spec::parse("lstm")), Catch::Contains("unknown model 'lstm'"));
  CHECK_THROWS_WITH(describe(model_spec::parse("cnn:width=3")), Catch::Contains("'width'"));
  CHECK_THROWS_WITH(describe(model_spec::parse("cnn:c1=x")), Catch::Contains("c1=x"));
  CHECK_THROWS_WITH(describe(model_spec::parse("mlp:hidden=0")), Catch::Contains("positive"));
  CHECK_THROWS_WITH(describe(model_spec::parse("vit:size=giant")), Catch::Contains("giant"));
  CHECK_THROWS_WITH(describe(model_spec::parse("vit:patch=5")), Catch::Contains("patch=5"));
}

TEST_CASE("shapes chain from layer to layer", "[unit][zoo]") {
  for (auto name : zoo_names()) {
    auto d = describe(model_spec::parse(name));
    REQUIRE(!d.layers.empty());
    CHECK(d.layers.front().input == d.input);
    for (size_t i = 1; i < d.layers.size(); ++i) {
      CHECK(d.layers[i].input == d.layers[i - 1].output);
    }
    CHECK(d.layers.back().output == shape{d.classes});
    for (auto& l : d.layers) {
      CHECK(l.params > 0);
      CHECK(l.param_bytes == 4 * l.params);
      CHECK(l.output_bytes == 4 * elements(l.output));
      CHECK(l.activation_bytes >= l.output_bytes);
      CHECK(l.flops > 0);
    }
  }
}

TEST_CASE("ViT configurations match the published parameter counts", "[unit][zoo]") {
  // Dosovitskiy et al. 2021, table 1: ViT-B 86M, ViT-L 307M, ViT-H 632M
  // (ImageNet head, 224x224 input, patch 16; ViT-H counted at patch 14).
  auto count = [](const std::string& size, int patch) {
    return static_cast<double>(
        describe(model_spec::parse("vit:size=" + size + ",image=224,channels=3,classes=1000,patch=" +
                                   std::to_string(patch)))
            .total_params());
  };
  CHECK(count("base", 16) == Approx(86.6e6).epsilon(0.01));
  CHECK(count("large", 16) == Approx(304.3e6).epsilon(0.01));
  CHECK(count("huge", 14) == Approx(632e6).epsilon(0.01));
  CHECK(count("tiny", 16) == Approx(5.7e6).epsilon(0.01));
  CHECK(count("small", 16) == Approx(22.1e6).epsilon(0.01));
  auto huge = describe(model_spec::parse("vit:size=huge,image=224,channels=3,classes=1000"));
  CHECK(huge.layers.size() == 34); // embed + 32 blocks + head
  CHECK(huge.total_flops() > 1e11);
}

TEST_CASE("fingerprints identify architecture and options", "[unit][zoo]") {
  auto a = describe(model_spec::parse("cnn"));
  CHECK(a.fingerprint.size() == 16);
  CHECK(a.fingerprint == describe(model_spec::parse("cnn")).fingerprint);
  CHECK(a.fingerprint != describe(model_spec::parse("cnn:c1=8")).fingerprint);
  CHECK(a.fingerprint != describe(model_spec::parse("mlp")).fingerprint);
  CHECK(a.index_of("fc1") == 2);
  CHECK_THROWS_AS(a.index_of("nope"), std::invalid_argument);
}
