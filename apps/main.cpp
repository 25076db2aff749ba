// salamander: train and serve deep networks across weak, mismatched,
// unreliable edge devices. This file only parses the command line; each
// subcommand lives in its own cmd_*.cpp.
#include "apps/commands.hpp"
#include "actors/train/stream.hpp"
#include "apps/runtime_env.hpp"
#include "models/torchscript.hpp"

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>

using namespace salamander::apps;

namespace {

const char* model_help =
    "model spec: mlp, cnn, resnet or vit, with options after a colon, e.g. "
    "cnn, mlp:hidden=512, resnet:width=16,blocks=2, vit:size=tiny, "
    "vit:size=base,image=224,patch=16,channels=3,classes=1000; or a PyTorch model: "
    "torchscript:FILE (a scripted nn.Sequential, its children the layers; the same "
    "path on every node)";

const char* tls_help =
    "TLS on every link: a directory from deploy/make-certs.sh (ca.pem, cert.pem, "
    "key.pem); peers must hold a certificate of the same CA (default: $SALAMANDER_TLS; "
    "none: plaintext)";

// Numeric ranges in words. CLI11's own (PositiveNumber, Range) print
// "Value 0 not in range 0.000000 to 1797693...": these say "must be at
// least 1, got 0", and main() puts the option's name in front.

std::string number_text(double x) {
  return fmt::format("{}", x);
}

std::string range_desc(double min, double max, bool above) {
  auto low = (above ? ">" : ">=") + number_text(min);
  return max < std::numeric_limits<double>::max() ? low + ",<=" + number_text(max) : low;
}

/// A whole number of type T, at least `min`.
template <class T> CLI::Validator whole(int64_t min) {
  auto max = static_cast<long double>(std::numeric_limits<T>::max());
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        size_t sign = !text.empty() && text[0] == '-' ? 1 : 0;
        if (text.size() == sign ||
            text.find_first_not_of("0123456789", sign) != std::string::npos) {
          return "must be a whole number, got '" + text + "'";
        }
        long double v = std::stold(text);
        if (v < static_cast<long double>(min)) {
          return "must be at least " + std::to_string(min) + ", got " + text;
        }
        if (v > max) {
          return fmt::format("must be at most {}, got {}", static_cast<uint64_t>(max),
                             text);
        }
        return "";
      },
      ">=" + std::to_string(min));
}

/// A number in [min, max] (or (min, max] with `above`); `unit` follows the bounds.
CLI::Validator number(double min, double max, bool above = false,
                      const std::string& unit = "") {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        size_t used = 0;
        double v = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || !std::isfinite(v)) {
          return "must be a number, got '" + text + "'";
        }
        auto u = unit.empty() ? std::string() : " " + unit;
        bool bounded = max < std::numeric_limits<double>::max();
        if ((above && v <= min) || (!above && v < min) || v > max) {
          if (bounded) {
            return fmt::format("must be {} {} and at most {}{}, got {}",
                               above ? "more than" : "at least", number_text(min),
                               number_text(max), u, text);
          }
          return fmt::format("must be {} {}{}, got {}", above ? "more than" : "at least",
                             number_text(min), u, text);
        }
        return "";
      },
      range_desc(min, max, above));
}

} // namespace

