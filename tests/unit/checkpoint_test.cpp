#include "../support.hpp"

#include "messages/checkpoint.hpp"
#include "models/trainer.hpp"

#include <cstring>
#include <fstream>
#include <zlib.h>

using namespace salamander;
using messages::codec_error;
using salamander::testing::temp_dir;

namespace {

struct trained {
  models::layered_model model;
  std::unique_ptr<torch::optim::Optimizer> opt;
};

trained train_a_little(const std::string& spec, int steps) {
  trained t{models::layered_model(models::describe(models::model_spec::parse(spec)), 5),
            {}};
  t.opt = models::make_optimizer({}, t.model.all()->parameters());
  auto data =
      models::make_synthetic(3, 256, t.model.desc().input, t.model.desc().classes);
  models::range_executor e(t.model.all(), true, true);
  for (int i = 0; i < steps; ++i) {
    models::train_step(e, *t.opt, models::get_batch(data, 1, 0, i, 32), 2);
  }
  return t;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

} // namespace

TEST_CASE("a restored checkpoint continues training exactly like the original",
          "[unit][checkpoint][weights]") {
  temp_dir dir;
  auto a = train_a_little("resnet:width=4,blocks=1", 3);
  messages::checkpoint ckpt;
  ckpt.snapshot = models::capture(a.model, a.opt.get(), "adam", 3);
  ckpt.seed = 1;
  ckpt.epoch = 0;
  ckpt.batches_in_epoch = 3;
  ckpt.note = "test";
  messages::save_checkpoint(dir.file("a.ckpt"), ckpt);
  CHECK(!std::filesystem::exists(dir.file(".a.ckpt.tmp")));

  auto loaded = messages::load_checkpoint(dir.file("a.ckpt"), a.model.desc().fingerprint);
  CHECK(loaded.snapshot.version == 3);
  CHECK(loaded.batches_in_epoch == 3);
  CHECK(loaded.note == "test");

  models::layered_model b(a.model.desc(), 99); // different initial weights
  auto opt_b = models::make_optimizer({}, b.all()->parameters());
  models::restore(b, opt_b.get(), loaded.snapshot);

  // one more identical step on both must give identical weights (BatchNorm
  // buffers and Adam moments included)
  auto data = models::make_synthetic(3, 256, b.desc().input, b.desc().classes);
  auto batch = models::get_batch(data, 1, 0, 3, 32);
  models::range_executor ea(a.model.all(), true, true), eb(b.all(), true, true);
  models::train_step(ea, *a.opt, batch, 2);
  models::train_step(eb, *opt_b, batch, 2);
  auto pa = a.model.all()->named_parameters();
  auto pb = b.all()->named_parameters();
  for (auto& p : pa) {
    CHECK(torch::equal(p.value(), pb[p.key()]));
  }
  auto ba = a.model.all()->named_buffers();
  auto bb = b.all()->named_buffers();
  for (auto& p : ba) {
    CHECK(torch::equal(p.value(), bb[p.key()]));
  }
}

TEST_CASE("damaged checkpoint files are rejected with the reason", "[unit][checkpoint]") {
  temp_dir dir;
  auto a = train_a_little("mlp", 1);
  messages::checkpoint ckpt;
  ckpt.snapshot = models::capture(a.model, a.opt.get(), "adam", 1);
  auto path = dir.file("c.ckpt");
  messages::save_checkpoint(path, ckpt);
  auto good = read_all(path);

  CHECK_THROWS_WITH(messages::load_checkpoint(dir.file("missing.ckpt")),
                    Catch::Contains("cannot read checkpoint") &&
                        Catch::Contains("missing.ckpt"));

  write_all(path, good.substr(0, 20));
  CHECK_THROWS_WITH(messages::load_checkpoint(path),
                    Catch::Contains("shorter than the header"));

  for (size_t keep : {size_t{32}, good.size() / 2, good.size() - 8}) {
    write_all(path, good.substr(0, keep));
    CHECK_THROWS_WITH(messages::load_checkpoint(path), Catch::Contains("truncated"));
  }

  write_all(path, good + "extra");
  CHECK_THROWS_WITH(messages::load_checkpoint(path), Catch::Contains("trailing data"));

  auto bad_magic = good;
  bad_magic[0] = 'X';
  write_all(path, bad_magic);
  CHECK_THROWS_WITH(messages::load_checkpoint(path), Catch::Contains("bad magic"));

  auto newer = good;
  newer[8] = 2;
  write_all(path, newer);
  CHECK_THROWS_WITH(messages::load_checkpoint(path), Catch::Contains("format 2"));

  for (size_t at : {size_t{40}, good.size() / 2, good.size() - 1}) {
    auto flipped = good;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x5a);
    write_all(path, flipped);
    CHECK_THROWS_WITH(messages::load_checkpoint(path), Catch::Contains("checksum"));
  }

  write_all(path, good);
  CHECK_THROWS_WITH(messages::load_checkpoint(path, "", 64), Catch::Contains("limit"));
  CHECK_THROWS_WITH(messages::load_checkpoint(path, "ffffffffffffffff"),
                    Catch::Contains("fingerprint"));
  CHECK_NOTHROW(messages::load_checkpoint(path, a.model.desc().fingerprint));
}

