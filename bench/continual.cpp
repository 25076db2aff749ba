// continual: learning from a stream (FTPipeHD's third experiment), on three
// `salamander node` processes on loopback (EMULATED devices on one host;
// the stream's arrival is EMULATED too: Fashion-MNIST's training split
// replayed at a fixed rate).
//
// The CNN trains as a 3-stage pipeline on `replay:RATE`; after every epoch
// of the stream (50 batches of 64) the test split is evaluated, so the
// results hold accuracy over time, and how far training is behind the data
// (batches arrived, not yet trained). The same stream is trained twice, side
// by side in one run: fault-free, and with a node killed (kill -9) in the
// middle. The second run's recovery time, the batches it redid from the
// stream log, its lag after the failure, and whether its final weights equal
// the fault-free run's (exact replay) are the headlines.
#include "actors/train/train_job.hpp"
#include "actors/node/node_process.hpp"
#include "actors/node/system.hpp"
#include "actors/train/stream.hpp"
#include "bench/benches.hpp"
#include "bench/report.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace salamander::bench {

namespace {

struct stream_run {
  std::vector<nlohmann::json> evaluated; ///< the metrics log's evaluated events
  double recovery_s = 0;
  int64_t redone = 0;
  double final_accuracy = 0;
  double wall_s = 0;
  models::weight_snapshot weights;
};

stream_run run_stream(const actors::job_config& base, const std::string& dir, bool kill,
                      const std::shared_ptr<const models::dataset>& test) {
  actors::process_cluster c(3, kill ? "ck" : "cf");
  caf::actor_system_config cfg;
  actors::system_options sopts;
  sopts.connection_timeout = std::chrono::milliseconds(1500);
  actors::configure(cfg, sopts);
  caf::actor_system sys{cfg};
  auto nodes = connected_nodes(sys, c.nodes());
  auto jc = base;
  jc.metrics_path = dir + "/metrics.jsonl";
  actors::stream_options so;
  so.source = "replay:1000";
  so.log_dir = dir + "/stream";
  so.batch_size = jc.batch_size;
  so.seed = jc.seed;
  jc.stream = std::make_shared<actors::sample_stream>(so);
  actors::job_options opts;
  opts.fetch_weights = true;
  opts.poll = std::chrono::milliseconds(20);
  bool killed = false;
  auto total = jc.max_batches * jc.epochs;
  opts.on_status = [&](const job_status& s) {
    if (kill && !killed && s.training.committed >= total / 2 + 5 &&
        s.phase == status_phase::training) {
      killed = true;
      c[1].signal(SIGKILL);
    }
  };
  auto t0 = std::chrono::steady_clock::now();
  auto r = actors::run_job(sys, jc, nodes, test, test, opts);
  stream_run out;
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r.status.phase != status_phase::finished || !r.weights ||
      (kill && r.status.pipeline.recoveries != 1)) {
    throw std::runtime_error("the stream run did not finish as planned: " + to_string(r.status.phase) +
                             " " + r.status.error);
  }
  out.weights = *r.weights;
  out.final_accuracy = r.status.test_accuracy;
  std::ifstream in(jc.metrics_path);
  std::string line;
  while (std::getline(in, line)) {
    auto e = nlohmann::json::parse(line);
    if (e["event"] == "evaluated") {
      out.evaluated.push_back(e);
    } else if (e["event"] == "recovered") {
      out.recovery_s = e["recovery_s"].get<double>();
      out.redone = e["redone_batches"].get<int64_t>();
    }
  }
  return out;
}

double max_diff(const models::weight_snapshot& a, const models::weight_snapshot& b) {
  double worst = 0;
  for (size_t i = 0; i < a.layers.size() && i < b.layers.size(); ++i) {
    for (size_t j = 0; j < a.layers[i].params.size(); ++j) {
      worst = std::max(worst, (a.layers[i].params[j].tensor - b.layers[i].params[j].tensor)
                                  .abs()
                                  .max()
                                  .item<double>());
    }
  }
  return worst;
}

} // namespace

int continual(const bench_args& args) {
  namespace fs = std::filesystem;
  actors::job_config jc;
  jc.model = "cnn";
  jc.dataset = "fashion-mnist";
  jc.seed = 3;
  jc.batch_size = 64;
  jc.micro_batches = 4;
  jc.max_batches = 50; // an epoch of the stream
  jc.epochs = args.quick ? 4 : 12;
  jc.replicate_every = 10;
  jc.balance = {2, 1, 1};
  jc.request_timeout = std::chrono::seconds(10);
  auto test = std::make_shared<models::dataset>(models::load_fashion_mnist(false));
  report rep("continual");
  rep.detail("emulation", "3 node processes on one 2-core host, loopback; arrival EMULATED "
                          "(Fashion-MNIST replayed at 1000 samples/s)");
  rep.detail("model", jc.model);
  rep.detail("batches", static_cast<double>(jc.max_batches * jc.epochs));
  stream_run clean, killed;
  {
    scratch_dir dir("salamander-continual");
    clean = run_stream(jc, (dir.path() / "clean").string(), false, test);
    killed = run_stream(jc, (dir.path() / "killed").string(), true, test);
  }
  std::printf("%-8s %-10s %-10s %-10s %-10s\n", "epoch", "t (s)", "trained", "arrived",
              "accuracy");
  int64_t lag_after = 0;
  for (size_t i = 0; i < killed.evaluated.size(); ++i) {
    auto& e = killed.evaluated[i];
    auto arrived = e.value("stream_arrived", int64_t{0});
    auto committed = e["committed"].get<int64_t>();
    lag_after = std::max(lag_after, arrived - committed);
    std::printf("%-8d %-10.1f %-10lld %-10lld %.4f  (fault-free: %.4f)\n",
                e["epoch"].get<int>(), e["t"].get<double>(), static_cast<long long>(committed),
                static_cast<long long>(arrived), e["accuracy"].get<double>(),
                i < clean.evaluated.size() ? clean.evaluated[i]["accuracy"].get<double>()
                                           : 0.0);
    rep.detail("killed_epoch" + std::to_string(i + 1) + "_t_s", e["t"].get<double>());
    rep.detail("killed_epoch" + std::to_string(i + 1) + "_accuracy",
               e["accuracy"].get<double>());
    rep.detail("killed_epoch" + std::to_string(i + 1) + "_lag_batches",
               static_cast<double>(arrived - committed));
  }
  for (size_t i = 0; i < clean.evaluated.size(); ++i) {
    rep.detail("clean_epoch" + std::to_string(i + 1) + "_accuracy",
               clean.evaluated[i]["accuracy"].get<double>());
  }
  rep.detail("clean_wall_s", clean.wall_s);
  rep.detail("killed_wall_s", killed.wall_s);
  rep.detail("stream_redone_batches", static_cast<double>(killed.redone));
  double diff = max_diff(clean.weights, killed.weights);
  rep.detail("weights_max_diff", diff);
  rep.headline("stream_final_accuracy", killed.final_accuracy);
  rep.headline("stream_final_accuracy_fault_free", clean.final_accuracy);
  rep.headline("stream_recovery_s", killed.recovery_s);
  rep.headline("stream_max_lag_batches", static_cast<double>(lag_after));
  rep.headline("stream_exact", diff <= 1e-5 ? 1.0 : 0.0);
  rep.finish(args.out);
  return 0;
}

} // namespace salamander::bench
