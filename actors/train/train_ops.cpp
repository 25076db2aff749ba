// What the training job does for its operators: the status rows of the
// console's `nodes` and `plan`, gathering every stage's weights (the final
// snapshot, checkpoints) and console checkpoints at a flush; what a
// restarted supervisor resumes from (persist_state, read_resume_point).
#include "actors/logging.hpp"
#include "actors/replication/replica_holder.hpp"
#include "actors/train/train_job_impl.hpp"
#include "messages/checkpoint.hpp"
#include "messages/errors.hpp"

#include <array>
#include <fstream>

namespace salamander::actors::train_detail {

// Fills the console's views of the job: nodes and stages. Health and the
// last heartbeat are the cluster supervisor's to add; here a node is ok,
// dead or refused.
void refresh_rows(self_ptr self) {
  auto& st = self->state;
  auto& s = st.status;
  auto dead = dead_mask(st);
  s.nodes.clear();
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    auto r = basic_row(st.nodes[n], n, st.plan.nodes, st.stages.size());
    auto [rate, latency] = st.capacity.measured_link(n, dead);
    if (rate > 0) {
      r.link_bytes_per_s = rate;
    }
    r.link_latency_s = latency;
    r.speed = st.capacity.speed(n);
    r.capacity = st.capacity.capacity(n);
    s.nodes.push_back(std::move(r));
  }
  s.stages.clear();
  auto M = static_cast<double>(st.cfg.micro_batches);
  for (size_t i = 0; i < st.plan.ranges.size() && i < st.plan.nodes.size(); ++i) {
    stage_row r;
    r.index = static_cast<uint32_t>(i);
    size_t n = st.plan.nodes[i];
    r.node = st.nodes[n].name;
    r.begin = st.plan.ranges[i].first;
    r.end = st.plan.ranges[i].second;
    r.predicted_s = st.capacity.predicted_s(n, r.begin, r.end, M);
    for (auto& b : st.last_reports) {
      if (b.stage == i) {
        r.measured_s = b.compute_s;
        r.wait_s = b.wait_s;
        r.send_s = b.send_s;
      }
    }
    s.stages.push_back(std::move(r));
  }
  s.paused_by_user = st.user_paused;
  s.elapsed_s = since(st.started);
  s.pipeline.schedule = st.cfg.schedule;
  if (is_async(st.cfg)) {
    s.pipeline.schedule +=
        fmt::format(", delay {}, slack {}, rows of up to {} batches", async_delay_now(st),
                    st.cfg.async_slack, async_row_batches(st));
    if (st.cfg.weight_prediction) {
      s.pipeline.schedule += ", weights predicted";
    }
    if (st.cfg.weight_aggregation > 0) {
      s.pipeline.schedule +=
          fmt::format(", weights averaged every {} updates", st.cfg.weight_aggregation);
    }
  }
}

