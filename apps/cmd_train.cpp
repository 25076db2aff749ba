// `salamander train` (one device), `salamander eval`, and `salamander export`
// (a checkpoint's weights out to PyTorch).
#include "actors/node/profiler.hpp"
#include "apps/cli_options.hpp"
#include "apps/commands.hpp"
#include "apps/preflight.hpp"
#include "apps/progress.hpp"
#include "apps/runtime_env.hpp"
#include "apps/train_cli.hpp"
#include "messages/checkpoint.hpp"
#include "models/trainer.hpp"

#include <fmt/format.h>

#include <chrono>
#include <optional>

namespace salamander::apps {

namespace {

struct eval_cli {
  std::string load;
  std::string dataset = "fashion-mnist";
  std::string data_dir;
  int threads = 1;
};

/// `salamander export`: a checkpoint's weights as a PyTorch state dict.
struct export_cli {
  std::string load;
  std::string output;
};

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

int run_train(const train_cli& cli) {
  const auto& job = cli.job;
  auto log = logger("train");
  set_threads(job.threads);
  check_blas();
  auto desc = check_job(cli, job_place::here, actors::memory_available());
  auto spec = desc.spec;
  models::layered_model model(desc, job.seed);
  auto train = models::load_dataset(job.dataset, true, model.desc(), job.data_dir);
  auto test = models::load_dataset(job.dataset, false, model.desc(), job.data_dir);
  log->info("model {} ({} layers, {} parameters, fingerprint {}), data {} ({} train / {} "
            "test), "
            "{} thread(s)",
            spec.canonical(), model.desc().layers.size(), model.desc().total_params(),
            model.desc().fingerprint, job.dataset, train.size(), test.size(),
            torch::get_num_threads());

  auto net = model.all();
  models::range_executor exec(net, true, true);
  models::optimizer_config ocfg;
  ocfg.kind = job.optimizer;
  ocfg.lr = job.lr;
  auto opt = models::make_optimizer(ocfg, net->parameters());

  models::train_options opts;
  opts.seed = job.seed;
  opts.batch_size = job.batch_size;
  opts.micro_batches = job.micro_batches;
  opts.max_batches = job.max_batches;
  opts.warmup_batches = job.warmup_batches;
  opts.lr = job.lr;

  progress_line progress(log);
  uint64_t committed = 0;
  models::eval_stats result;
  for (int64_t epoch = 0; epoch < job.epochs; ++epoch) {
    auto start = std::chrono::steady_clock::now();
    int64_t samples = 0;
    double ema_loss = -1.0;
    auto stats = models::train_epoch(
        exec, *opt, train, static_cast<uint64_t>(epoch), opts,
        [&](const models::batch_report& r) {
          samples += r.samples;
          ema_loss = ema_loss < 0 ? r.loss : 0.95 * ema_loss + 0.05 * r.loss;
          double secs =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                  .count();
          double rate = secs > 0 ? samples / secs : 0.0;
          double bps = secs > 0 ? (r.batch + 1) / secs : 0.0;
          progress.update(
              {
                  {fmt::format("epoch {}/{}", epoch + 1, job.epochs), 7},
                  {fmt::format("batch {}/{}", r.batch + 1, r.batches), 9},
                  {fmt::format("{:.1f} batches/s", bps), 3},
                  {fmt::format("{:.0f} samples/s", rate), 5},
                  {fmt::format("loss {:.4f}", ema_loss), 4},
                  {"eta " +
                       format_duration(bps > 0 ? (r.batches - r.batch - 1) / bps : -1),
                   8},
              },
              r.batch + 1 == r.batches);
        });
    progress.finish();
    committed += static_cast<uint64_t>(stats.batches);
    result = models::evaluate(net, test);
    log->info(
        "epoch {} done: {} batches in {:.1f} s ({:.0f} samples/s), train loss {:.4f}, "
        "test accuracy {:.2f}% ({} / {}), test loss {:.4f}",
        epoch + 1, stats.batches, stats.seconds, stats.samples / stats.seconds,
        stats.mean_loss, 100.0 * result.accuracy(), result.correct, result.samples,
        result.mean_loss);
  }
  std::printf("test accuracy: %.4f\n", result.accuracy());

  if (!cli.save.empty()) {
    messages::checkpoint ckpt;
    ckpt.snapshot = models::capture(model, opt.get(), ocfg.kind, committed);
    ckpt.created_unix_ms = now_unix_ms();
    ckpt.seed = job.seed;
    ckpt.epoch = static_cast<uint64_t>(job.epochs);
    ckpt.note = fmt::format("salamander train --model {} --epochs {}", spec.canonical(),
                            job.epochs);
    messages::save_checkpoint(cli.save, ckpt);
    log->info("saved checkpoint {} (version {}, {:.1f} MB)", cli.save, committed,
              ckpt.snapshot.bytes() / 1e6);
  }
  return 0;
}

namespace {

/// The model a checkpoint holds, its weights restored (checked against its
/// description first). Throws std::invalid_argument naming the file.
models::layered_model restore_checkpoint(const std::string& path,
                                         const messages::checkpoint& ckpt) {
  try {
    models::layered_model model(
        models::describe(models::model_spec::parse(ckpt.snapshot.model)));
    models::restore(model, nullptr, ckpt.snapshot);
    return model;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("checkpoint " + path + ": " + e.what());
  }
}

int run_eval(const eval_cli& cli) {
  auto log = logger("train");
  set_threads(cli.threads);
  check_blas();
  auto ckpt = messages::load_checkpoint(cli.load);
  auto model = restore_checkpoint(cli.load, ckpt);
  auto& spec = model.desc().spec;
  auto test = models::load_dataset(cli.dataset, false, model.desc(), cli.data_dir);
  auto net = model.all();
  auto result = models::evaluate(net, test);
  log->info("checkpoint {}: model {}, version {} (batches trained), {}", cli.load,
            spec.canonical(), ckpt.snapshot.version, ckpt.note);
  log->info("test accuracy {:.2f}% ({} / {}), test loss {:.4f}",
            100.0 * result.accuracy(), result.correct, result.samples, result.mean_loss);
  std::printf("test accuracy: %.4f\n", result.accuracy());
  return 0;
}

// The state dict is a plain dict of tensors named `<layer>.<module>.<param>`
// (`conv1.conv.weight`, `block2.ln1.bias`), parameters and buffers, written
// with torch::pickle_save: the archive format Python's torch.load reads.
// Those are the names of the torch.nn module deploy/pytorch/salamander_torch.py
// builds from the description written beside it, so
//   model.load_state_dict(torch.load(OUTPUT))
// takes every tensor, with no key left over or missing.
int run_export(const export_cli& cli) {
  auto log = logger("train");
  auto ckpt = messages::load_checkpoint(cli.load);
  auto model = restore_checkpoint(cli.load, ckpt);
  auto net = model.all();
  c10::Dict<std::string, torch::Tensor> state;
  int64_t values = 0;
  auto add = [&](const std::string& name, const torch::Tensor& t) {
    state.insert(name, t.detach().contiguous().cpu());
    values += t.numel();
  };
  for (auto& p : net->named_parameters(/*recurse=*/true)) {
    add(p.key(), p.value());
  }
  for (auto& b : net->named_buffers(/*recurse=*/true)) {
    add(b.key(), b.value());
  }
  auto bytes = torch::pickle_save(torch::IValue(state));
  messages::write_file_atomically(cli.output, std::string_view(bytes.data(), bytes.size()),
                                  "state dict");
  auto arch = cli.output + ".json";
  messages::write_file_atomically(arch, describe_json(model.desc()), "model description");
  log->info("checkpoint {}: model {}, version {}", cli.load, model.desc().spec.canonical(),
            ckpt.snapshot.version);
  std::printf("exported %zu tensors (%lld values) to %s, the model's description to %s\n",
              state.size(), static_cast<long long>(values), cli.output.c_str(), arch.c_str());
  std::printf("in PyTorch: import salamander_torch; model = salamander_torch.load('%s')\n",
              cli.output.c_str());
  return 0;
}

} // namespace

command add_eval(CLI::App& app) {
  auto cli = std::make_shared<eval_cli>();
  auto* sub = app.add_subcommand("eval", "report the test accuracy of a checkpoint");
  sub->add_option("--load", cli->load, "checkpoint written by train --save")->required();
  add_dataset(*sub, cli->dataset);
  add_data_dir(*sub, cli->data_dir);
  add_threads(*sub, cli->threads, "compute threads (0: LibTorch's default)");
  return {sub, [cli] { return run_eval(*cli); }};
}

command add_export(CLI::App& app) {
  auto cli = std::make_shared<export_cli>();
  auto* sub = app.add_subcommand(
      "export",
      "write a checkpoint's weights as a PyTorch state dict (torch.load reads it) and "
      "the model's description beside it as JSON; deploy/pytorch/salamander_torch.py "
      "builds the equivalent torch.nn module");
  sub->add_option("--load", cli->load,
                  "checkpoint written by train --save, federate or split")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("-o,--output", cli->output,
                  "the state dict to write (e.g. model.pt); its description goes to "
                  "OUTPUT.json")
      ->required();
  return {sub, [cli] { return run_export(*cli); }};
}

} // namespace salamander::apps
