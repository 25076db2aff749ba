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

TEST_CASE("torchscript:PATH names its file, made absolute for every process",
          "[unit][zoo]") {
  auto s = model_spec::parse("torchscript:/models/seq.pt,classes=5");
  CHECK(s.get("file", "") == "/models/seq.pt");
  CHECK(s.get_int("classes", 0) == 5);
  CHECK(s.canonical() == "torchscript:classes=5,file=/models/seq.pt");
  CHECK(model_spec::parse(s.canonical()).canonical() == s.canonical());
  auto rel = model_spec::parse("torchscript:sub/../seq.pt");
  CHECK(rel.get("file", "").front() == '/');
  CHECK(rel.get("file", "").find("..") == std::string::npos);
  // only torchscript takes a bare first option
  CHECK_THROWS_WITH(model_spec::parse("cnn:seq.pt"), Catch::Contains("not key=value"));
  // this test program never enabled TorchScript (it has no LibTorch)
  CHECK_THROWS_WITH(describe(model_spec::parse("torchscript:/x.pt")),
                    Catch::Contains("cannot load TorchScript files"));
}

TEST_CASE("bad model specs are rejected with the bad part named", "[unit][zoo]") {
  CHECK_THROWS_WITH(model_spec::parse(":a=1"), Catch::Contains("no model name"));
  CHECK_THROWS_WITH(model_spec::parse("cnn:c1"), Catch::Contains("'c1'"));
  CHECK_THROWS_WITH(describe(model_spec::parse("lstm")),
                    Catch::Contains("unknown model 'lstm'"));
  CHECK_THROWS_WITH(describe(model_spec::parse("cnn:width=3")),
                    Catch::Contains("'width'"));
  CHECK_THROWS_WITH(describe(model_spec::parse("cnn:c1=x")), Catch::Contains("c1=x"));
  CHECK_THROWS_WITH(describe(model_spec::parse("mlp:hidden=0")),
                    Catch::Contains("positive"));
  CHECK_THROWS_WITH(describe(model_spec::parse("mlp:hidden=1000000000")),
                    Catch::Contains("hidden=1000000000 is too large (at most 1048576)"));
  CHECK_THROWS_WITH(describe(model_spec::parse("cnn:image=-3")),
                    Catch::Contains("image=-3 must be positive"));
  CHECK_THROWS_WITH(describe(model_spec::parse("vit:size=giant")),
                    Catch::Contains("giant"));
  CHECK_THROWS_WITH(describe(model_spec::parse("vit:patch=5")),
                    Catch::Contains("patch=5"));
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
        describe(model_spec::parse(
                     "vit:size=" + size +
                     ",image=224,channels=3,classes=1000,patch=" + std::to_string(patch)))
            .total_params());
  };
  CHECK(count("base", 16) == Approx(86.6e6).epsilon(0.01));
  CHECK(count("large", 16) == Approx(304.3e6).epsilon(0.01));
  CHECK(count("huge", 14) == Approx(632e6).epsilon(0.01));
  CHECK(count("tiny", 16) == Approx(5.7e6).epsilon(0.01));
  CHECK(count("small", 16) == Approx(22.1e6).epsilon(0.01));
  auto huge =
      describe(model_spec::parse("vit:size=huge,image=224,channels=3,classes=1000"));
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

TEST_CASE("an image too small for a model's layers is refused, naming the option",
          "[unit][zoo]") {
  // cnn pools twice: 1 -> 0 would leave conv1 with an 8x0x0 output
  CHECK_THROWS_WITH(describe(model_spec::parse("cnn:image=1")),
                    Catch::Contains("image=1 is too small") && Catch::Contains("conv1") &&
                        Catch::Contains("8x0x0") && Catch::Contains("image=4 or more"));
  CHECK_THROWS_WITH(describe(model_spec::parse("cnn:image=3")), Catch::Contains("conv2"));
  CHECK(describe(model_spec::parse("cnn:image=4")).layers[1].output == shape{16, 1, 1});
  CHECK_THROWS_WITH(describe(model_spec::parse("vit:image=30")),
                    Catch::Contains("image=30 is not a multiple of patch=7"));
  // resnet's strided blocks round up: any image works
  CHECK_NOTHROW(describe(model_spec::parse("resnet:image=1")));
}

TEST_CASE("training memory is estimated from the description, without weights",
          "[unit][zoo]") {
  auto mlp = describe(model_spec::parse("mlp"));
  // 784*256+256 + 256*256+256 + 256*10+10 parameters of 4 bytes
  double weights = 4.0 * 269322;
  REQUIRE(mlp.total_params() == 269322);
  auto adam = training_memory(mlp, "adam", 64);
  CHECK(adam.weights == weights);
  CHECK(adam.gradients == weights);
  CHECK(adam.optimizer == 2 * weights);
  double per_sample = 0;
  for (auto& l : mlp.layers) {
    per_sample += static_cast<double>(l.activation_bytes);
  }
  CHECK(adam.activations == 64 * per_sample);
  CHECK(training_memory(mlp, "sgd", 64).optimizer == weights);
  CHECK(adam.describe().find("adam state 2.2 MB") != std::string::npos);
  // 100000 blocks per group: 9.7 G parameters, described in a moment
  auto deep = describe(model_spec::parse("resnet:blocks=100000"));
  CHECK(training_memory(deep, "adam", 1).weights > 38e9);
}

TEST_CASE("byte counts read as KB, MB, GB and TB", "[unit][zoo]") {
  CHECK(format_bytes(999) == "999 bytes");
  CHECK(format_bytes(812e3) == "812 KB");
  CHECK(format_bytes(512e6) == "512 MB");
  CHECK(format_bytes(38.9e9) == "38.9 GB");
  CHECK(format_bytes(3.1e12) == "3.1 TB");
}