TEST_CASE("a damaged length field is called corrupt, not truncated",
          "[unit][checkpoint]") {
  temp_dir dir;
  auto a = train_a_little("mlp", 1);
  messages::checkpoint ckpt;
  ckpt.snapshot = models::capture(a.model, a.opt.get(), "adam", 1);
  auto path = dir.file("c.ckpt");
  messages::save_checkpoint(path, ckpt);
  auto good = read_all(path);
  // bytes 16..23 hold the body length: a low bit (a few bytes off) and a
  // high one (terabytes) flipped
  for (size_t at : {size_t{16}, size_t{21}}) {
    auto flipped = good;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    write_all(path, flipped);
    CHECK_THROWS_WITH(messages::load_checkpoint(path),
                      Catch::Contains(path) && Catch::Contains("is corrupt") &&
                          Catch::Contains("length field is damaged") &&
                          !Catch::Contains("truncated"));
  }
  // a cut file is still truncated, and appended bytes still trailing data
  write_all(path, good.substr(0, good.size() - 16));
  CHECK_THROWS_WITH(messages::load_checkpoint(path), Catch::Contains("truncated"));
  write_all(path, good + std::string(8, '\0'));
  CHECK_THROWS_WITH(messages::load_checkpoint(path),
                    Catch::Contains("8 bytes of trailing data"));
}

TEST_CASE("a body that passes its checksum but is not a checkpoint is rejected",
          "[unit][checkpoint]") {
  // A writer bug, not disk damage: the CRC is right, the content is not.
  auto good = messages::serialize_checkpoint({});
  auto forged = good.substr(0, 32) + std::string(64, '\x7f');
  std::memcpy(&forged[16], "\x40\0\0\0\0\0\0\0", 8);
  uint32_t c = static_cast<uint32_t>(crc32(
      crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(forged.data() + 32), 64));
  std::memcpy(&forged[24], &c, 4);
  CHECK_THROWS_AS(messages::parse_checkpoint(forged, "forged"), codec_error);
}

TEST_CASE("weights that do not fit are refused and nothing changes", "[unit][weights]") {
  auto a = train_a_little("cnn", 1);
  auto snap = models::capture(a.model, a.opt.get(), "adam", 1);
  models::layered_model b(a.model.desc(), 42);
  auto before = b.all()->parameters()[0].clone();

  auto wrong_shape = snap;
  wrong_shape.layers[1].params[0].tensor = torch::zeros({3});
  CHECK_THROWS_WITH(models::restore(b, nullptr, wrong_shape), Catch::Contains("shape"));

  auto wrong_dtype = snap;
  wrong_dtype.layers[2].params[0].tensor =
      wrong_dtype.layers[2].params[0].tensor.to(torch::kFloat64);
  CHECK_THROWS_WITH(models::restore(b, nullptr, wrong_dtype), Catch::Contains("dtype"));

  auto wrong_name = snap;
  wrong_name.layers[3].params[0].name = "nope";
  CHECK_THROWS_WITH(models::restore(b, nullptr, wrong_name), Catch::Contains("nope"));

  auto wrong_model = snap;
  wrong_model.fingerprint = "0000000000000000";
  CHECK_THROWS_WITH(models::restore(b, nullptr, wrong_model),
                    Catch::Contains("fingerprint"));

  auto sgd = models::make_optimizer({"sgd", 0.1, 0.9, 0.0}, b.all()->parameters());
  CHECK_THROWS_WITH(models::restore(b, sgd.get(), snap), Catch::Contains("does not fit"));

  // The first layers of `wrong_shape` were valid, yet nothing was written.
  CHECK(torch::equal(b.all()->parameters()[0], before));
}

TEST_CASE("weights of another model say which spec, option or tensor differs",
          "[unit][weights]") {
  auto a = train_a_little("mlp:hidden=64", 1);
  auto snap = models::capture(a.model, a.opt.get(), "adam", 1);
  models::layered_model wider(
      models::describe(models::model_spec::parse("mlp:hidden=128")), 1);
  CHECK_THROWS_WITH(models::restore(wider, nullptr, snap),
                    Catch::Contains("for model mlp:hidden=64, not mlp:hidden=128") &&
                        Catch::Contains("hidden=64 vs hidden=128"));
  models::layered_model plain(models::describe(models::model_spec::parse("mlp")), 1);
  CHECK_THROWS_WITH(models::restore(plain, nullptr, snap),
                    Catch::Contains("hidden=64 vs hidden not given (its default)"));
  // relabelled: the label says mlp:hidden=128, the tensors are hidden=64's
  auto relabelled = snap;
  relabelled.model = "mlp:hidden=128";
  CHECK_THROWS_WITH(
      models::restore(wider, nullptr, relabelled),
      Catch::Contains("labelled mlp:hidden=128 do not fit") &&
          Catch::Contains("layer fc1's fc.weight is 64x784 in them, 128x784 in "
                          "mlp:hidden=128"));
}
