// The subcommands of `salamander`. main.cpp parses the command line (CLI11)
// into these option structs; each run_* returns the process exit code.
#pragma once

#include "models/model_desc.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace salamander::apps {

struct train_cli {
  std::string model = "cnn";
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  int64_t epochs = 1;
  int64_t batch_size = 64;
  int64_t micro_batches = 1;
  int64_t max_batches = 0;
  std::string optimizer = "adam";
  double lr = 2e-3;
  uint64_t seed = 1;
  int threads = 1;
  std::string save;
  // pipeline: --stages N (embedded, N local nodes) or --cluster FILE
  int stages = 0;
  std::string schedule = "1f1b";
  std::string balance;
  std::string cluster;
  int window = 2;
  bool evaluate = true;
  std::string plan = "auto";
  double replan_gain = 0.15;
  int64_t replan_at = 0;
  std::string replan_balance;
  double hang_timeout_s = 3.0;
  double pause_timeout_s = 300.0; ///< 0: wait for ever
  std::string listen; ///< publish the supervisor here (nodes --join it)
  uint32_t replicate_every = 10;
  uint32_t global_every = 1;
  std::string recovery_policy = "exact";
  std::string secret_file;  ///< cluster secret (else $SALAMANDER_SECRET)
  std::string tls; ///< TLS material (deploy/make-certs.sh); else $SALAMANDER_TLS; none: off
  std::string metrics = ""; ///< JSON-lines log; "": runs/JOB/metrics.jsonl; "none": off
  // continual learning (actors/train/stream.hpp)
  std::string stream;     ///< replay:RATE, file:PATH or tcp:HOST:PORT; "": a data set
  std::string stream_log; ///< "": beside the metrics log
  uint64_t stream_keep = 256;
  double stream_idle_end_s = 0;
  /// `supervisor --resume RUN_DIR`: carry on the unfinished job whose state
  /// RUN_DIR holds (its supervisor died); set by main() with the options
  /// that RUN_DIR/job.json recorded.
  std::string resume;
  std::vector<std::string> argv; ///< this command's arguments, for job.json
};

/// `salamander infer` and `salamander serve`: a forward-only pipeline.
struct serve_cli {
  std::string load;          ///< checkpoint from train --save ("": the seed's weights)
  std::string model = "cnn"; ///< without --load
  uint64_t seed = 1;
  int stages = 0;      ///< embedded: this many local nodes
  std::string cluster; ///< or the nodes of a cluster file
  std::string plan = "auto"; ///< auto (profile + planner) or even
  std::string balance;
  int64_t max_batch = 16;
  double batch_delay_ms = 5;
  bool no_batching = false;
  int in_flight = 0;
  int64_t max_queue = 256;
  double request_timeout_s = 30;
  double hang_timeout_s = 3.0;
  int threads = 1;
  std::string secret_file;
  std::string tls; ///< TLS material (deploy/make-certs.sh); else $SALAMANDER_TLS; none: off
  std::string metrics = ""; ///< "": runs/JOB/metrics.jsonl; "none": off
  std::string supervisor_listen; ///< publish the cluster supervisor (console, --join)
  // infer
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  int64_t samples = 0; ///< 0: the whole test split (synthetic: 1024)
  // serve
  std::string listen = "127.0.0.1:8000";
  std::string name; ///< the model's name in URLs (default: its family, e.g. cnn)
  double max_body_mb = 64;
  int http_threads = 64;
  bool https = false;          ///< HTTPS with the --tls material (cert.pem, key.pem)
  std::string https_client_ca; ///< with https: clients must hold a certificate of this CA
};

/// `salamander federate`: federated learning (ELFISH and its baselines).
struct fed_cli {
  std::string strategy = "fedavg";
  int64_t rounds = 20;
  int64_t local_epochs = 1;
  double alpha = 0.5;
  int clients = 0;           ///< embedded: this many local nodes, one client each
  std::string client_shares; ///< embedded: relative speeds, e.g. 1,1,0.1 (EMULATED)
  std::string cluster;       ///< or the nodes of a cluster file
  double time_budget_s = 0;
  double fraction = 1;
  double deadline_s = 0;
  double round_timeout_s = 0;
  int buffer = 3;
  double min_keep = 0.0625;
  std::string model = "cnn";
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  uint64_t seed = 1;
  int64_t batch_size = 64;
  std::string optimizer = "sgd";
  double lr = 0.01;
  double momentum = 0.9;
  int64_t max_samples = 0;
  int64_t test_samples = 0;
  std::string checkpoint;
  bool resume = false;
  std::string save; ///< the final global model, as a checkpoint
  std::string metrics = "";
  std::string listen; ///< publish the cluster supervisor (console, node --join)
  std::string secret_file;
  std::string tls; ///< TLS material (deploy/make-certs.sh); else $SALAMANDER_TLS; none: off
  int threads = 1;
  double hang_timeout_s = 3.0;
};

