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
#include "apps/commands.hpp"
#include "apps/http_front.hpp"
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

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// What both commands share: the model and its weights, the job's settings,
// the nodes.
struct setup {
  models::model_desc desc;
  actors::serve_config cfg;
  std::vector<actors::cluster_node> listed;
};

setup prepare(const serve_cli& cli) {
  auto log = logger("serve");
  setup out;
  auto& cfg = out.cfg;
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
  if (!cli.load.empty()) {
    auto ckpt = messages::load_checkpoint(cli.load);
    try {
      out.desc = models::describe(models::model_spec::parse(ckpt.snapshot.model));
    } catch (const std::exception& e) {
      throw std::invalid_argument("checkpoint " + cli.load + ": " + e.what());
    }
    cfg.weights = std::make_shared<models::weight_snapshot>(std::move(ckpt.snapshot));
    cfg.seed = ckpt.seed;
    log->info("serving checkpoint {}: model {}, {} batches trained", cli.load,
              out.desc.spec.canonical(), cfg.weights->version);
  } else {
    out.desc = models::describe(models::model_spec::parse(cli.model));
    cfg.seed = cli.seed;
    log->info("serving model {} with the weights of seed {} (no --load)",
              out.desc.spec.canonical(), cli.seed);
  }
  cfg.model = out.desc.spec.canonical();
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
  cfg.metrics_path = cli.metrics == "none" ? ""
                     : cli.metrics.empty() ? default_metrics_path()
                                           : cli.metrics;
  if (!cli.cluster.empty()) {
    out.listed = actors::read_cluster_file(cli.cluster);
    if (auto secret = actors::load_secret(cli.secret_file)) {
      cfg.secret = *secret;
      if (auto w = actors::secret_file_warning(cli.secret_file); !w.empty()) {
        log->warn("{}", w);
      }
    }
  }
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

void publish(caf::actor_system& sys, const actors::service& svc, const serve_cli& cli) {
  if (cli.supervisor_listen.empty()) {
    return;
  }
  auto log = logger("serve");
  auto [host, port] = actors::parse_address(cli.supervisor_listen);
  auto bound = actors::publish(svc.cluster(), port, host);
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
                progress_line& progress) {
  auto log = logger("serve");
  if (s.plan != shown_plan && !s.plan.empty()) {
    shown_plan = s.plan;
    progress.finish();
    log->info("plan v{}: {}", s.plan_version, s.plan);
  }
  if (s.recoveries != shown_recoveries) {
    shown_recoveries = s.recoveries;
    progress.finish();
    log->warn("FAILURE: {}", s.error);
    log->info(
        "RECOVERED in {:.3f} s: serving on {}; {} micro-batch(es) sent again so far",
        s.last_recovery_s, s.plan, s.resent);
  }
}

} // namespace

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
    publish(sys, svc, cli);
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
  std::printf("latency p50: %.4f s\nlatency p99: %.4f s\n", r.status.latency_p50_s,
              r.status.latency_p99_s);
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

int run_serve(const serve_cli& cli) {
  auto log = logger("serve");
  set_threads(cli.threads);
  check_blas();
  auto https = https_material(cli);
  auto s = prepare(cli);
  auto name = cli.name.empty() ? s.desc.spec.name : cli.name;
  auto [host, port] = actors::parse_address(cli.listen);
  caf::actor_system_config cfg;
  caf::actor_system sys{system_config(cfg, cli)};
  auto nodes = nodes_for(sys, cli, s);
  int code = 0;
  {
    actors::service svc(sys, s.cfg, nodes);
    publish(sys, svc, cli);
    http_front_options hopts;
    hopts.model_name = name;
    hopts.host = host;
    hopts.port = port;
    hopts.max_body_bytes = static_cast<size_t>(cli.max_body_mb * 1024 * 1024);
    hopts.threads = cli.http_threads;
    if (https.enabled()) {
      hopts.tls_cert = https.cert_file();
      hopts.tls_key = https.key_file();
      hopts.client_ca = cli.https_client_ca;
    }
    http_front front(svc, s.desc, hopts);
    // the endpoint answers health checks (not ready) while the pipeline starts
    auto bound = front.start();
    const char* scheme = https.enabled() ? "https" : "http";
    if (https.enabled()) {
      log->info("HTTPS with {} ({}); {}", https.cert_file(), actors::tls_name(https),
                cli.https_client_ca.empty()
                    ? "no client certificate asked"
                    : "clients must present a certificate of " + cli.https_client_ca);
    }
    log->info("serving model '{}' on {}://{}:{}/v2/models/{} (ready once the pipeline "
              "is up; curl {}{}://{}:{}/v2/health/ready)",
              name, scheme, host, bound, name,
              https.enabled() ? "--cacert " + https.ca_file() + " " : "", scheme, host,
              bound);
    std::printf("listening: %s://%s:%d\n", scheme, host.c_str(), bound);
    std::fflush(stdout);
    watch_stop_signals();
    std::atomic<int> stop_signal{0};
    std::thread watcher([&] {
      int sig = next_stop_signal();
      stop_signal = sig;
    });
    std::string shown_plan;
    int64_t shown_recoveries = 0;
    bool was_serving = false;
    progress_line progress(log);
    while (stop_signal == 0) {
      auto st = svc.status();
      log_status(st, shown_plan, shown_recoveries, progress);
      if (st.phase == "serving" && !was_serving) {
        was_serving = true;
        progress.finish();
        log->info("ready: {}", st.plan);
      }
      if (was_serving) {
        progress.update(status_fields(st));
      }
      if (st.phase == "failed") {
        log->error("serving failed: {}", st.error);
        code = 1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    end_stop_watch();
    watcher.join();
    progress.finish();
    if (stop_signal > 0) {
      log->warn("{}: answering the requests accepted, refusing new ones",
                stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
    }
    auto last = svc.stop("signal");
    front.stop();
    log->info("stopped: {} requests answered, {} failed, {} refused (queue full), {} "
              "recoveries",
              last.requests, last.failed_requests, last.rejected, last.recoveries);
    if (!last.metrics_path.empty()) {
      std::printf("metrics: %s\n", last.metrics_path.c_str());
    }
  }
  if (cli.cluster.empty()) {
    for (auto& n : nodes) {
      caf::anon_send(n.handle, leave_atom_v);
    }
  }
  return code;
}

} // namespace salamander::apps
