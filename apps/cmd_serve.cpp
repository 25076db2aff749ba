// `salamander infer` (a data set through a forward-only pipeline: throughput
// and accuracy) and `salamander serve` (the same pipeline behind an HTTP
// endpoint speaking the Open Inference Protocol, KServe v2, as Triton and
// KServe do). Both run the serving job (actors/serve/) over local nodes
// (--stages N) or the nodes of a cluster file.
#include "actors/cluster/auth.hpp"
#include "actors/cluster/cluster_file.hpp"
#include "actors/node/network.hpp"
#include "actors/node/system.hpp"
#include "actors/node/tls.hpp"
#include "actors/serve/inference.hpp"
#include "actors/serve/served_load.hpp"
#include "apps/cli_options.hpp"
#include "apps/commands.hpp"
#include "apps/dashboard/dashboard_cli.hpp"
#include "apps/grpc_front.hpp"
#include "apps/http_front.hpp"
#include "apps/preflight.hpp"
#include "apps/progress.hpp"
#include "apps/runtime_env.hpp"
#include "apps/status_text.hpp"
#include "messages/checkpoint.hpp"
#include "models/data.hpp"

#include <caf/io/middleman.hpp>
#include <fmt/format.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <thread>

namespace salamander::apps {

namespace {

/// `salamander infer` and `salamander serve`: a forward-only pipeline.
struct serve_cli {
  /// checkpoints from train --save, as [NAME=]PATH (none: the seed's weights)
  std::vector<std::string> loads;
  std::string repository;    ///< serve: Triton's NAME/VERSION/model.ckpt layout
  std::string model = "cnn"; ///< without --load
  uint64_t seed = 1;
  int stages = 0;            ///< embedded: this many local nodes
  std::string cluster;       ///< or the nodes of a cluster file
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
  std::string tls;          ///< deploy/make-certs.sh's; else $SALAMANDER_TLS; none: off
  std::string metrics = ""; ///< "": runs/JOB/metrics.jsonl; "none": off
  std::string supervisor_listen; ///< publish the cluster supervisor (console, --join)
  // infer
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  int64_t samples = 0; ///< 0: the whole test split (synthetic: 1024)
  // serve
  std::string listen = "127.0.0.1:8000";
  std::string grpc_listen; ///< "" : no gRPC endpoint
  std::string name; ///< the model's name in URLs (default: its family, e.g. cnn)
  double max_body_mb = 64;
  int http_threads = 64;
  bool https = false;          ///< HTTPS with the --tls material (cert.pem, key.pem)
  std::string https_client_ca; ///< with https: clients must hold a certificate of this CA
  dashboard_cli dashboard;     ///< --dashboard: the live page (HTTPS with --https)
};

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// What both commands share: the model and its weights, the job's settings,
// the nodes.
struct setup {
  models::model_desc desc;
  actors::serve_config cfg;
  std::vector<actors::cluster_node> listed;
  std::string secret; ///< the cluster secret, embedded too (the repository API's)
};

// One model's description and job settings: its checkpoint (`src.path`),
// else `cli.model` at `cli.seed`'s weights; the rest from the command line.
setup model_setup(const serve_cli& cli, const model_source& src) {
  auto log = logger("serve");
  setup out;
  auto& cfg = out.cfg;
  if (!src.path.empty()) {
    auto ckpt = messages::load_checkpoint(src.path);
    try {
      out.desc = models::describe(models::model_spec::parse(ckpt.snapshot.model));
    } catch (const std::exception& e) {
      throw std::invalid_argument("checkpoint " + src.path + ": " + e.what());
    }
    cfg.weights = std::make_shared<models::weight_snapshot>(std::move(ckpt.snapshot));
    cfg.seed = ckpt.seed;
    log->info("serving checkpoint {}: model {}, {} batches trained", src.path,
              out.desc.spec.canonical(), cfg.weights->version);
  } else {
    out.desc = models::describe(models::model_spec::parse(cli.model));
    cfg.seed = cli.seed;
    log->info("serving model {} with the weights of seed {} (no --load)",
              out.desc.spec.canonical(), cli.seed);
  }
  cfg.model = out.desc.spec.canonical();
  // each stage runs at least one layer: more local nodes than layers would
  // leave nodes idle without a word
  check_stage_count(cli.stages, out.desc);
  cfg.max_batch = cli.max_batch;
  cfg.batch_delay = std::chrono::milliseconds(static_cast<int64_t>(cli.batch_delay_ms));
  cfg.batching = !cli.no_batching;
  cfg.in_flight = cli.in_flight;
  cfg.balance = actors::parse_balance(cli.balance);
  cfg.auto_plan = cli.plan == "auto" && cfg.balance.empty();
  if (cli.stages > 0 && cfg.auto_plan) {
    cfg.stages = static_cast<size_t>(cli.stages);
  }
  cfg.threads = cli.threads;
  cfg.max_queue = static_cast<size_t>(cli.max_queue);
  cfg.request_timeout = ms(cli.request_timeout_s);
  cfg.metrics_path = metrics_path_of(cli.metrics);
  return out;
}

// The checks of the command line, where the nodes are and the secret.
setup prepare_cluster(const serve_cli& cli) {
  auto log = logger("serve");
  setup out;
  if (cli.stages <= 0 && cli.cluster.empty()) {
    throw std::invalid_argument("say where to run: --stages N (N local nodes, one "
                                "process) or --cluster FILE (node processes)");
  }
  if (cli.stages > 0 && !cli.cluster.empty()) {
    throw std::invalid_argument("--stages and --cluster exclude each other");
  }
  if (cli.plan != "auto" && cli.plan != "even") {
    throw std::invalid_argument("--plan must be auto or even, got '" + cli.plan + "'");
  }
  if (auto secret = actors::load_secret(cli.secret_file)) {
    out.secret = *secret;
    if (auto w = actors::secret_file_warning(cli.secret_file); !w.empty()) {
      log->warn("{}", w);
    }
  }
  if (!cli.cluster.empty()) {
    out.listed = actors::read_cluster_file(cli.cluster);
    // (local nodes prove no secret: it is the repository API's alone then)
    out.cfg.secret = out.secret;
  }
  return out;
}

// `infer`'s one model: the command line's checks and its settings.
setup prepare(const serve_cli& cli) {
  if (cli.loads.size() > 1) {
    throw std::invalid_argument("infer runs one model: give --load once");
  }
  auto base = prepare_cluster(cli);
  model_source src;
  if (!cli.loads.empty()) {
    src = parse_load(cli.loads.front());
  }
  auto out = model_setup(cli, src);
  out.listed = std::move(base.listed);
  out.cfg.secret = base.cfg.secret;
  return out;
}

std::vector<actors::remote_node> nodes_for(caf::actor_system& sys, const serve_cli& cli,
                                           const setup& s) {
  if (cli.cluster.empty()) {
    return actors::local_nodes(sys, cli.stages, cli.threads);
  }
  auto connected = actors::connect_nodes(sys, s.listed);
  if (!connected) {
    throw std::runtime_error(sys.render(connected.error()));
  }
  return std::move(*connected);
}

caf::actor_system_config& system_config(caf::actor_system_config& cfg,
                                        const serve_cli& cli) {
  actors::system_options sopts;
  sopts.connection_timeout = ms(cli.hang_timeout_s);
  actors::configure(cfg, sopts);
  actors::configure_tls(cfg, actors::checked_tls(cli.tls));
  return cfg;
}

// The cluster supervisor at --supervisor-listen (console, node --join).
void publish(caf::actor_system& sys, const cluster_actor& cluster, const serve_cli& cli) {
  if (cli.supervisor_listen.empty()) {
    return;
  }
  auto log = logger("serve");
  auto [host, port] = actors::parse_address(cli.supervisor_listen);
  auto bound = actors::publish(cluster, port, host);
  if (!bound) {
    throw std::runtime_error("cannot listen on " + cli.supervisor_listen + ": " +
                             sys.render(bound.error()));
  }
  log->info("supervisor listening on {}:{} (salamander console {}:{}; salamander node "
            "--join {}:{})",
            host, *bound, host, *bound, host, *bound);
}

// Plan changes and recoveries as log lines (above the progress line).
void log_status(const job_status& s, std::string& shown_plan, int64_t& shown_recoveries,
                progress_line& progress, const std::string& model = "") {
  auto log = logger("serve");
  if (s.plan != shown_plan && !s.plan.empty()) {
    shown_plan = s.plan;
    progress.finish();
    log->info("{}plan v{}: {}", model, s.pipeline.plan_version, s.plan);
  }
  if (s.pipeline.recoveries != shown_recoveries) {
    shown_recoveries = s.pipeline.recoveries;
    progress.finish();
    log->warn("{}FAILURE: {}", model, s.error);
    log->info(
        "{}RECOVERED in {:.3f} s: serving on {}; {} micro-batch(es) sent again so far",
        model, s.pipeline.last_recovery_s, s.plan, s.serving.resent);
  }
}

int run_infer(const serve_cli& cli) {
  auto log = logger("serve");
  set_threads(cli.threads);
  check_blas();
  auto s = prepare(cli);
  models::dataset data;
  // synthetic: the test split `eval` uses, unless a count is asked for (or
  // the model's inputs are so large that 5120 of them would not fit): then
  // that many fresh examples
  auto per_sample = 4.0 * static_cast<double>(models::elements(s.desc.input));
  if (cli.dataset == "synthetic" && (cli.samples > 0 || per_sample * 5120 > 512e6)) {
    data = models::make_synthetic(2, cli.samples > 0 ? cli.samples : 256, s.desc.input,
                                  s.desc.classes);
  } else {
    data = models::load_dataset(cli.dataset, false, s.desc, cli.data_dir);
    if (cli.samples > 0 && cli.samples < data.size()) {
      data.images = data.images.narrow(0, 0, cli.samples);
      data.labels = data.labels.narrow(0, 0, cli.samples);
    }
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{system_config(cfg, cli)};
  auto nodes = nodes_for(sys, cli, s);
  log->info("inference: model {} ({} layers), {} examples of {}, {} nodes from {}, "
            "micro-batches of up to {}",
            s.cfg.model, s.desc.layers.size(), data.size(), data.name, nodes.size(),
            cli.cluster.empty() ? "local nodes (embedded)" : cli.cluster, cli.max_batch);
  actors::inference_result r;
  {
    actors::service svc(sys, s.cfg, nodes);
    publish(sys, svc.cluster(), cli);
    std::string shown_plan;
    int64_t shown_recoveries = 0;
    progress_line progress(log);
    actors::inference_options opts;
    auto total = data.size();
    opts.on_progress = [&](const job_status& st, int64_t done) {
      log_status(st, shown_plan, shown_recoveries, progress);
      auto fields = status_fields(st);
      fields.insert(fields.begin() + 1, {fmt::format("{}/{} examples", done, total), 8});
      progress.update(fields);
    };
    r = actors::infer_all(svc, data.images, opts);
    progress.finish();
    log_status(r.status, shown_plan, shown_recoveries, progress);
    svc.stop("inference done");
  }
  if (cli.cluster.empty()) {
    for (auto& n : nodes) {
      caf::anon_send(n.handle, leave_atom_v);
    }
  }
  if (!r.error.empty()) {
    log->error("inference failed: {}", r.error);
    return 1;
  }
  auto rate = r.seconds > 0 ? static_cast<double>(data.size()) / r.seconds : 0.0;
  auto predicted = r.outputs.argmax(1);
  auto correct = predicted.eq(data.labels).sum().item<int64_t>();
  double accuracy = static_cast<double>(correct) / static_cast<double>(data.size());
  log->info(
      "{} examples in {:.2f} s: {:.1f} examples/s on {}; accuracy {:.2f}% ({} / {})",
      data.size(), r.seconds, rate, r.status.plan, 100.0 * accuracy, correct,
      data.size());
  if (!r.status.metrics_path.empty()) {
    std::printf("metrics: %s\n", r.status.metrics_path.c_str());
  }
  std::printf("plan: %s\n", r.status.plan.c_str());
  std::printf("examples: %lld\n", static_cast<long long>(data.size()));
  std::printf("throughput: %.2f examples/s\n", rate);
  std::printf("latency p50: %.4f s\nlatency p99: %.4f s\n",
              r.status.serving.latency_p50_s, r.status.serving.latency_p99_s);
  std::printf("test accuracy: %.4f\n", accuracy);
  return 0;
}

// HTTPS material: the process's --tls directory (checked), or nothing.
actors::tls_options https_material(const serve_cli& cli) {
  if (!cli.https) {
    if (!cli.https_client_ca.empty()) {
      throw std::invalid_argument("--https-client-ca asks HTTPS clients for a certificate: "
                                  "add --https");
    }
    return {};
  }
  auto material = actors::checked_tls(cli.tls);
  if (!material.enabled()) {
    throw std::invalid_argument(
        "--https serves with this process's TLS material: give --tls DIR (or "
        "SALAMANDER_TLS=DIR), a directory made by deploy/make-certs.sh -o certs --host "
        "HOSTNAME NAME (HOSTNAME: the name or address clients put in https://)");
  }
  if (!cli.https_client_ca.empty()) {
    std::ifstream in(cli.https_client_ca);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      throw std::invalid_argument("--https-client-ca " + cli.https_client_ca +
                                  " holds no PEM certificate (the CA whose certificates "
                                  "clients present, e.g. certs/ca.pem)");
    }
  }
  return material;
}

// Where a front listens (`address`), with the command line's limits and TLS.
front_options front_options_for(const serve_cli& cli, const std::string& address,
                                const actors::tls_options& https) {
  auto [host, port] = actors::parse_address(address);
  front_options o;
  o.host = host;
  o.port = port;
  o.max_body_bytes = static_cast<size_t>(cli.max_body_mb * 1024 * 1024);
  o.threads = cli.http_threads;
  if (https.enabled()) {
    o.tls_cert = https.cert_file();
    o.tls_key = https.key_file();
    o.client_ca = cli.https_client_ca;
  }
  return o;
}

// The gRPC endpoint when --grpc-listen asks for one (its address printed as
// "grpc listening: HOST:PORT"), with the HTTP front's TLS and limits.
std::unique_ptr<grpc_front> start_grpc(const serve_cli& cli, model_registry& models,
                                       const actors::tls_options& https) {
  if (cli.grpc_listen.empty()) {
    return nullptr;
  }
  auto o = front_options_for(cli, cli.grpc_listen, https);
  auto front = std::make_unique<grpc_front>(models, o);
  auto bound = front->start();
  logger("serve")->info("KServe v2 over gRPC{} on {}:{}",
                        https.enabled() ? " with TLS" : "", o.host, bound);
  std::printf("grpc listening: %s:%d\n", o.host.c_str(), bound);
  return front;
}

// What a model's log lines last said.
struct model_watch {
  std::string shown_plan;
  int64_t shown_recoveries = 0;
  bool was_serving = false;
  bool ended = false;
};

// Logs the models' progress until a stop signal, an operator's stop of a
// model (console or dashboard: the server stops, as on SIGTERM), or until
// every model loaded has failed (1). The progress line follows the first
// model loaded.
int watch_models(const model_registry& models, const std::atomic<int>& stop_signal,
                 progress_line& progress) {
  auto log = logger("serve");
  std::map<std::string, model_watch> seen;
  while (stop_signal == 0) {
    auto loaded = models.loaded();
    bool any_alive = false;
    for (auto& m : loaded) {
      auto st = m->status();
      auto& w = seen[m->model().name];
      auto name = loaded.size() > 1 ? m->model().name + ": " : std::string();
      log_status(st, w.shown_plan, w.shown_recoveries, progress, name);
      if (st.phase == status_phase::serving && !w.was_serving) {
        w.was_serving = true;
        progress.finish();
        log->info("{}ready: {}", name, st.plan);
      }
      if (st.finished() && !w.ended) {
        w.ended = true;
        progress.finish();
        if (st.phase == status_phase::failed) {
          log->error("{}serving failed: {}", name, st.error);
        } else if (!model_registry::stopped_here(st.stopped)) {
          log->warn(
              "{}the serving job was stopped ({}): answering the requests accepted{}",
              name, st.stopped.empty() ? "stop" : st.stopped,
              loaded.size() > 1 ? ", and stopping the other models" : "");
          return 0;
        }
      }
      any_alive = any_alive || st.phase != status_phase::failed;
    }
    if (!loaded.empty() && !any_alive) {
      return 1;
    }
    if (!loaded.empty() && seen[loaded.front()->model().name].was_serving) {
      progress.update(status_fields(loaded.front()->status()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return 0;
}

// Tells its actors to leave when it goes: a serve that throws half-way
// would otherwise wait forever for them in the actor system's end.
struct leave_guard {
  std::vector<caf::actor> actors;
  ~leave_guard() {
    for (auto& a : actors) {
      caf::anon_send(a, leave_atom_v);
    }
  }
};

// The models the command line names: --load's, or --model's when neither
// --load nor --repository is given (the repository's come from the registry).
// A checkpoint without a name is read here for its family; its setup goes
// into `read`, for its first start, so that it is read once.
std::vector<model_source> sources_of(const serve_cli& cli,
                                     std::map<std::string, setup>& read) {
  std::vector<model_source> out;
  for (auto& text : cli.loads) {
    out.push_back(parse_load(text));
  }
  if (!cli.name.empty() && out.size() + (cli.repository.empty() ? 0 : 1) > 1) {
    throw std::invalid_argument(
        "--name names the one model served; with several, name each as --load NAME=PATH");
  }
  if (out.empty() && cli.repository.empty()) {
    out.emplace_back(); // --model at --seed's weights
    out.back().spec = cli.model;
  }
  for (auto& src : out) {
    if (src.name.empty()) {
      src.name = cli.name;
    }
    if (src.name.empty() && src.path.empty()) {
      src.name = models::model_spec::parse(src.spec).name; // its family: cnn, vit, ...
    } else if (src.name.empty()) {
      auto m = model_setup(cli, src);
      src.name = m.desc.spec.name;
      read.emplace(src.name, std::move(m));
    }
  }
  return out;
}

// Where the models are served, on the log and (the listening line, which
// scripts and tests read) on stdout.
void announce(const serve_cli& cli, const actors::tls_options& https,
              const std::vector<std::string>& names, const std::string& host, int bound,
              bool secret) {
  auto log = logger("serve");
  const char* scheme = https.enabled() ? "https" : "http";
  if (https.enabled()) {
    log->info("HTTPS with {} ({}); {}", https.cert_file(), actors::tls_name(https),
              cli.https_client_ca.empty()
                  ? "no client certificate asked"
                  : "clients must present a certificate of " + cli.https_client_ca);
  }
  for (auto& name : names) {
    log->info("serving model '{}' on {}://{}:{}/v2/models/{} (ready once the pipeline "
              "is up; curl {}{}://{}:{}/v2/health/ready)",
              name, scheme, host, bound, name,
              https.enabled() ? "--cacert " + https.ca_file() + " " : "", scheme, host,
              bound);
  }
  log->info("model repository: POST /v2/repository/index; {}",
            secret ? "load and unload with Authorization: Bearer SECRET"
                   : "load and unload are off (no cluster secret)");
  std::printf("listening: %s://%s:%d\n", scheme, host.c_str(), bound);
}

// What each model answered, once its server stopped.
void report_stopped(const std::map<std::string, job_status>& last) {
  auto log = logger("serve");
  for (auto& [name, st] : last) {
    log->info("stopped{}: {} requests answered, {} failed, {} refused (queue full), {} "
              "recoveries",
              last.size() > 1 ? " " + name : "", st.serving.requests,
              st.serving.failed_requests, st.serving.rejected, st.pipeline.recoveries);
    if (!st.metrics_path.empty()) {
      std::printf("metrics: %s\n", st.metrics_path.c_str());
    }
  }
}

int run_serve(const serve_cli& cli) {
  auto log = logger("serve");
  set_threads(cli.threads);
  check_blas();
  auto https = https_material(cli);
  auto base = prepare_cluster(cli);
  std::map<std::string, setup> read; // checkpoints read for their names
  auto sources = sources_of(cli, read);
  auto host = actors::parse_address(cli.listen).first;
  caf::actor_system_config cfg;
  caf::actor_system sys{system_config(cfg, cli)};
  auto nodes = nodes_for(sys, cli, base);
  // local nodes leave however this ends (the actor system waits for them)
  leave_guard local_nodes;
  if (cli.cluster.empty()) {
    for (auto& n : nodes) {
      local_nodes.actors.push_back(caf::actor_cast<caf::actor>(n.handle));
    }
  }
  int code = 0;
  {
    // one cluster under every model: the nodes admitted and watched once
    auto cluster = sys.spawn(actors::cluster_supervisor,
                             actors::cluster_config_for(base.cfg), nodes);
    leave_guard cluster_leaves{{caf::actor_cast<caf::actor>(cluster)}};
    std::atomic<bool> chain_taken{false};
    // the models are planned around each other's work on the nodes
    auto load = std::make_shared<actors::served_load>();
    model_registry models(
        sources, cli.repository, base.secret, [&](const model_source& src) {
          // (a later load reads the checkpoint again: it may have changed)
          auto first = read.find(src.name);
          auto m = first != read.end() ? std::move(first->second) : model_setup(cli, src);
          if (first != read.end()) {
            read.erase(first);
          }
          // one job keeps chain copies on the nodes' holders, which know
          // layers by index, not by model (serve_config::chain_copies)
          m.cfg.chain_copies = !chain_taken.exchange(true);
          m.cfg.secret = base.cfg.secret;
          m.cfg.shared_load = load;
          m.cfg.served_name = src.name;
          auto svc = std::make_shared<actors::service>(sys, m.cfg, cluster);
          return std::make_shared<model_endpoint>(svc, m.desc, src.name, src.version);
        });
    models.start_all();
    auto names = models.names();
    publish(sys, cluster, cli);
    auto dash = open_dashboard(
        sys, cli.dashboard,
        {cli.secret_file, cli.tls, metrics_path_of(cli.metrics), cli.https, names});
    if (dash) {
      dash->attach(cluster);
      models.on_change(
          [d = dash.get()](const std::vector<std::string>& now) { d->set_models(now); });
    }
    http_front_options hopts;
    static_cast<front_options&>(hopts) = front_options_for(cli, cli.listen, https);
    http_front front(models, hopts);
    // the endpoint answers health checks (not ready) while the pipelines start
    auto bound = front.start();
    announce(cli, https, names, host, bound, !base.secret.empty());
    auto grpc = start_grpc(cli, models, https);
    std::fflush(stdout);
    watch_stop_signals();
    std::atomic<int> stop_signal{0};
    std::thread watcher([&] {
      int sig = next_stop_signal();
      stop_signal = sig;
    });
    progress_line progress(log);
    code = watch_models(models, stop_signal, progress);
    end_stop_watch();
    watcher.join();
    progress.finish();
    if (stop_signal > 0) {
      log->warn("{}: answering the requests accepted, refusing new ones",
                stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
    }
    auto last = models.stop_all("signal");
    if (dash && !last.empty()) {
      dash->show_final(last.begin()->second);
    }
    if (grpc) {
      grpc->stop();
    }
    front.stop();
    report_stopped(last);
  }
  return code;
}

// What infer and serve share: the model, where it runs, how requests are
// batched, and the cluster's settings.
void add_serving_options(CLI::App& sub, serve_cli& cli, bool several) {
  sub.add_option("--load", cli.loads,
                 several
                     ? "checkpoint written by train --save, as [NAME=]PATH (NAME: in "
                       "URLs, default its family, e.g. cnn); repeatable, one model each "
                       "(default: --model's seed weights)"
                     : "checkpoint written by train --save (default: the model's seed "
                       "weights)");
  sub.add_option("--model", cli.model, std::string("without --load: ") + model_help)
      ->capture_default_str();
  sub.add_option("--seed", cli.seed, "without --load: the weights' seed")
      ->capture_default_str();
  sub.add_option("--stages", cli.stages,
                 "embedded: N local nodes in this process (the planner picks the cuts)")
      ->check(whole<int>(1));
  add_cluster_file(sub, cli.cluster);
  sub.add_option("--plan", cli.plan,
                 "auto: profile every node and plan (compute, memory, bandwidth); even: "
                 "an even split")
      ->capture_default_str();
  sub.add_option("--balance", cli.balance,
                 "layers per stage, e.g. 2,3,3 (the user's plan)");
  sub.add_option(
         "--max-batch", cli.max_batch,
         "rows per micro-batch at most: dynamic batching merges requests up to it")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  sub.add_option("--batch-delay-ms", cli.batch_delay_ms,
                 "how long a request may wait for others to fill its micro-batch while "
                 "the pipeline is busy (one that finds it idle goes at once)")
      ->check(number(0, 10000, false, "ms"))
      ->capture_default_str();
  sub.add_flag("--no-batching", cli.no_batching,
               "every request is its own micro-batch (never merged)");
  sub.add_option("--in-flight", cli.in_flight,
                 "micro-batches in the pipeline at once (0: two per stage)")
      ->check(whole<int>(0))
      ->capture_default_str();
  sub.add_option("--max-queue", cli.max_queue,
                 "requests waiting at most; more are refused (HTTP 503, Retry-After)")
      ->check(whole<int64_t>(1))
      ->capture_default_str();
  sub.add_option("--request-timeout", cli.request_timeout_s,
                 "seconds before a request not answered fails (HTTP 504)")
      ->check(number(0, 86400, true, "seconds"))
      ->capture_default_str();
  add_hang_timeout(sub, cli.hang_timeout_s,
                   "seconds of silence after which a node counts as lost (nodes beat "
                   "every second)");
  add_threads(sub, cli.threads, "compute threads per node (0: LibTorch's default)");
  add_secret_file(sub, cli.secret_file,
                  several
                      ? "cluster secret: the nodes must prove it, and the model "
                        "repository's load and unload need it as Authorization: Bearer "
                        "(default: $SALAMANDER_SECRET)"
                      : "cluster secret the nodes must prove (default: "
                        "$SALAMANDER_SECRET)");
  add_tls(sub, cli.tls);
  add_metrics(sub, cli.metrics);
  sub.add_option("--supervisor-listen", cli.supervisor_listen,
                 "HOST:PORT to publish the supervisor on (console, node --join)");
}

} // namespace

command add_infer(CLI::App& app) {
  auto cli = std::make_shared<serve_cli>();
  auto* sub = app.add_subcommand(
      "infer", "run a data set through a forward-only pipeline (EdgePipe): throughput, "
               "latency and, with labels, accuracy");
  add_serving_options(*sub, *cli, false);
  add_dataset(*sub, cli->dataset, "fashion-mnist (its test split) or synthetic");
  add_data_dir(*sub, cli->data_dir);
  sub->add_option("--samples", cli->samples,
                  "examples to run (0: the whole test split; with synthetic, N > 0 draws "
                  "N fresh examples)")
      ->check(whole<int64_t>(0))
      ->capture_default_str();
  return {sub, [cli] { return run_infer(*cli); }};
}

command add_serve(CLI::App& app) {
  auto cli = std::make_shared<serve_cli>();
  auto* sub = app.add_subcommand(
      "serve", "serve a model over HTTP and gRPC (Open Inference Protocol / KServe v2, "
               "as Triton's clients speak it: /v2/models/NAME/infer, health, metadata, "
               "statistics, configuration, /metrics) through a pipeline that survives "
               "node failures");
  add_serving_options(*sub, *cli, true);
  sub->add_option("--listen", cli->listen,
                  "HOST:PORT for HTTP (loopback unless told otherwise; port 0: any)")
      ->capture_default_str();
  sub->add_option("--grpc-listen", cli->grpc_listen,
                  "HOST:PORT for KServe v2 over gRPC as well (off by default; loopback "
                  "unless told otherwise; TLS with --https, the same limits)");
  sub->add_option("--name", cli->name,
                  "the one model's name in URLs (default: its family, e.g. cnn)");
  sub->add_option("--repository", cli->repository,
                  "serve every model of DIR, laid out as Triton's: DIR/NAME/VERSION/"
                  "model.ckpt (the highest VERSION); POST /v2/repository/models/NAME/"
                  "load and unload take effect with the cluster secret");
  sub->add_option("--max-body-mb", cli->max_body_mb,
                  "largest request body (HTTP 413 above)")
      ->check(number(0, 4096, true, "MB"))
      ->capture_default_str();
  sub->add_option("--http-threads", cli->http_threads,
                  "requests handled at once (each waits for its answer)")
      ->check(whole<int>(1))
      ->capture_default_str();
  sub->add_flag(
      "--https", cli->https,
      "serve HTTPS (TLS 1.2+) with this process's --tls material (cert.pem, "
      "key.pem; deploy/make-certs.sh --host NAME puts the host name clients use "
      "in the certificate)");
  sub->add_option("--https-client-ca", cli->https_client_ca,
                  "with --https: clients must present a certificate signed by this CA "
                  "(PEM file, e.g. certs/ca.pem); default: no client certificate asked")
      ->check(CLI::ExistingFile);
  add_dashboard(*sub, cli->dashboard, false);
  return {sub, [cli] { return run_serve(*cli); }};
}

} // namespace salamander::apps
