#include "apps/preflight.hpp"

#include "models/data.hpp"

#include <stdexcept>
#include <string>

namespace salamander::apps {

models::model_desc check_job(const train_cli& cli, job_place place,
                             double available_bytes) {
  if (cli.job.micro_batches > cli.job.batch_size) {
    throw std::invalid_argument(
        "--micro-batches " + std::to_string(cli.job.micro_batches) +
        " is more than --batch-size " + std::to_string(cli.job.batch_size) +
        ": every micro-batch needs at least one example (use at most " +
        std::to_string(cli.job.batch_size) + " micro-batches, or a larger batch)");
  }
  auto desc = models::describe(models::model_spec::parse(cli.job.model));
  models::check_fits(cli.job.dataset, desc);
  if (place == job_place::here && cli.plan != "dp") {
    check_stage_count(cli.stages, desc); // (data-parallel members hold every layer)
  }
  if (available_bytes <= 0) {
    return desc;
  }
  auto need = models::training_memory(desc, cli.job.optimizer, cli.job.batch_size);
  if (place == job_place::here && need.total() > available_bytes) {
    throw std::invalid_argument("model " + desc.spec.canonical() + " needs about " +
                                need.describe() + " to train, more than the " +
                                models::format_bytes(available_bytes) +
                                " this host has available (MemAvailable)");
  }
  // the central replica holder keeps every stage's weights and optimizer state
  double replicas = need.weights + need.optimizer;
  if (place == job_place::cluster && cli.job.replicate_every > 0 &&
      replicas > available_bytes) {
    throw std::invalid_argument(
        "model " + desc.spec.canonical() + " has " + models::format_bytes(need.weights) +
        " of weights; with " + cli.job.optimizer + " state its central replicas take " +
        models::format_bytes(replicas) + ", more than the " +
        models::format_bytes(available_bytes) +
        " this host has available (MemAvailable); --replicate-every 0 keeps none here");
  }
  return desc;
}

void check_stage_count(int stages, const models::model_desc& desc) {
  auto layers = desc.layers.size();
  if (stages > 0 && static_cast<size_t>(stages) > layers) {
    throw std::invalid_argument(
        "--stages " + std::to_string(stages) + ": model " + desc.spec.canonical() + " has " +
        std::to_string(layers) + " layers, so at most " + std::to_string(layers) +
        " stages (each runs one layer or more)");
  }
}

} // namespace salamander::apps
