// The options of `salamander train` and `salamander supervisor`: what they
// give the training job goes straight into its configuration (`job`); the
// rest says where the job runs and what the command does around it.
#pragma once

#include "actors/train/train_job.hpp"
#include "apps/dashboard/dashboard_cli.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace salamander::apps {

struct train_cli {
  /// model (the spec as given), seed, epochs, batch and micro-batch sizes,
  /// optimizer, data, schedule, window, replication and re-plan gain, as the
  /// options set them; run_pipeline fills in the rest.
  actors::job_config job = command_line_defaults();
  std::string save;
  // pipeline: --stages N (embedded, N local nodes) or --cluster FILE
  int stages = 0;
  std::string balance;
  bool no_weight_prediction = false; ///< --no-weight-prediction (job.weight_prediction)
  std::string cluster;
  std::string plan = "auto";
  int64_t replan_at = 0;
  std::string replan_balance;
  double hang_timeout_s = 3.0;
  double pause_timeout_s = 300.0; ///< 0: wait for ever
  std::string listen;             ///< publish the supervisor here (nodes --join it)
  std::string secret_file;        ///< cluster secret (else $SALAMANDER_SECRET)
  std::string tls;          ///< deploy/make-certs.sh's; else $SALAMANDER_TLS; none: off
  std::string metrics = ""; ///< JSON-lines log; "": runs/JOB/metrics.jsonl; "none": off
  dashboard_cli dashboard;  ///< --dashboard: the live page
  // continual learning (actors/train/stream.hpp)
  std::string stream;     ///< replay:RATE, file:PATH or tcp:HOST:PORT; "": a data set
  std::string stream_log; ///< "": beside the metrics log
  uint64_t stream_keep = 256;
  double stream_idle_end_s = 0;
  /// `supervisor --resume RUN_DIR`: carry on the unfinished job whose state
  /// RUN_DIR holds (its supervisor died); the command line is the one that
  /// RUN_DIR/job.json recorded.
  std::string resume;
  std::vector<std::string> argv; ///< this command's arguments, for job.json

  /// The job's defaults as the command line documents them: one
  /// micro-batch per batch (main() makes it 4 for a pipeline unless given).
  static actors::job_config command_line_defaults() {
    actors::job_config j;
    j.micro_batches = 1;
    return j;
  }
};

/// One device: `salamander train` without --stages or --cluster.
int run_train(const train_cli& cli);
/// Pipeline training over actors: embedded (--stages) or a cluster file.
int run_pipeline(const train_cli& cli);

} // namespace salamander::apps
