// Split learning's two halves (AdaSplit mode): a client on each device holds
// the layers before the cut and its own shard of the data; the server,
// beside the job, holds the layers after it.
//
// A client trains one local epoch per round, a batch per tick:
//
//   vanilla, splitfed   forward -> activations and labels to the server ->
//                       its gradient back -> backward -> step
//   adasplit            forward -> auxiliary head -> local loss -> step; on
//                       the batches the orchestrator picked, the (detached)
//                       activations also go to the server, which answers
//                       only its loss: no gradient comes back
//
// The local loss is a linear auxiliary head on the cut's activations
// (cross-entropy), trained with the client's layers. We chose it over a
// supervised contrastive loss because it needs no projection network, no
// large batches of positives and no temperature, and costs one small dense
// layer on a weak device (its FLOPs are counted).
//
// The server trains its layers on whatever arrives, in arrival order (one
// shared server model: SplitFed v2, and vanilla's). In adasplit it keeps a
// mask over every server parameter for each client c (Piggyback's: a score
// m_c in [0, 1] per parameter, starting at 1, that keeps the parameter while
// it is above 1/2): client c's batches run through the kept part of W, their
// loss trains m_c straight through (plus an L1 pull towards 0, a proximal
// step), and W is updated only where the mask keeps it, so each client's
// data updates only a subset of the server's model.
//
// Emulated devices are paced like the federated clients: a batch whose
// client-side work took t of CPU time is followed by a pause that makes it
// last t / share (compute-time dilation). The server's time is not the
// device's.
#pragma once

#include "actors/clients/client_work.hpp"
#include "actors/node/emulation.hpp"
#include "algorithms/split.hpp"
#include "messages/interfaces.hpp"
#include "models/data.hpp"
#include "models/weights.hpp"

#include <chrono>
#include <memory>
#include <optional>

namespace salamander::actors {

// ---- snapshots with more than a model's layers
//
// A split snapshot carries, after the model's own layers, tagged entries
// (index >= tagged_base, name "tag/index/layer"): a client's auxiliary head
// ("aux"), the server's mask for client c ("mask<c>"), every client's
// client-side layers in a checkpoint ("client<c>"), the job's counters.

constexpr uint32_t tagged_base = 1u
                                 << 24; // models::restore passes over these (weights.cpp)

/// Appends `part`'s layers to `into` under `tag`.
void add_tagged(models::weight_snapshot& into, const std::string& tag,
                const models::weight_snapshot& part);
/// The layers of `from` tagged `tag`, as they were (empty if none).
models::weight_snapshot take_tagged(const models::weight_snapshot& from,
                                    const std::string& tag);
/// `from` without its tagged entries: what models::restore accepts.
models::weight_snapshot untagged(const models::weight_snapshot& from);

/// The per-sample costs of `desc` cut before layer `cut`.
split::cut_costs costs_of(const models::model_desc& desc, size_t cut);

/// Checks a cut for `desc`: 1 <= cut < layers; throws std::invalid_argument
/// naming the layers on either side of each valid cut otherwise.
void check_cut(const models::model_desc& desc, int64_t cut);

// ---- the client

struct split_work {
  uint64_t id = 0; ///< ticks carry it; a replaced work's ticks are dropped
  split_task task;
  split_job_actor reply;
  split_server_actor server;
  std::vector<int64_t> order; ///< this round's example order (shard positions)
  int64_t batch = 0;
  int64_t batches = 0;
  bool waiting = false; ///< for the server's answer to the batch in hand
  torch::Tensor act;    ///< vanilla, splitfed: the batch's activations (with graph)
  double batch_cpu = 0; ///< client-side CPU time of the batch in hand
  double batch_wall = 0;
  split_result result;
  double loss_sum = 0;
  double server_loss_sum = 0;
  std::chrono::steady_clock::time_point started{};
  std::chrono::steady_clock::time_point last_progress{};
};

struct split_client_state : client_base_state {
  static inline const char* name = "split_client";
  split_client_spec spec;
  split::method method = split::method::vanilla;
  split::cut_costs costs;
  double aux_flops = 0;
  std::unique_ptr<models::layered_model> model; ///< layers [0, cut)
  torch::nn::Sequential net{nullptr};
  torch::nn::Linear aux{nullptr}; ///< adasplit's local head
  std::unique_ptr<torch::optim::Optimizer> opt;
  uint64_t next_work = 1;
  std::optional<split_work> work;
  std::string error; ///< set at spawn: every round fails with it
};

split_client_actor::behavior_type
split_client(split_client_actor::stateful_pointer<split_client_state> self,
             split_client_spec spec, node_emulation emulation, std::string node,
             std::string data_dir);

// ---- the server

struct split_server_config {
  std::string model;
  uint32_t cut = 1;
  std::string method = "vanilla";
  uint32_t clients = 1;
  uint64_t seed = 1;
  std::string optimizer = "sgd";
  double lr = 0.01;
  double momentum = 0.9;
  double mask_lr = 0.1;  ///< adasplit: the masks' learning rate
  double mask_l1 = 1e-3; ///< adasplit: the L1 penalty's weight per element
  /// adasplit: below 1, each client's mask keeps this share of every server
  /// tensor, the parameters with the highest scores (mask_kept); 1: a
  /// score above 1/2 keeps a parameter.
  double mask_keep = 1.0;
  int32_t threads = 1;
};

struct split_server_state {
  static inline const char* name = "split_server";
  split_server_config cfg;
  split::method method = split::method::vanilla;
  models::model_desc desc;
  std::unique_ptr<models::layered_model> model; ///< layers [cut, n)
  torch::nn::Sequential net{nullptr};
  std::unique_ptr<torch::optim::Optimizer> opt;
  std::vector<std::vector<torch::Tensor>> masks; ///< adasplit: per client, per parameter
  uint64_t steps = 0;
};

/// `start`: the server's layers and masks to resume from (a checkpoint's);
/// empty: the seed's weights and masks of ones.
split_server_actor::behavior_type
split_server(split_server_actor::stateful_pointer<split_server_state> self,
             split_server_config cfg, models::weight_snapshot start);

/// Which parameters of one server tensor a client's mask keeps, from its
/// scores: with `keep` 1, those scoring above 1/2 (Piggyback's threshold;
/// the L1 pull decides how many); below 1, the share `keep` of them that
/// score highest, ties kept (a sparsity target: the scores fall by the
/// gradient times the weight, so the parameters pruned are those the
/// client's own data most wants smaller, movement pruning's rule).
torch::Tensor mask_kept(const torch::Tensor& scores, double keep);

/// The server layers of `server` (a server snapshot) as client c sees them:
/// W where mask<c> keeps it (0 elsewhere) in adasplit, W otherwise.
models::weight_snapshot server_view(const models::weight_snapshot& server,
                                    uint32_t client, double keep = 1.0);

/// Of a server snapshot: the fraction of server parameters client c's mask keeps
/// (the share of the server's parameters its data updates); 1 without masks.
double mask_density(const models::weight_snapshot& server, uint32_t client,
                    double keep = 1.0);

} // namespace salamander::actors
