// One epoch of the CNN on Fashion-MNIST through the layered-model path must
// reach 85% test accuracy, and a checkpoint must reproduce it exactly.
#include "../support.hpp"

#include "messages/checkpoint.hpp"
#include "models/trainer.hpp"

using namespace salamander;

TEST_CASE("one epoch of the CNN reaches 85% on Fashion-MNIST and survives a checkpoint",
          "[integration][train]") {
  torch::set_num_threads(1);
  models::layered_model model(models::describe(models::model_spec::parse("cnn")), 1);
  auto train = models::load_fashion_mnist(true);
  auto test = models::load_fashion_mnist(false);
  models::range_executor exec(model.all(), true, true);
  auto opt = models::make_optimizer({"adam", 2e-3, 0.0, 0.0}, model.all()->parameters());
  models::train_options opts;
  auto stats = models::train_epoch(exec, *opt, train, 0, opts);
  CHECK(stats.batches == 938);
  auto net = model.all();
  auto result = models::evaluate(net, test);
  CHECK(result.samples == 10000);
  CHECK(result.accuracy() >= 0.85);

  testing::temp_dir dir;
  messages::checkpoint ckpt;
  ckpt.snapshot = models::capture(model, opt.get(), "adam", 938);
  messages::save_checkpoint(dir.file("cnn.ckpt"), ckpt);
  auto loaded = messages::load_checkpoint(dir.file("cnn.ckpt"));
  models::layered_model fresh(models::describe(models::model_spec::parse(loaded.snapshot.model)));
  models::restore(fresh, nullptr, loaded.snapshot);
  auto fresh_net = fresh.all();
  auto again = models::evaluate(fresh_net, test);
  CHECK(again.correct == result.correct);
}