// Every stage's weights and optimizer state, merged into one snapshot (its
// version the lowest of theirs); `done` gets it, or the first stage (index)
// that did not hand its part over and why.
//
// The stages send their weights to a replica holder of this collection's,
// in parts when they run in another process, and answer with the version
// and layers sent; the holder then hands them over. As one answer, a stage
// that took longer than the hang timeout to cross its link had its node
// dropped as hung (replica_store.hpp, snapshot_parts).
void collect_weights(self_ptr self, weights_done done) {
  auto& st = self->state;
  // data parallel: the members hold the same weights; the first answers
  size_t asked =
      st.plan.split.empty() ? st.stages.size() : std::min<size_t>(1, st.stages.size());
  auto timeout = st.cfg.request_timeout;
  auto gather =
      self->spawn(replica_holder, std::string("gather"), std::shared_ptr<link_shaper>{});
  auto sent = std::make_shared<std::vector<std::array<uint64_t, 3>>>(asked);
  auto parts = std::make_shared<std::vector<models::weight_snapshot>>(asked);
  auto pending = std::make_shared<size_t>(asked);
  auto failed = std::make_shared<bool>(false);
  auto fail = [=](caf::error err, size_t i) {
    if (!*failed) {
      *failed = true;
      self->send_exit(gather, caf::exit_reason::user_shutdown);
      done(std::move(err), i);
    }
  };
  // every part is with the holder: it answers in the order asked
  auto hand_over = [=] {
    *pending = asked;
    for (size_t i = 0; i < asked; ++i) {
      auto [version, begin, end] = (*sent)[i];
      self->request(gather, timeout, snapshot_atom_v, begin, end, version)
          .then(
              [=](snapshot_payload& part) {
                (*parts)[i] = std::move(part.snapshot);
                if (--*pending > 0 || *failed) {
                  return;
                }
                self->send_exit(gather, caf::exit_reason::user_shutdown);
                auto all = (*parts)[0];
                all.layers.clear();
                for (auto& p : *parts) {
                  all.version = std::min(all.version, p.version);
                  for (auto& l : p.layers) {
                    all.layers.push_back(std::move(l));
                  }
                }
                done(std::move(all), 0);
              },
              [=](caf::error& err) { fail(std::move(err), i); });
    }
  };
  for (size_t i = 0; i < asked; ++i) {
    self->request(st.stages[i], timeout, snapshot_atom_v,
                  caf::actor_cast<caf::actor>(gather))
        .then(
            [=](uint64_t version, uint64_t begin, uint64_t end) {
              (*sent)[i] = {version, begin, end};
              if (--*pending == 0 && !*failed) {
                hand_over();
              }
            },
            [=](caf::error& err) { fail(std::move(err), i); });
  }
}

// At a flush: every stage's weights into one checkpoint per request.
void take_checkpoints(self_ptr self) {
  if (!enter(self, job_event::checkpoint)) {
    return;
  }
  auto attempt = self->state.attempt;
  collect_weights(self, [=](caf::expected<models::weight_snapshot> all,
                            size_t failed_stage) {
    auto& st = self->state;
    auto requests = std::move(st.checkpoints);
    st.checkpoints.clear();
    for (auto& r : requests) {
      if (!all) {
        r.promise.deliver(caf::make_error(
            errc::stage_failed,
            "stage " + std::to_string(failed_stage) +
                " did not hand over its weights: " + self->system().render(all.error())));
        continue;
      }
      try {
        messages::checkpoint ckpt;
        ckpt.snapshot = *all;
        ckpt.seed = st.cfg.seed;
        ckpt.epoch = st.committed / static_cast<uint64_t>(st.batches_per_epoch);
        ckpt.batches_in_epoch =
            st.committed % static_cast<uint64_t>(st.batches_per_epoch);
        ckpt.note = "console checkpoint at batch " + std::to_string(st.committed) +
                    ", plan " + st.status.plan;
        messages::save_checkpoint(r.path, ckpt);
        log_event(self, "checkpoint", {{"path", r.path}, {"version", all->version}});
        r.promise.deliver("saved checkpoint " + r.path + " (version " +
                          std::to_string(all->version) + ", " +
                          std::to_string(all->layers.size()) + " layers)");
      } catch (const std::exception& e) {
        r.promise.deliver(caf::make_error(errc::io_failed, e.what()));
      }
    }
    // a failure while the weights were gathered already moved the job on
    if (attempt == st.attempt && st.phase == job_phase::checkpointing) {
      back_to_training(self, job_event::checkpointed);
      feed(self);
    }
  });
}

} // namespace salamander::actors::train_detail