int main(int argc, char** argv) {
  salamander::models::enable_torchscript();
  CLI::App app{
      "salamander - fault-tolerant training and inference of deep networks across "
      "heterogeneous edge devices (CAF actors + LibTorch)"};
  app.require_subcommand(1);
  // global options may also come after the subcommand (salamander train --log-level
  // debug)
  app.fallthrough();
  app.set_version_flag("--version", std::string("salamander ") + SALAMANDER_VERSION);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();

  train_cli train;
  auto* t = app.add_subcommand("train",
                               "train a model; on one device unless a pipeline is asked");
  // The training options, shared by train and supervisor.
  auto add_training_options = [&](CLI::App* sub) {
    sub->add_option("--model", train.model, model_help)->capture_default_str();
    sub->add_option("--dataset", train.dataset, "fashion-mnist or synthetic")
        ->capture_default_str();
    sub->add_option(
        "--data", train.data_dir,
        "directory with the Fashion-MNIST IDX files (default: $SALAMANDER_DATA, then "
        "/usr/share/datasets/fashion-mnist)");
    sub->add_option("--epochs", train.epochs, "epochs to train")
        ->check(whole<int64_t>(1))
        ->capture_default_str();
    sub->add_option("--batch-size", train.batch_size,
                    "examples per batch (one optimizer step)")
        ->check(whole<int64_t>(1))
        ->capture_default_str();
    sub->add_option(
           "--micro-batches", train.micro_batches,
           "micro-batches per batch (gradients accumulate; same maths as a pipeline); "
           "default 1 on one device, 4 in a pipeline")
        ->check(whole<int64_t>(1));
    sub->add_option("--max-batches", train.max_batches,
                    "stop each epoch after N batches (0: all)")
        ->check(whole<int64_t>(0))
        ->capture_default_str();
    sub->add_option("--optimizer", train.optimizer, "adam or sgd")
        ->check(CLI::IsMember({"adam", "sgd"}))
        ->capture_default_str();
    sub->add_option("--lr", train.lr, "learning rate")
        ->check(number(0, std::numeric_limits<double>::max(), true))
        ->capture_default_str();
    sub->add_option("--seed", train.seed, "seed for weights and data order")
        ->check(whole<uint64_t>(0))
        ->capture_default_str();
    sub->add_option(
           "--threads", train.threads,
           "compute threads for this process (0: LibTorch's default; on 2 cores one "
           "thread trains the CNN fastest)")
        ->check(whole<int>(0))
        ->capture_default_str();
    sub->add_option("--save", train.save, "write a checkpoint here when training ends");
  };
  add_training_options(t);
  auto add_pipeline_options = [&](CLI::App* sub) {
    sub->add_option(
           "--schedule", train.schedule,
           "pipeline schedule: gpipe (fill-drain) or 1f1b (fewer activations held)")
        ->check(CLI::IsMember({"gpipe", "1f1b"}))
        ->capture_default_str();
    sub->add_option("--balance", train.balance,
                    "layers per stage, e.g. 1,1,2 (default: an even split)");
    sub->add_option("--window", train.window, "batches in flight in the pipeline")
        ->check(whole<int>(1))
        ->capture_default_str();
    sub->add_option(
           "--plan", train.plan,
           "auto: profile every node and plan by capacity, as a pipeline or data "
           "parallel, whichever is predicted faster (slow nodes may be left out); "
           "pipeline: the same, pipelines only; even: an even split, stage i on node "
           "i; dp: data parallel, every node holds the model and runs an even share "
           "of each batch's micro-batches")
        ->check(CLI::IsMember({"auto", "pipeline", "even", "dp"}))
        ->capture_default_str();
    sub->add_option(
           "--replan-gain", train.replan_gain,
           "re-plan live when profiles predict at least this throughput gain (0: never)")
        ->check(number(0, std::numeric_limits<double>::max()))
        ->capture_default_str();
    sub->add_option(
           "--replan-at", train.replan_at,
           "force a re-plan after this many batches (with --replan-balance, or by the "
           "planner)")
        ->check(whole<int64_t>(0));
    sub->add_option("--replan-balance", train.replan_balance,
                    "layers per stage for the forced re-plan, e.g. 1,1,2");
    sub->add_option(
           "--replicate-every", train.replicate_every,
           "replicate every stage's weights (chain + global) every K batches; 0: "
           "never (recovery then restarts from the seed)")
        ->check(whole<uint32_t>(0))
        ->capture_default_str();
    sub->add_option(
           "--hang-timeout", train.hang_timeout_s,
           "seconds without a heartbeat after which a node counts as hung or cut off "
           "and is recovered from (nodes send one every second)")
        ->check(number(1.5, 3600.0, false, "seconds"))
        ->capture_default_str();
    sub->add_option(
           "--pause-timeout", train.pause_timeout_s,
           "seconds a job paused for too little capacity (every node lost, or the "
           "survivors cannot hold the model) waits for nodes to come back or join; "
           "then it ends, failed, saving (with --save) the newest complete weights it "
           "keeps; 0: wait for ever")
        ->check(number(0.0, 86400.0, false, "seconds"))
        ->capture_default_str();
    sub->add_option("--global-every", train.global_every,
                    "of the replications, every G-th also goes to the central (global) "
                    "holder; the others only along the chain (FTPipeHD)")
        ->check(whole<uint32_t>(1))
        ->capture_default_str();
    sub->add_option(
           "--recovery-policy", train.recovery_policy,
           "exact: roll back to a replicated version and replay (equals a "
           "fault-free run); fast: survivors keep their newer weights, lost layers "
           "come back from their newest replica, nothing replays (not exact)")
        ->check(CLI::IsMember({"exact", "fast"}))
        ->capture_default_str();
    sub->add_option(
        "--metrics", train.metrics,
        "JSON-lines metrics log of the job (default: "
        "runs/job-DATE-TIME-PID/metrics.jsonl; none: off); see README, Metrics");
    sub->add_option(
        "--secret-file", train.secret_file,
        "cluster secret the nodes must prove (default: $SALAMANDER_SECRET; none: "
        "an open cluster)");
  sub->add_option("--tls", train.tls, tls_help);
    sub->add_option(
           "--stream", train.stream,
           "continual learning: train on samples as they arrive, batch after batch "
           "in arrival order, instead of a data set. replay:RATE replays "
           "Fashion-MNIST's training split at RATE samples/s (EMULATED arrival); "
           "file:PATH reads a file as it grows; tcp:HOST:PORT takes a producer's "
           "connection. Records: a label byte and 784 pixel bytes. An epoch is "
           "--max-batches batches of the stream (default 100), evaluated at its end")
        ->check([](const std::string& s) {
          try {
            salamander::actors::check_stream_source(s);
            return std::string();
          } catch (const std::invalid_argument& e) {
            return std::string(e.what());
          }
        });
    sub->add_option("--stream-log", train.stream_log,
                    "where the stream's batches are logged for exact replay after a "
                    "failure (default: beside the metrics log; a restarted job given the "
                    "same directory carries on from its last batch)");
    sub->add_option("--stream-keep", train.stream_keep,
                    "batches the stream log keeps behind the newest committed one "
                    "(raised to what a rollback can need)")
        ->check(whole<uint64_t>(1))
        ->capture_default_str();
    sub->add_option("--stream-idle-end", train.stream_idle_end_s,
                    "file and tcp streams end after this many seconds without data (0: "
                    "never; the job then runs its --epochs)")
        ->check(number(0.0, 1e7, false, "seconds"))
        ->capture_default_str();
  };
  t->add_option("--stages", train.stages,
                "run a pipeline of N stages on N local nodes in this process (embedded "
                "mode); without it, train on one device")
      ->check(whole<int>(1));
  t->add_option("--cluster", train.cluster,
                "run a pipeline on the nodes of this cluster file (see deploy/)");
  add_pipeline_options(t);

  auto* sup = app.add_subcommand(
      "supervisor",
      "run a pipeline training job on the nodes of a cluster file; takes every "
      "train option");
  sup->add_option("--cluster", train.cluster,
                  "cluster file (TOML, [[node]] name + address)")
      ->required()
      ->check(CLI::ExistingFile);
  add_training_options(sup);
  sup->add_option(
      "--resume", train.resume,
      "carry on the job whose supervisor died, from its run directory (where its "
      "metrics log is: runs/job-...); alone, as the job's options are those it "
      "recorded there; the nodes must have kept waiting (node --supervisor-grace). "
      "The same command line again, in the same directory, also carries on a job "
      "whose supervisor died (not one that finished, failed or was stopped)");
  sup->add_option(
      "--listen", train.listen,
      "HOST:PORT where `salamander console` attaches and nodes started later join the "
      "running job (node --join)");
  add_pipeline_options(sup);

  node_cli node;
  auto* nd = app.add_subcommand(
      "node", "run one device's node: listens for a supervisor and runs the stages it is "
              "given; SIGTERM leaves cleanly");
  nd->add_option("--name", node.name, "this device's name, as in the cluster file")
      ->required();
  nd->add_option("--listen", node.listen,
                 "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  nd->add_option("--threads", node.threads, "compute threads on this device")
      ->check(whole<int>(1))
      ->capture_default_str();
  nd->add_option("--cpu-share", node.cpu_share,
                 "EMULATION: run at this share of one core (cgroup quota where writable, "
                 "else compute-time dilation)")
      ->check(number(0.001, 1.0));
  nd->add_option(
        "--mem-mb", node.mem_mb,
        "EMULATION: memory cap; the planner plans with it and stages that would not "
        "fit are refused")
      ->check(whole<int64_t>(0));
  nd->add_option("--link-mbps", node.link_mbps,
                 "EMULATION: link rate in Mbit/s; sends are spaced to it")
      ->check(number(0, std::numeric_limits<double>::max(), false, "Mbit/s"));
  nd->add_option(
      "--capacity-trace", node.capacity_trace,
      "EMULATION: SECONDS:FACTOR,... e.g. 30:0.2 runs at 0.2 of the share from 30 s "
      "on (throttling)");
  nd->add_option(
      "--join", node.join,
      "offer this node to the supervisor listening at HOST:PORT (a new device, or "
      "one back after a failure); it is planned in at the next flush. If that "
      "supervisor dies, the node offers itself there again every 2 s for "
      "--supervisor-grace, for a resumed one");
  nd->add_option(
      "--cpus", node.cpus,
      "EMULATION: pin this node to these host CPUs, e.g. 0 or 1,2 (devices emulated "
      "on one host then do not take each other's cores)");
  nd->add_flag(
      "--dilate", node.dilate,
      "EMULATION: use compute-time dilation even where a cgroup quota is possible");
  nd->add_option("--data", node.data_dir,
                 "federated learning: clients on this node train on the Fashion-MNIST "
                 "training split in this directory (this device's own data) instead of "
                 "a shard of the experiment's");
  nd->add_option(
      "--secret-file", node.secret_file,
      "cluster secret to prove to the supervisor (default: $SALAMANDER_SECRET); "
      "a supervisor that cannot prove it gets no work from this node");
  nd->add_option("--tls", node.tls, tls_help);
  nd->add_option(
        "--supervisor-grace", node.supervisor_grace_s,
        "seconds this node keeps its stages and replicas after its supervisor went "
        "away, for it (or `supervisor --resume`) to come back; then it drops them")
      ->check(number(0, 86400, false, "seconds"))
      ->capture_default_str();
  nd->add_flag("--leave-without-supervisor", node.leave_without_supervisor,
               "when the grace is over with no supervisor back, leave (exit 0) "
               "instead of waiting idle for the next one");

  eval_cli eval;
  auto* e = app.add_subcommand("eval", "report the test accuracy of a checkpoint");
  e->add_option("--load", eval.load, "checkpoint written by train --save")->required();
  e->add_option("--dataset", eval.dataset, "fashion-mnist or synthetic")
      ->capture_default_str();
  e->add_option("--data", eval.data_dir, "directory with the Fashion-MNIST IDX files");
  e->add_option("--threads", eval.threads, "compute threads (0: LibTorch's default)")
      ->check(whole<int>(0))
      ->capture_default_str();

  export_cli exp;
  auto* xp = app.add_subcommand(
      "export",
      "write a checkpoint's weights as a PyTorch state dict (torch.load reads it) and "
      "the model's description beside it as JSON; deploy/pytorch/salamander_torch.py "
      "builds the equivalent torch.nn module");
  xp->add_option("--load", exp.load, "checkpoint written by train --save, federate or split")
      ->required()
      ->check(CLI::ExistingFile);
  xp->add_option("-o,--output", exp.output,
                 "the state dict to write (e.g. model.pt); its description goes to "
                 "OUTPUT.json")
      ->required();

  // ---- serving: infer (a data set) and serve (HTTP)
  serve_cli inf, srv;
  auto serving_options = [&](CLI::App* c, serve_cli& o) {
    c->add_option("--load", o.load, "checkpoint written by train --save (default: the "
                                    "model's seed weights)");
    c->add_option("--model", o.model, std::string("without --load: ") + model_help)
        ->capture_default_str();
    c->add_option("--seed", o.seed, "without --load: the weights' seed")
        ->capture_default_str();
    c->add_option("--stages", o.stages,
                  "embedded: N local nodes in this process (the planner picks the cuts)")
        ->check(whole<int>(1));
    c->add_option("--cluster", o.cluster, "TOML file listing the node processes")
        ->check(CLI::ExistingFile);
    c->add_option("--plan", o.plan,
                  "auto: profile every node and plan (compute, memory, bandwidth); even: "
                  "an even split")
        ->capture_default_str();
    c->add_option("--balance", o.balance, "layers per stage, e.g. 2,3,3 (the user's plan)");
    c->add_option("--max-batch", o.max_batch,
                  "rows per micro-batch at most: dynamic batching merges requests up to it")
        ->check(whole<int64_t>(1))
        ->capture_default_str();
    c->add_option("--batch-delay-ms", o.batch_delay_ms,
                  "how long a request may wait for others to fill its micro-batch")
        ->check(number(0, 10000, false, "ms"))
        ->capture_default_str();
    c->add_flag("--no-batching", o.no_batching,
                "every request is its own micro-batch (never merged)");
    c->add_option("--in-flight", o.in_flight,
                  "micro-batches in the pipeline at once (0: two per stage)")
        ->check(whole<int>(0))
        ->capture_default_str();
    c->add_option("--max-queue", o.max_queue,
                  "requests waiting at most; more are refused (HTTP 503, Retry-After)")
        ->check(whole<int64_t>(1))
        ->capture_default_str();
    c->add_option("--request-timeout", o.request_timeout_s,
                  "seconds before a request not answered fails (HTTP 504)")
        ->check(number(0, 86400, true, "seconds"))
        ->capture_default_str();
    c->add_option("--hang-timeout", o.hang_timeout_s,
                  "seconds of silence after which a node counts as lost (nodes beat "
                  "every second)")
        ->check(number(1.5, 3600, false, "seconds"))
        ->capture_default_str();
    c->add_option("--threads", o.threads, "compute threads per node (0: LibTorch's default)")
        ->check(whole<int>(0))
        ->capture_default_str();
    c->add_option("--secret-file", o.secret_file,
                  "cluster secret the nodes must prove (default: $SALAMANDER_SECRET)");
    c->add_option("--tls", o.tls, tls_help);
    c->add_option("--metrics", o.metrics,
                  "JSON-lines log (default runs/job-.../metrics.jsonl; none: off)");
    c->add_option("--supervisor-listen", o.supervisor_listen,
                  "HOST:PORT to publish the supervisor on (console, node --join)");
  };
  auto* in = app.add_subcommand(
      "infer", "run a data set through a forward-only pipeline (EdgePipe): throughput, "
               "latency and, with labels, accuracy");
  serving_options(in, inf);
  in->add_option("--dataset", inf.dataset, "fashion-mnist (its test split) or synthetic")
      ->capture_default_str();
  in->add_option("--data", inf.data_dir, "directory with the Fashion-MNIST IDX files");
  in->add_option("--samples", inf.samples,
                 "examples to run (0: the whole test split; with synthetic, N > 0 draws N "
                 "fresh examples)")
      ->check(whole<int64_t>(0))
      ->capture_default_str();
  auto* sv = app.add_subcommand(
      "serve", "serve a model over HTTP (Open Inference Protocol / KServe v2: "
               "/v2/models/NAME/infer, health, metadata, /metrics) through a pipeline "
               "that survives node failures");
  serving_options(sv, srv);
  sv->add_option("--listen", srv.listen,
                 "HOST:PORT for HTTP (loopback unless told otherwise; port 0: any)")
      ->capture_default_str();
  sv->add_option("--name", srv.name, "the model's name in URLs (default: its family, e.g. cnn)");
  sv->add_option("--max-body-mb", srv.max_body_mb, "largest request body (HTTP 413 above)")
      ->check(number(0, 4096, true, "MB"))
      ->capture_default_str();
  sv->add_option("--http-threads", srv.http_threads,
                 "requests handled at once (each waits for its answer)")
      ->check(whole<int>(1))
      ->capture_default_str();
  sv->add_flag("--https", srv.https,
               "serve HTTPS (TLS 1.2+) with this process's --tls material (cert.pem, "
               "key.pem; deploy/make-certs.sh --host NAME puts the host name clients use "
               "in the certificate)");
  sv->add_option("--https-client-ca", srv.https_client_ca,
                 "with --https: clients must present a certificate signed by this CA "
                 "(PEM file, e.g. certs/ca.pem); default: no client certificate asked")
      ->check(CLI::ExistingFile);

  // ---- federated learning
  fed_cli fed;
  auto* fd = app.add_subcommand(
      "federate",
      "federated learning: every node trains on its own data and a strategy merges "
      "their updates (fedavg, deadline, elfish, heterofl, fedrolex, fedbuff)");
  fd->add_option("--strategy", fed.strategy,
                 "fedavg (wait for all), deadline (drop late updates), elfish (stragglers "
                 "soft-train a rotating part of each layer), heterofl, fedrolex, fedbuff "
                 "(asynchronous)")
      ->capture_default_str();
  fd->add_option("--rounds", fed.rounds, "rounds at most (fedbuff: server steps)")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  fd->add_option("--local-epochs", fed.local_epochs, "epochs each client trains per round")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  fd->add_option("--alpha", fed.alpha,
                 "Dirichlet(alpha) label skew of the clients' shards; 0: IID shards")
      ->check(number(0, 1e6, false, ""))
      ->capture_default_str();
  fd->add_option("--clients", fed.clients, "embedded: N local nodes, one client each")
      ->check(whole<int>(1));
  fd->add_option("--client-shares", fed.client_shares,
                 "embedded: EMULATED relative speed of each client, e.g. "
                 "1,1,1,1,1,1,1,0.1,0.1,0.1 (scaled to fit this host's cores)");
  fd->add_option("--cluster", fed.cluster, "TOML file listing the node processes")
      ->check(CLI::ExistingFile);
  fd->add_option("--time-budget", fed.time_budget_s,
                 "stop after this many seconds of training (0: only --rounds)")
      ->check(number(0, 1e7, false, "seconds"))
      ->capture_default_str();
  fd->add_option("--fraction", fed.fraction, "of the clients, the part drawn for each round")
      ->check(number(0, 1, true, ""))
      ->capture_default_str();
  fd->add_option("--deadline", fed.deadline_s,
                 "deadline strategy: seconds per round (0: 1.25 x the median client's "
                 "round)")
      ->check(number(0, 1e6, false, "seconds"))
      ->capture_default_str();
  fd->add_option("--round-timeout", fed.round_timeout_s,
                 "no round waits longer (0: 3 x the slowest predicted client + 30 s)")
      ->check(number(0, 1e6, false, "seconds"))
      ->capture_default_str();
  fd->add_option("--buffer", fed.buffer, "fedbuff: updates per server step")
      ->check(whole<int>(1))
      ->capture_default_str();
  fd->add_option("--min-keep", fed.min_keep,
                 "the smallest part of each layer a straggler trains (elfish, heterofl, "
                 "fedrolex)")
      ->check(number(0, 1, true, ""))
      ->capture_default_str();
  fd->add_option("--model", fed.model, "mlp or cnn (dense and conv layers can be sliced)")
      ->capture_default_str();
  fd->add_option("--dataset", fed.dataset, "fashion-mnist or synthetic")->capture_default_str();
  fd->add_option("--data", fed.data_dir,
                 "directory with the Fashion-MNIST IDX files (the supervisor's test split; "
                 "embedded clients' training split)");
  fd->add_option("--seed", fed.seed, "initial weights, shards, masks")->capture_default_str();
  fd->add_option("--batch-size", fed.batch_size, "local batch size")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  fd->add_option("--optimizer", fed.optimizer, "sgd or adam (fresh each round)")
      ->capture_default_str();
  fd->add_option("--lr", fed.lr, "local learning rate")
      ->check(number(0, 10, true, ""))
      ->capture_default_str();
  fd->add_option("--momentum", fed.momentum, "sgd momentum")->capture_default_str();
  fd->add_option("--max-samples", fed.max_samples,
                 "each client trains on at most this many of its examples (0: all)")
      ->check(whole<int64_t>(0))
      ->capture_default_str();
  fd->add_option("--test-samples", fed.test_samples,
                 "evaluate on this many test examples (0: the whole test split)")
      ->check(whole<int64_t>(0))
      ->capture_default_str();
  fd->add_option("--checkpoint", fed.checkpoint,
                 "write the global model and its round here after every round");
  fd->add_flag("--resume", fed.resume, "carry on from --checkpoint");
  fd->add_option("--save", fed.save, "write the final global model here (a checkpoint)");
  fd->add_option("--metrics", fed.metrics,
                 "JSON-lines log (default runs/job-.../metrics.jsonl; none: off)");
  fd->add_option("--listen", fed.listen,
                 "HOST:PORT to publish the supervisor on (console, node --join)");
  fd->add_option("--secret-file", fed.secret_file,
                 "cluster secret the nodes must prove (default: $SALAMANDER_SECRET)");
  fd->add_option("--tls", fed.tls, tls_help);
  fd->add_option("--threads", fed.threads, "compute threads (0: LibTorch's default)")
      ->check(whole<int>(0))
      ->capture_default_str();
  fd->add_option("--hang-timeout", fed.hang_timeout_s,
                 "seconds of silence after which a node counts as lost")
      ->check(number(1.5, 3600, false, "seconds"))
      ->capture_default_str();

  // ---- split learning
  split_cli spl;
  auto* sp = app.add_subcommand(
      "split",
      "split learning: clients hold the layers before a cut and their own data, the "
      "server the layers after it (vanilla, splitfed, adasplit)");
  sp->add_option("--method", spl.method,
                 "vanilla (clients take turns, gradients back every batch), splitfed "
                 "(SplitFed v2: parallel clients, one server model, client models "
                 "averaged), adasplit (local loss, then sparse sends, no gradients back, "
                 "a server mask per client)")
      ->capture_default_str();
  sp->add_option("--cut", spl.cut,
                 "clients hold layers [0, CUT) of the model, the server the rest "
                 "(`salamander describe MODEL` lists them)")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  sp->add_option("--rounds", spl.rounds, "rounds: one local epoch per client each")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  sp->add_option("--clients", spl.clients, "embedded: N local nodes, one client each")
      ->check(whole<int>(1));
  sp->add_option("--client-shares", spl.client_shares,
                 "embedded: EMULATED relative speed of each client, e.g. 1,1,0.5,0.5,0.25");
  sp->add_option("--cluster", spl.cluster, "TOML file listing the node processes")
      ->check(CLI::ExistingFile);
  sp->add_option("--alpha", spl.alpha,
                 "Dirichlet(alpha) label skew of the clients' shards; 0: IID shards")
      ->check(number(0, 1e6, false, ""))
      ->capture_default_str();
  sp->add_option("--time-budget", spl.time_budget_s,
                 "stop after this many seconds of training (0: only --rounds)")
      ->check(number(0, 1e7, false, "seconds"))
      ->capture_default_str();
  sp->add_option("--local-fraction", spl.local_fraction,
                 "adasplit: the share of the rounds in the local phase (nothing sent)")
      ->check(number(0, 1, false, ""))
      ->capture_default_str();
  sp->add_option("--client-fraction", spl.client_fraction,
                 "adasplit: the share of the clients the orchestrator picks to send, per "
                 "iteration of the global phase")
      ->check(number(0, 1, true, ""))
      ->capture_default_str();
  sp->add_option("--explore", spl.explore,
                 "adasplit: the orchestrator's exploration weight (0: highest loss only)")
      ->check(number(0, 100, false, ""))
      ->capture_default_str();
  sp->add_option("--mask-lr", spl.mask_lr, "adasplit: learning rate of the server masks")
      ->check(number(0, 100, false, ""))
      ->capture_default_str();
  sp->add_option("--mask-l1", spl.mask_l1,
                 "adasplit: L1 pull of the server masks towards 0, per element and step")
      ->check(number(0, 100, false, ""))
      ->capture_default_str();
  sp->add_flag("--own-models", spl.own_models,
              "adasplit: each client keeps its own client-side model (never averaged; by "
              "default they are averaged after each global-phase round)");
  sp->add_option("--budget-mb", spl.budget_mb,
                 "C3-style score: the bytes budget (each budget's worth halves the score)")
      ->check(number(0, 1e12, true, "MB"))
      ->capture_default_str();
  sp->add_option("--budget-gflop", spl.budget_gflop, "C3-style score: the client compute budget")
      ->check(number(0, 1e15, true, "GFLOP"))
      ->capture_default_str();
  sp->add_option("--stall", spl.stall_s,
                 "a client silent this many seconds in its round is out of it (hung)")
      ->check(number(0, 1e6, true, "seconds"))
      ->capture_default_str();
  sp->add_option("--model", spl.model, model_help)->capture_default_str();
  sp->add_option("--dataset", spl.dataset, "fashion-mnist or synthetic")->capture_default_str();
  sp->add_option("--data", spl.data_dir,
                 "directory with the Fashion-MNIST IDX files (the supervisor's test split; "
                 "embedded clients' training split)");
  sp->add_option("--seed", spl.seed, "initial weights, shards, example order")
      ->capture_default_str();
  sp->add_option("--batch-size", spl.batch_size, "client batch size")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  sp->add_option("--optimizer", spl.optimizer, "sgd or adam")->capture_default_str();
  sp->add_option("--lr", spl.lr, "learning rate (clients and server)")
      ->check(number(0, 10, true, ""))
      ->capture_default_str();
  sp->add_option("--momentum", spl.momentum, "sgd momentum")->capture_default_str();
  sp->add_option("--max-samples", spl.max_samples,
                 "each client trains on at most this many of its examples (0: all)")
      ->check(whole<int64_t>(0))
      ->capture_default_str();
  sp->add_option("--test-samples", spl.test_samples,
                 "evaluate on this many test examples (0: the whole test split)")
      ->check(whole<int64_t>(0))
      ->capture_default_str();
  sp->add_option("--checkpoint", spl.checkpoint,
                 "write the server, every client-side model and the counters here after "
                 "every round");
  sp->add_flag("--resume", spl.resume, "carry on from --checkpoint");
  sp->add_option("--save", spl.save,
                 "write the final model (client 0's side and the server's) here");
  sp->add_option("--metrics", spl.metrics,
                 "JSON-lines log (default runs/job-.../metrics.jsonl; none: off)");
  sp->add_option("--listen", spl.listen,
                 "HOST:PORT to publish the supervisor on (console, node --join)");
  sp->add_option("--secret-file", spl.secret_file,
                 "cluster secret the nodes must prove (default: $SALAMANDER_SECRET)");
  sp->add_option("--tls", spl.tls, tls_help);
  sp->add_option("--threads", spl.threads, "compute threads (0: LibTorch's default)")
      ->check(whole<int>(0))
      ->capture_default_str();
  sp->add_option("--hang-timeout", spl.hang_timeout_s,
                 "seconds of silence after which a node counts as lost")
      ->check(number(1.5, 3600, false, "seconds"))
      ->capture_default_str();

  describe_cli describe;
  auto* d = app.add_subcommand(
      "describe",
      "print a model's per-layer parameters, activations and FLOPs (no weights "
      "are allocated, so ViT-Huge works too)");
  d->add_option("model", describe.model, model_help)->capture_default_str();
  d->add_flag("--json", describe.json,
              "print the description as JSON: every layer's name, kind, shapes, costs and "
              "hyper-parameters (deploy/pytorch/salamander_torch.py builds the equivalent "
              "torch.nn module from it)");

  chaos_cli chaos;
  auto* ch = app.add_subcommand(
      "chaos",
      "drive failures by hand against a running job whose supervisor was started "
      "with --listen: status | kill-stage N | kill-node NAME | slow-node NAME FACTOR");
  ch->add_option("--supervisor", chaos.supervisor, "HOST:PORT of the supervisor")
      ->required();
  ch->add_option("command", chaos.command, "status, kill-stage, kill-node or slow-node")
      ->required();
  ch->add_option("args", chaos.args, "the command's arguments");

  console_cli console;
  auto* co = app.add_subcommand(
      "console",
      "attach to a running job (supervisor --listen HOST:PORT): status, nodes, plan, "
      "metrics, kill, slow, repartition, replicate, checkpoint save, pause, resume; "
      "interactive, or --exec 'cmd; cmd' for scripts");
  co->add_option("supervisor", console.supervisor, "HOST:PORT of the supervisor")
      ->required();
  co->add_option(
      "--exec,-e", console.exec,
      "run these commands (separated by ';') and exit; exit code 1 if one failed, "
      "2 if one does not parse (then none runs)");
  co->add_option(
      "--secret-file", console.secret_file,
      "cluster secret, to be allowed to change the job (default: "
      "$SALAMANDER_SECRET; without it only status, nodes, plan and metrics work on "
      "a job that has a secret)");
  co->add_option("--tls", console.tls, tls_help);
  co->add_option("--timeout", console.timeout_s, "seconds to wait for each answer")
      ->check(number(0, 86400, true, "seconds"))
      ->capture_default_str();

  plot_cli plot;
  auto* pl = app.add_subcommand(
      "plot", "draw throughput and loss over time from a metrics log, with failures, "
              "recoveries, re-plans and joins marked; for federated runs, accuracy "
              "against training time of one or several runs; for split-learning runs, "
              "accuracy against the bytes across the cut (needs gnuplot)");
  std::vector<std::string> plot_files;
  pl->add_option("metrics", plot_files,
                 "the job's metrics.jsonl; several federated (or split-learning) runs' logs "
                 "are drawn together")
      ->required()
      ->check(CLI::ExistingFile);
  pl->add_option("-o,--output", plot.output, "PNG file to write")->required();
  pl->add_option("--title", plot.title,
                 "title (default: model, nodes, and the accuracy or why the job failed)");
  pl->add_option(
      "--script", plot.script,
      "also write the gnuplot script here (its data inline), to adjust and re-run");

  audit_cli audit;
  auto* au = app.add_subcommand(
      "audit",
      "check from a metrics log that the final weights saw every batch exactly once");
  au->add_option("metrics", audit.metrics, "the job's metrics.jsonl")
      ->required()
      ->check(CLI::ExistingFile);

  // `supervisor --resume RUN_DIR`: the command line the job recorded there
  std::vector<std::string> args(argv + 1, argv + argc);
  auto sub_at = std::find(args.begin(), args.end(), std::string("supervisor"));
  for (auto it = sub_at; it != args.end(); ++it) {
    std::string dir;
    if (*it == "--resume" && std::next(it) != args.end()) {
      dir = *std::next(it);
    } else if (it->rfind("--resume=", 0) == 0) {
      dir = it->substr(9);
    }
    if (!dir.empty()) {
      try {
        args = resume_arguments(dir, args);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
      }
      break;
    }
  }
  train.argv = args;
  std::vector<char*> parse_argv{argv[0]};
  for (auto& a : args) {
    parse_argv.push_back(a.data());
  }
  try {
    app.parse(static_cast<int>(parse_argv.size()), parse_argv.data());
  } catch (const CLI::ValidationError& e) {
    // "--epochs: must be at least 1, got 0" -> "--epochs must be at least 1, got 0"
    std::string what = e.what();
    if (auto colon = what.find(": must "); colon != std::string::npos) {
      what.erase(colon, 1);
    }
    std::fprintf(stderr, "error: %s\n", what.c_str());
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  setup_logging(log_level);

  try {
    // A pipeline with one micro-batch per batch idles all but one stage.
    bool micro_given = t->count("--micro-batches") + sup->count("--micro-batches") > 0;
    if (!micro_given && (*sup || train.stages > 0 || !train.cluster.empty())) {
      train.micro_batches = 4;
    }
    if (*t) {
      if (train.stages > 0 || !train.cluster.empty()) {
        return run_pipeline(train);
      }
      if (!train.stream.empty()) {
        throw std::invalid_argument(
            "--stream trains a pipeline: give --stages N (1 for one device) or run "
            "`salamander supervisor --cluster FILE`");
      }
      return run_train(train);
    }
    if (*sup) {
      return run_pipeline(train);
    }
    if (*nd) {
      return run_node(node);
    }
    if (*ch) {
      return run_chaos(chaos);
    }
    if (*co) {
      return run_console(console);
    }
    if (*pl) {
      plot.metrics = plot_files.front();
      plot.more.assign(plot_files.begin() + 1, plot_files.end());
      return run_plot(plot);
    }
    if (*au) {
      return run_audit(audit);
    }
    if (*e) {
      return run_eval(eval);
    }
    if (*xp) {
      return run_export(exp);
    }
    if (*in) {
      return run_infer(inf);
    }
    if (*sv) {
      return run_serve(srv);
    }
    if (*fd) {
      return run_federate(fed);
    }
    if (*sp) {
      return run_split(spl);
    }
    if (*d) {
      return run_describe(describe);
    }
  } catch (const c10::Error& ex) {
    // a LibTorch error the checks before did not foresee: its message, not its stack
    logger("salamander")->error("{}", ex.what_without_backtrace());
    return 1;
  } catch (const std::exception& ex) {
    logger("salamander")->error("{}", ex.what());
    return 1;
  }
  return 0;
}