/// `salamander split`: split learning (vanilla, SplitFed, AdaSplit).
struct split_cli {
  std::string method = "adasplit";
  int64_t cut = 2;
  int64_t rounds = 10;
  double alpha = 0.5;
  int clients = 0;
  std::string client_shares;
  std::string cluster;
  double time_budget_s = 0;
  double local_fraction = 0.3;
  double client_fraction = 0.6;
  double explore = 0.5;
  double mask_lr = 0.1;
  double mask_l1 = 1e-3;
  bool own_models = false; ///< adasplit: never average the client-side models
  double budget_mb = 1000;    ///< C3-style score: bytes budget (MB)
  double budget_gflop = 1e4;  ///< and client compute budget (GFLOP)
  double stall_s = 30;
  std::string model = "cnn";
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  uint64_t seed = 1;
  int64_t batch_size = 64;
  std::string optimizer = "sgd";
  double lr = 0.01;
  double momentum = 0.9;
  int64_t max_samples = 0;
  int64_t test_samples = 0;
  std::string checkpoint;
  bool resume = false;
  std::string save;
  std::string metrics = "";
  std::string listen;
  std::string secret_file;
  std::string tls; ///< TLS material (deploy/make-certs.sh); else $SALAMANDER_TLS; none: off
  int threads = 1;
  double hang_timeout_s = 3.0;
};

struct eval_cli {
  std::string load;
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  int threads = 1;
};

struct describe_cli {
  std::string model = "cnn";
  bool json = false; ///< the description as JSON (what deploy/pytorch reads)
};

/// `salamander export`: a checkpoint's weights as a PyTorch state dict.
struct export_cli {
  std::string load;
  std::string output;
};

struct node_cli {
  std::string name;
  std::string listen = "127.0.0.1:0";
  int threads = 1;
  // emulation (tests, benchmarks, trying a cluster on one machine)
  double cpu_share = 1.0;
  int64_t mem_mb = 0;
  double link_mbps = 0;
  std::string capacity_trace;
  bool dilate = false;
  std::string cpus; ///< "0" or "1,2": pin to these host CPUs
  std::string join; ///< a running supervisor to offer this node to
  std::string secret_file;
  std::string tls; ///< TLS material (deploy/make-certs.sh); else $SALAMANDER_TLS; none: off
  std::string data_dir; ///< federated clients here train on this data
  /// Seconds a node whose supervisor went away keeps its stages and replicas
  /// for a supervisor to come back (README, "When the supervisor dies").
  double supervisor_grace_s = 120;
  bool leave_without_supervisor = false; ///< after the grace: exit, not idle
};

struct console_cli {
  std::string supervisor;
  std::string secret_file; ///< else $SALAMANDER_SECRET; none: look only
  std::string tls; ///< TLS material (deploy/make-certs.sh); else $SALAMANDER_TLS; none: off
  std::string exec;        ///< "cmd; cmd": run these and exit (scripts, tests)
  double timeout_s = 30;
};

struct plot_cli {
  std::string metrics;
  /// Further logs drawn beside it (federated runs: accuracy against time).
  std::vector<std::string> more;
  std::string output;
  std::string title;
  std::string script; ///< also write the gnuplot script (data inline) here
};

struct audit_cli {
  std::string metrics;
};

struct chaos_cli {
  std::string supervisor;
  std::string command;
  std::vector<std::string> args;
};

int run_train(const train_cli& cli);
int run_chaos(const chaos_cli& cli);
/// Pipeline training over actors: embedded (--stages) or a cluster file.
int run_pipeline(const train_cli& cli);
/// `supervisor --resume RUN_DIR`: the command line RUN_DIR/job.json
/// recorded, with `--resume RUN_DIR` (absolute) added, after changing to the
/// directory it ran in. `given` is this command's arguments (after the
/// program's name); anything but --resume after `supervisor` is refused.
/// Throws std::runtime_error saying why it cannot.
std::vector<std::string> resume_arguments(const std::string& run_dir,
                                          const std::vector<std::string>& given);
int run_node(const node_cli& cli);
int run_eval(const eval_cli& cli);
int run_export(const export_cli& cli);
int run_federate(const fed_cli& cli);
int run_split(const split_cli& cli);
int run_infer(const serve_cli& cli);
int run_serve(const serve_cli& cli);
/// runs/job-YYYYmmdd-HHMMSS-PID/metrics.jsonl under the working directory.
std::string default_metrics_path();
int run_describe(const describe_cli& cli);
/// A model's description as JSON (`describe --json`, the file beside an export).
std::string describe_json(const models::model_desc& desc);
int run_console(const console_cli& cli);
int run_plot(const plot_cli& cli);
int run_audit(const audit_cli& cli);

} // namespace salamander::apps
