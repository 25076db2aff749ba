#include "../support.hpp"

#include "models/data.hpp"
#include "models/trainer.hpp"

#include <zlib.h>

#include <cstdlib>
#include <fstream>

using namespace salamander::models;
using salamander::testing::temp_dir;

namespace {

std::string idx_bytes(std::vector<uint32_t> dims, const std::vector<uint8_t>& body) {
  std::string out = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (auto d : dims) {
    for (int s = 24; s >= 0; s -= 8) {
      out.push_back(static_cast<char>((d >> s) & 0xff));
    }
  }
  out.append(body.begin(), body.end());
  return out;
}

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
          static_cast<int>(bytes.size()));
  gzclose(f);
}

} // namespace

TEST_CASE("IDX files are read raw and gzipped", "[unit][data]") {
  temp_dir dir;
  std::vector<uint8_t> body = {1, 2, 3, 4, 5, 6};
  auto bytes = idx_bytes({2, 3}, body);
  write_raw(dir.file("a"), bytes);
  write_gz(dir.file("b.gz"), bytes);
  for (auto name : {"a", "b.gz"}) {
    auto t = read_idx(dir.file(name));
    CHECK(t.sizes() == torch::IntArrayRef({2, 3}));
    CHECK(t[1][2].item<int>() == 6);
  }
}

TEST_CASE("bad IDX files are clear errors", "[unit][data]") {
  temp_dir dir;
  write_raw(dir.file("short"), idx_bytes({2, 3}, {1, 2}));
  CHECK_THROWS_WITH(read_idx(dir.file("short")), Catch::Contains("truncated"));
  write_raw(dir.file("long"), idx_bytes({1}, {1, 2}));
  CHECK_THROWS_WITH(read_idx(dir.file("long")), Catch::Contains("trailing data"));
  write_raw(dir.file("magic"), std::string("\x01\x02\x03\x04", 4));
  CHECK_THROWS_WITH(read_idx(dir.file("magic")), Catch::Contains("magic"));
  write_raw(dir.file("empty"), "");
  CHECK_THROWS_WITH(read_idx(dir.file("empty")), Catch::Contains("no IDX header"));
  write_raw(dir.file("huge"), idx_bytes({65536, 65536}, {}));
  CHECK_THROWS_AS(read_idx(dir.file("huge")), data_error);
  CHECK_THROWS_WITH(read_idx(dir.file("absent")), Catch::Contains("cannot open"));
}

TEST_CASE("missing Fashion-MNIST names the paths searched and the package",
          "[unit][data]") {
  temp_dir dir;
  try {
    load_fashion_mnist(true, dir.path().string());
    FAIL("expected data_error");
  } catch (const data_error& e) {
    std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("dataset-fashion-mnist"));
    CHECK_THAT(msg, Catch::Contains(dir.file("train-images-idx3-ubyte.gz")));
    CHECK_THAT(msg, Catch::Contains(dir.file("train-images-idx3-ubyte")));
  }
}

TEST_CASE("a Fashion-MNIST directory of our own is read", "[unit][data]") {
  temp_dir dir;
  std::vector<uint8_t> pixels(3 * 28 * 28, 255);
  write_gz(dir.file("t10k-images-idx3-ubyte.gz"), idx_bytes({3, 28, 28}, pixels));
  write_raw(dir.file("t10k-labels-idx1-ubyte"), idx_bytes({3}, {0, 9, 4}));
  auto d = load_fashion_mnist(false, dir.path().string());
  CHECK(d.size() == 3);
  CHECK(d.sample_shape() == shape{1, 28, 28});
  CHECK(d.label_vector() == std::vector<int64_t>{0, 9, 4});
  write_raw(dir.file("t10k-labels-idx1-ubyte"), idx_bytes({2}, {0, 9}));
  CHECK_THROWS_WITH(load_fashion_mnist(false, dir.path().string()),
                    Catch::Contains("disagree"));
}

TEST_CASE("Debian's Fashion-MNIST has the expected size and balance", "[unit][data]") {
  auto train = load_fashion_mnist(true);
  auto test = load_fashion_mnist(false);
  CHECK(train.size() == 60000);
  CHECK(test.size() == 10000);
  CHECK(train.sample_shape() == shape{1, 28, 28});
  auto counts = torch::bincount(test.labels);
  CHECK(torch::all(counts == 1000).item<bool>());
  // normalised with the training statistics
  CHECK(train.images.mean().item<double>() == Approx(0.0).margin(0.01));
  CHECK(train.images.std().item<double>() == Approx(1.0).margin(0.01));
}