namespace salamander::actors::train_detail {

// What a restarted supervisor needs besides the central holder's weights
// (README, "When the supervisor dies"). Written at start, at every plan, at
// every replication's commit and at the end: the committed counter only
// says how many batches a resume redoes; the weights it resumes from carry
// their own version.
void persist_state(self_ptr self) {
  auto& st = self->state;
  if (st.cfg.state_dir.empty()) {
    return;
  }
  nlohmann::json plan_nodes = nlohmann::json::array();
  nlohmann::json ranges = nlohmann::json::array();
  for (size_t i = 0; i < st.plan.nodes.size() && i < st.plan.ranges.size(); ++i) {
    plan_nodes.push_back(st.nodes[st.plan.nodes[i]].name);
    ranges.push_back({st.plan.ranges[i].first, st.plan.ranges[i].second});
  }
  nlohmann::json j = {{"format", 1},
                      {"model", st.cfg.model},
                      {"fingerprint", st.desc.fingerprint},
                      {"seed", st.cfg.seed},
                      {"phase", to_string(st.status.phase)},
                      {"stopped", st.status.stopped},
                      {"committed", st.committed},
                      {"total_batches", total_batches(st)},
                      {"plan_nodes", plan_nodes},
                      {"plan_ranges", ranges},
                      {"plan_split", st.plan.split},
                      {"user_plan", st.user_plan},
                      {"recoveries", st.status.pipeline.recoveries},
                      {"replans", st.status.pipeline.replans},
                      {"async_delay", st.async_delay},
                      {"redone_batches", st.status.training.redone_batches},
                      {"evaluated_epochs", st.evaluated_epochs},
                      {"test_accuracy", st.status.test_accuracy},
                      {"resumes", st.cfg.resume ? st.cfg.resume->resumes + 1 : 0},
                      {"metrics", st.cfg.metrics_path},
                      {"unix_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count()}};
  try {
    messages::write_file_atomically(st.cfg.state_dir + "/job_state.json",
                                    j.dump(1, ' ', false,
                                           nlohmann::json::error_handler_t::replace),
                                    "job state");
  } catch (const std::exception& e) {
    subsystem_log("job")->error("{} (a restarted supervisor resumes from older state)",
                                e.what());
  }
}

} // namespace salamander::actors::train_detail

namespace salamander::actors {

resume_point read_resume_point(const std::string& dir, const models::model_desc& desc) {
  auto path = dir + "/job_state.json";
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error("cannot resume from " + dir + ": there is no " + path +
                             " (only a supervisor --cluster job with a metrics log "
                             "keeps one)");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot resume from " + dir + ": " + path +
                             " is not valid JSON: " + e.what());
  }
  resume_point r;
  try {
    if (j.at("fingerprint").get<std::string>() != desc.fingerprint) {
      throw std::runtime_error("cannot resume from " + dir + ": it trained model " +
                               j.at("model").get<std::string>() + ", not " +
                               desc.spec.canonical());
    }
    auto phase = j.at("phase").get<std::string>();
    auto known = algorithms::job_phase_from_text(phase);
    if (!known) {
      throw std::runtime_error("cannot resume from " + dir + ": " + path +
                               " names an unknown phase '" + phase + "'");
    }
    r.phase = *known;
    r.stopped = j.value("stopped", std::string());
    r.committed = j.at("committed").get<uint64_t>();
    r.plan_nodes = j.at("plan_nodes").get<std::vector<std::string>>();
    for (auto& range : j.at("plan_ranges")) {
      r.plan_ranges.emplace_back(range.at(0).get<size_t>(), range.at(1).get<size_t>());
    }
    r.plan_split = j.at("plan_split").get<std::vector<int>>();
    r.user_plan = j.value("user_plan", false);
    r.recoveries = j.value("recoveries", int64_t{0});
    r.replans = j.value("replans", int64_t{0});
    r.redone_batches = j.value("redone_batches", int64_t{0});
    r.evaluated_epochs = j.value("evaluated_epochs", int64_t{0});
    r.test_accuracy = j.value("test_accuracy", -1.0);
    r.resumes = j.value("resumes", int64_t{0});
    r.async_delay = j.value("async_delay", uint32_t{0});
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("cannot resume from " + dir + ": " + path +
                             " lacks a field: " + e.what());
  }
  if (r.phase == algorithms::job_phase::finished && r.stopped.empty()) {
    throw std::runtime_error("cannot resume from " + dir +
                             ": that job finished (nothing is left to train)");
  }
  auto ckpt = dir + "/central.ckpt";
  if (std::ifstream(ckpt).good()) {
    try {
      r.weights = messages::load_checkpoint(ckpt, desc.fingerprint).snapshot;
    } catch (const std::exception& e) {
      throw std::runtime_error("cannot resume from " + dir + ": " + e.what());
    }
  }
  return r;
}

} // namespace salamander::actors
