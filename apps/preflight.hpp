// Checks of a training job's options before any work starts.
//
// Why: a model that does not fit the data, a batch cut into more
// micro-batches than it has examples, or a model larger than the host's
// memory used to surface minutes later, as a LibTorch stack trace, a stall
// or a swapping host. Everything here is arithmetic on the options and the
// model's description (nothing is allocated), and each refusal names the
// option to change.
#pragma once

#include "apps/train_cli.hpp"
#include "models/model_desc.hpp"

namespace salamander::apps {

/// Where the job's weights live, which sets what this host must hold.
enum class job_place {
  here,    ///< one device, or every stage in this process (--stages)
  cluster, ///< stages on the nodes; this host keeps the central replicas
};

/// The model of `cli`, described, once every check passed. Throws
/// std::invalid_argument (or models::data_error) saying what is wrong.
/// `available_bytes` is this host's free memory (0: unknown, not checked).
models::model_desc check_job(const train_cli& cli, job_place place,
                             double available_bytes);

/// `--stages N` on a model of fewer layers is refused (train, infer,
/// serve): each stage runs one layer or more. Throws std::invalid_argument.
void check_stage_count(int stages, const models::model_desc& desc);

} // namespace salamander::apps
