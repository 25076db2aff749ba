// Inside the serving job supervisor: the functions its parts share. Not for
// use outside actors/serve/serve_*.cpp.
//
//   serve_job.cpp   the behaviour: requests, dynamic batching, answers,
//                   status, stats, the console's commands
//   serve_plan.cpp  plans, launches, failures, joins, re-plans
#pragma once

#include "actors/elapsed.hpp"
#include "actors/serve/serve_job.hpp"

#include <nlohmann/json.hpp>

namespace salamander::actors::serve_detail {

using self_ptr = serve_job_actor::stateful_pointer<serve_job_state>;
using clock = std::chrono::steady_clock;

void log_event(self_ptr self, const std::string& kind,
               nlohmann::json fields = nlohmann::json::object());
/// Moves the phase on `e` (and the status with it); false where `e` does
/// not apply (nothing changes).
bool enter(self_ptr self, algorithms::serve_event e);
/// Finished or failed.
bool over(const serve_job_state& st);
/// The service finished or failed: it switches to the ended behaviour
/// (actors/job/ended.hpp; serve_job.cpp). enter() calls it.
void become_ended(self_ptr self);
void fail(self_ptr self, const std::string& what);

// requests (serve_job.cpp)
/// Sends micro-batches to the serving pipeline while it has room.
void dispatch(self_ptr self);
/// Micro-batches in the pipeline at once under `stages` stages.
int window_for(const serve_job_state& st, size_t stages);
/// The micro-batches in flight on pipeline `generation` are sent again (to
/// whichever pipeline serves next), in the order they were first sent.
void requeue(self_ptr self, uint64_t generation);
size_t in_flight_on(const serve_job_state& st, uint64_t generation);

// plans (serve_plan.cpp)
void first_plan(self_ptr self);
void on_profiles(self_ptr self, cluster_profile& round);
/// Plans over the live nodes and launches that plan as the next pipeline
/// (the one that serves stays until it is up).
/// "" when a plan was launched or the serving one is kept; else why there is
/// no plan (then, without a serving pipeline, the job waits or fails).
std::string plan_next(self_ptr self, const std::string& reason);
void on_ready(self_ptr self);
/// Micro-batch `answered` is answered: the chain copies the current
/// pipeline still owes (replicate_after) are made once the micro-batches
/// sent again after a recovery all are.
void settle_replication(self_ptr self, uint64_t answered);
void on_down(self_ptr self, const caf::down_msg& dm);
void on_node_lost(self_ptr self, uint32_t n, const std::string& why);
caf::result<std::string> on_node_joined(self_ptr self, uint32_t n,
                                        const cluster_member& m);
/// Old pipelines that answered what they held (or took too long) stop;
/// a launch that hangs is tried again.
void check_pipelines(self_ptr self);
void stop_pipeline(self_ptr self, serve_pipeline& p);
/// Every pipeline's stages (serving, launching, old) stop.
void stop_all(self_ptr self);
std::vector<size_t> live_nodes(const serve_job_state& st);
std::string describe_plan(const serve_job_state& st, const stage_plan& p);

} // namespace salamander::actors::serve_detail
