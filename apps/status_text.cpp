#include "apps/status_text.hpp"

#include "models/model_desc.hpp"

#include <fmt/format.h>

namespace salamander::apps {

namespace {

// A serving job: requests instead of batches, latency instead of loss.
std::vector<progress_field> serve_fields(const job_status& s) {
  std::string health = s.health;
  int health_keep = health == "ok" ? 1 : 9;
  if (health == "ok" && s.pipeline.recoveries > 0) {
    health = fmt::format("ok, recovered {}x ({:.3f} s)", s.pipeline.recoveries,
                         s.pipeline.last_recovery_s);
    health_keep = 3;
  }
  return {
      {"[" + to_string(s.phase) + "]", 10},
      {fmt::format("{} requests", s.serving.requests), 7},
      {fmt::format("{:.1f} req/s", s.serving.requests_per_s), 9},
      {fmt::format("p50 {:.1f} ms p99 {:.1f} ms", 1e3 * s.serving.latency_p50_s,
                   1e3 * s.serving.latency_p99_s),
       6},
      {fmt::format("queue {}", s.serving.queue_depth), 5},
      {fmt::format("in flight {}", s.serving.in_flight), 3},
      {fmt::format("plan v{}", s.pipeline.plan_version), 2},
      {health, health_keep},
  };
}

// A federated job: rounds and the global model's accuracy.
std::vector<progress_field> fed_fields(const job_status& s) {
  return {
      {"[" + to_string(s.phase) + "]", 10},
      {fmt::format("round {}/{}", s.rounds.round, s.rounds.total), 9},
      {s.test_accuracy >= 0 ? fmt::format("acc {:.2f}%", 100 * s.test_accuracy)
                            : std::string("acc -"),
       8},
      {fmt::format("last round {:.1f} s", s.rounds.round_s), 6},
      {fmt::format("{}/{} clients", s.rounds.contributed, s.rounds.clients), 5},
      {fmt::format("{} dropped", s.rounds.dropped_updates), 3},
      {fmt::format("{:.0f} s", s.train_s), 4},
      {s.rounds.strategy, 2},
  };
}

// A split-learning job: rounds, accuracy, and what crossed the cut.
std::vector<progress_field> split_fields(const job_status& s) {
  return {
      {"[" + to_string(s.phase) +
           (s.rounds.split_phase == adasplit_phase::none ? "" : ", " + to_string(s.rounds.split_phase)) + "]",
       10},
      {fmt::format("round {}/{}", s.rounds.round, s.rounds.total), 9},
      {s.test_accuracy >= 0 ? fmt::format("acc {:.2f}%", 100 * s.test_accuracy)
                            : std::string("acc -"),
       8},
      {fmt::format("{} across the cut", models::format_bytes(static_cast<double>(
                                            s.rounds.bytes_up + s.rounds.bytes_down))),
       7},
      {fmt::format("{:.1f} GFLOP on clients", s.rounds.client_flops / 1e9), 5},
      {fmt::format("{} clients", s.rounds.clients), 4},
      {fmt::format("{:.0f} s", s.train_s), 3},
      {s.rounds.strategy, 2},
  };
}

} // namespace

std::vector<progress_field> status_fields(const job_status& s, eta_clock* eta) {
  if (s.mode == job_mode::serve) {
    return serve_fields(s);
  }
  if (s.mode == job_mode::federate) {
    return fed_fields(s);
  }
  if (s.mode == job_mode::split) {
    return split_fields(s);
  }
  eta_clock once;
  auto& clock = eta ? *eta : once;
  int64_t left = 0;
  if (s.training.batches > 0) {
    left = (s.training.epochs - s.training.epoch) * s.training.batches +
           (s.training.batches - s.training.batch);
  }
  bool training = s.phase == status_phase::training;
  double seconds = clock.update(training, s.training.committed, left, s.elapsed_s);

  std::string rate;
  if ((training || s.finished()) && s.training.committed > 0) {
    double r = s.training.recent_samples_per_s > 0 ? s.training.recent_samples_per_s
                                                   : s.training.samples_per_s;
    rate = fmt::format("{:.0f} samples/s", r);
  } else if (s.training.committed > 0 && !s.finished()) {
    rate = "- samples/s (" + to_string(s.phase) + ")"; // the last rate would be a frozen number
  } else {
    rate = "- samples/s";
  }
  std::string eta_text = "eta " + format_duration(seconds);
  if (clock.held() && !s.finished()) {
    eta_text += " (held)";
  }
  std::string health = s.health;
  int health_keep = health == "ok" ? 1 : 9; // a problem stays on the line
  if (health == "ok" && s.pipeline.recoveries > 0) {
    health = fmt::format("ok, recovered {}x ({:.2f} s)", s.pipeline.recoveries,
                         s.pipeline.last_recovery_s);
    health_keep = 3;
  }
  return {
      {"[" + to_string(s.phase) + "]", 10},
      {fmt::format("epoch {}/{}", s.training.epoch, s.training.epochs), 7},
      {fmt::format("batch {}/{}", s.training.batch, s.training.batches), 9},
      {rate, 5},
      {fmt::format("loss {:.4f}", s.loss), 4},
      {eta_text, 8},
      {fmt::format("plan v{}", s.pipeline.plan_version), 2},
      {health, health_keep},
  };
}

std::string status_line(const job_status& s) {
  // "[training] epoch 1/1  batch ...", as it has always read
  auto fields = status_fields(s);
  auto phase = fields.front().text;
  fields.erase(fields.begin());
  return phase + " " + join_fields(fields, "  ");
}

} // namespace salamander::apps
