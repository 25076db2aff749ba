// Training the CNN through a 4-stage pipeline reaches the accuracy of
// single-device training on Fashion-MNIST.
#include "../support.hpp"

#include "actors/cluster/cluster_file.hpp"
#include "actors/train/train_job.hpp"
#include "actors/node/system.hpp"
#include "models/trainer.hpp"

using namespace salamander;

TEST_CASE("a 4-stage pipeline reaches single-device accuracy on Fashion-MNIST",
          "[integration][pipeline]") {
  torch::set_num_threads(1);
  auto train = std::make_shared<models::dataset>(models::load_fashion_mnist(true));
  auto test = std::make_shared<models::dataset>(models::load_fashion_mnist(false));

  actors::job_config jc; // defaults: cnn, batch 64, 4 micro-batches, 1f1b, adam 2e-3
  jc.epochs = 1;
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto result = actors::run_job(sys, jc, actors::local_nodes(sys, 4, 1), train, test);
  REQUIRE(result.status.phase == status_phase::finished);

  models::layered_model m(models::describe(models::model_spec::parse(jc.model)), jc.seed);
  models::range_executor exec(m.all(), true, true);
  auto opt = models::make_optimizer({jc.optimizer, jc.lr, jc.momentum, 0.0}, m.all()->parameters());
  models::train_options opts;
  opts.seed = jc.seed;
  opts.batch_size = jc.batch_size;
  models::train_epoch(exec, *opt, *train, 0, opts);
  auto net = m.all();
  auto single = models::evaluate(net, *test).accuracy();

  CHECK(result.status.test_accuracy >= 0.85);
  CHECK(std::abs(result.status.test_accuracy - single) <= 0.01);
}
