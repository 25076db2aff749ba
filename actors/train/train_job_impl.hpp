// Inside the training job supervisor: the functions its parts share. Not
// for use outside actors/train/train_*.cpp.
//
//   train_job.cpp       the behaviour: handlers, start-up, nodes lost and joined
//   train_loop.cpp      phases, feeding, commits, epochs, evaluation, the end
//   train_plan.cpp      plans: choosing, launching, live re-planning
//   train_recovery.cpp  failures: freeze, recovery round, re-plan, resume
//   train_ops.cpp       console operations, status rows, weights, checkpoints
#pragma once

#include "actors/elapsed.hpp"
#include "actors/train/train_job.hpp"

#include <nlohmann/json.hpp>

#include <functional>

namespace salamander::actors::train_detail {

using self_ptr = train_job_actor::stateful_pointer<train_job_state>;
using clock = std::chrono::steady_clock;
using algorithms::job_event;
using algorithms::job_phase;


// phases (train_loop.cpp)
/// Moves the phase by `e`; false (and nothing changes) when `e` does not
/// apply in the current phase.
bool enter(self_ptr self, job_event e);
/// The phase moved to another group: the job switches to that group's
/// behaviour (running, recovering, or the ended one of actors/job/ended.hpp;
/// train_job.cpp). enter() calls it.
void become_for_phase(self_ptr self);
/// `e` leads back to training; a job the console paused goes on to paused.
void back_to_training(self_ptr self, job_event e);
bool recovering(const train_job_state& st);

// the metrics log (train_loop.cpp)
void log_event(self_ptr self, const std::string& kind,
               nlohmann::json fields = nlohmann::json::object());

// the loop (train_loop.cpp)
void feed(self_ptr self);
void start_epoch(self_ptr self);
void continue_training(self_ptr self);
void commit(self_ptr self, uint64_t batch);
void after_epoch(self_ptr self);
void on_eval(self_ptr self, uint64_t round, uint32_t chunk, const torch::Tensor& logits);
void fail(self_ptr self, const std::string& what);
void stop_stages(self_ptr self);
uint64_t total_batches(const train_job_state& st);
/// The async schedule (algorithms/schedule.hpp): whether it runs, and the
/// batches between two drains of its rows. The pipeline drains at every
/// epoch's end unless it runs async without evaluating: then the batches
/// of the next epoch follow at once (their weights are the same either way).
bool is_async(const job_config& cfg);
bool drains_at_epochs(const train_job_state& st);
uint64_t async_row_batches(const train_job_state& st);
/// The async delay in force: the job's once its first launch fixed it,
/// before that the configured one (0: the planner's choice, not yet made).
uint32_t async_delay_now(const train_job_state& st);
int64_t micro_batch_size(const job_config& cfg);
std::vector<size_t> live_nodes(const train_job_state& st);
std::vector<bool> dead_mask(const train_job_state& st);
std::vector<std::string> node_names(const train_job_state& st);

// plans (train_plan.cpp)
/// Bytes of a layer's weights and optimizer state per byte of weights
/// (Adam: 3, SGD with momentum: 2).
int state_factor(const job_config& cfg);
enum class launch_kind { first, replan, recovery };
/// Each new stage's pulls (recovery: from the holders and survivors).
using source_fn = std::function<void(stage_spec&)>;
void launch(self_ptr self, stage_plan plan, launch_kind kind, source_fn sources = {});
void first_plan(self_ptr self);
void on_profiles(self_ptr self, cluster_profile& round);
void begin_replan(self_ptr self);
void track_capacity(self_ptr self);
void look_at_plan(self_ptr self);
void choose_schedule(self_ptr self);
void resume_after_replan(self_ptr self);
std::string describe_plan(const train_job_state& st);
std::string describe_plan(const train_job_state& st, const stage_plan& plan);
algorithms::plan_request planner_request(const train_job_state& st);
stage_plan plan_to_stages(const algorithms::partition_plan& plan,
                          const std::vector<size_t>& live);
/// The user's balance (or an even split) over the first live nodes; the
/// error says why it cannot be (and nothing changes).
caf::expected<stage_plan> balanced_plan(const train_job_state& st,
                                        const std::vector<size_t>& balance, bool strict);

// failures (train_recovery.cpp)
void on_failure(self_ptr self, const std::string& what);
void recover(self_ptr self, uint64_t attempt);
void wait_for_capacity(self_ptr self, const std::string& why);
void give_up(self_ptr self);
/// The cluster admitted the nodes of a resumed job: recover onto them from
/// what the dead supervisor left.
void resume_job(self_ptr self);

// operations (train_ops.cpp)
void take_checkpoints(self_ptr self);
void refresh_rows(self_ptr self);
using weights_done =
    std::function<void(caf::expected<models::weight_snapshot>, size_t failed_stage)>;
void collect_weights(self_ptr self, weights_done done);
/// job_state.json in the state directory, written atomically (nothing
/// without one; a write that fails is logged, and the job goes on).
void persist_state(self_ptr self);

} // namespace salamander::actors::train_detail