TEST_CASE("batches are a pure function of seed, epoch and batch id", "[unit][data]") {
  auto d = make_synthetic(4, 500, {3, 4}, 5);
  auto again = make_synthetic(4, 500, {3, 4}, 5);
  CHECK(torch::equal(d.images, again.images));
  CHECK(torch::equal(d.labels, again.labels));
  auto a = get_batch(d, 7, 1, 3, 32);
  auto b = get_batch(d, 7, 1, 3, 32);
  auto other_epoch = get_batch(d, 7, 2, 3, 32);
  CHECK(torch::equal(a.x, b.x));
  CHECK(torch::equal(a.y, b.y));
  CHECK(!torch::equal(a.x, other_epoch.x));
  CHECK(a.x.sizes() == torch::IntArrayRef({32, 3, 4}));
  CHECK(get_batch(d, 7, 1, 15, 32).x.size(0) == 20); // 500 = 15 * 32 + 20
  CHECK_THROWS_AS(get_batch(d, 7, 1, 16, 32), std::out_of_range);
  CHECK_THROWS_AS(make_synthetic(1, 0, {2}, 2), std::invalid_argument);
}

TEST_CASE("the synthetic test split shares the training split's classes",
          "[unit][data]") {
  auto d = describe(model_spec::parse("mlp"));
  auto train = load_dataset("synthetic", true, d);
  auto test = load_dataset("synthetic", false, d);
  CHECK(train.size() == 4096);
  CHECK(test.size() == 1024);
  // nearest class mean from the training split classifies the test split
  auto means = torch::zeros({d.classes, elements(d.input)});
  for (int64_t c = 0; c < d.classes; ++c) {
    means[c] = train.images.index({train.labels == c}).flatten(1).mean(0);
  }
  auto dist = torch::cdist(test.images.flatten(1), means);
  auto acc = dist.argmin(1).eq(test.labels).to(torch::kFloat64).mean().item<double>();
  CHECK(acc > 0.9);
}

TEST_CASE("a model that does not fit Fashion-MNIST is refused before any data is read",
          "[unit][data]") {
  auto fits = [](const std::string& data, const std::string& model) {
    check_fits(data, describe(model_spec::parse(model)));
  };
  CHECK_NOTHROW(fits("fashion-mnist", "cnn"));
  CHECK_THROWS_WITH(fits("fashion-mnist", "cnn:classes=3"),
                    Catch::Contains("3 classes") &&
                        Catch::Contains("Fashion-MNIST has 10") &&
                        Catch::Contains("classes option"));
  CHECK_THROWS_WITH(fits("fashion-mnist", "mlp:image=32"),
                    Catch::Contains("1x32x32") && Catch::Contains("1x28x28") &&
                        Catch::Contains("image and channels options"));
  CHECK_THROWS_AS(fits("fashion-mnist", "mlp:channels=3"), data_error);
  // synthetic data is drawn in the model's shape
  CHECK_NOTHROW(fits("synthetic", "cnn:classes=3,image=32,channels=3"));
  CHECK_THROWS_WITH(fits("cifar", "cnn"), Catch::Contains("unknown data set 'cifar'"));
}

TEST_CASE("evaluation counts each class, and weighs them to a client's labels",
          "[unit][data]") {
  // three classes; a model that always answers class 0
  models::dataset d;
  d.name = "three";
  d.classes = 3;
  d.images = torch::zeros({6, 2});
  d.labels = torch::tensor(std::vector<int64_t>{0, 0, 0, 1, 1, 2}, torch::kInt64);
  torch::nn::Sequential net(torch::nn::Linear(2, 3));
  {
    torch::NoGradGuard no_grad;
    auto* lin = net[0]->as<torch::nn::Linear>();
    lin->weight.zero_();
    lin->bias.copy_(torch::tensor({1.0F, 0.0F, 0.0F}));
  }
  auto s = models::evaluate(net, d, 4); // two batches: counts add up across them
  CHECK(s.samples == 6);
  CHECK(s.correct == 3);
  CHECK(s.class_samples == std::vector<int64_t>{3, 2, 1});
  CHECK(s.class_correct == std::vector<int64_t>{3, 0, 0});
  // a client holding only class 0 sees a perfect model; one holding 1 and 2
  // sees a useless one; the balanced test split, the mean
  CHECK(s.weighted_accuracy({5, 0, 0}) == Approx(1.0));
  CHECK(s.weighted_accuracy({0, 4, 4}) == Approx(0.0));
  CHECK(s.weighted_accuracy({1, 1, 0}) == Approx(0.5));
  // a label the test split lacks carries no weight; no weight at all gives 0
  CHECK(s.weighted_accuracy({1, 0, 0, 7}) == Approx(1.0));
  CHECK(s.weighted_accuracy({}) == 0.0);
}
