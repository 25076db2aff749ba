#include "actors/job/runner.hpp"

#include <thread>

namespace salamander::actors {

job_result run_to_end(caf::actor_system& sys, const caf::actor& job,
                      const cluster_actor& cluster, std::chrono::milliseconds timeout,
                      const job_options& opts) {
  job_result result;
  if (opts.on_start) {
    opts.on_start(cluster);
  }
  {
    caf::scoped_actor self{sys};
    auto answered = std::chrono::steady_clock::now();
    while (!result.status.finished()) {
      std::this_thread::sleep_for(opts.poll);
      self->request(job, timeout, caf::get_atom_v)
          .receive(
              [&](job_status& s) {
                result.status = std::move(s);
                answered = std::chrono::steady_clock::now();
              },
              [&](caf::error& err) {
                // the job lives in this process: if it does not answer for
                // this long, something is badly wrong (a long evaluation
                // between rounds is not)
                if (std::chrono::steady_clock::now() - answered >= tuning::job_silence_limit) {
                  result.status.phase = status_phase::failed;
                  result.status.error =
                      "the supervisor stopped answering: " + sys.render(err);
                }
              });
      if (opts.on_status) {
        opts.on_status(result.status);
      }
    }
    // a finished job's weights, or those a job that gave up ends with
    if (opts.fetch_weights &&
        (result.status.phase == status_phase::finished || !result.status.stopped.empty())) {
      self->request(job, timeout, snapshot_atom_v)
          .receive([&](snapshot_payload& p) { result.weights = std::move(p.snapshot); },
                   [&](caf::error& err) {
                     if (result.status.phase != status_phase::finished) {
                       return; // it failed anyway, and kept nothing
                     }
                     result.status.phase = status_phase::failed;
                     result.status.error =
                         "could not fetch the final weights: " + sys.render(err);
                   });
    }
    self->send(job, leave_atom_v);
    self->send(cluster, leave_atom_v);
  }
  return result;
}

} // namespace salamander::actors
