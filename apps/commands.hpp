// The subcommands of `salamander`. Each cmd_*.cpp registers its own with an
// add_* function: the subcommand, its options (bound into the command's
// settings) and how it runs. main() only registers them, parses and runs
// the one given.
#pragma once

#include "models/model_desc.hpp"

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
} // namespace CLI

namespace salamander::apps {

/// A registered subcommand: `run` (once the command line is parsed into its
/// options) returns the process exit code.
struct command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// In the order `salamander --help` lists them. `args`: the command line
// main() parses (after the program's name), read when the command runs.
command add_train(CLI::App& app, const std::vector<std::string>& args);
command add_supervisor(CLI::App& app, const std::vector<std::string>& args);
command add_node(CLI::App& app);
command add_eval(CLI::App& app);
command add_export(CLI::App& app);
command add_infer(CLI::App& app);
command add_serve(CLI::App& app);
command add_federate(CLI::App& app);
command add_split(CLI::App& app);
command add_describe(CLI::App& app);
command add_chaos(CLI::App& app);
command add_console(CLI::App& app);
command add_plot(CLI::App& app);
command add_audit(CLI::App& app);

/// `supervisor --resume RUN_DIR` anywhere in `args`: the command line
/// RUN_DIR/job.json recorded (see resume_arguments); else `args` as they are.
/// Throws std::runtime_error saying why it cannot.
std::vector<std::string> with_resumed_job(const std::vector<std::string>& args);
/// `supervisor --resume RUN_DIR`: the command line RUN_DIR/job.json
/// recorded, with `--resume RUN_DIR` (absolute) added, after changing to the
/// directory it ran in. `given` is this command's arguments (after the
/// program's name); anything but --resume after `supervisor` is refused.
/// Throws std::runtime_error saying why it cannot.
std::vector<std::string> resume_arguments(const std::string& run_dir,
                                          const std::vector<std::string>& given);
/// runs/job-YYYYmmdd-HHMMSS-PID/metrics.jsonl under the working directory.
std::string default_metrics_path();
/// --metrics: "none" off, "" default_metrics_path(), else the path given.
std::string metrics_path_of(const std::string& option);
/// A model's description as JSON (`describe --json`, the file beside an export).
std::string describe_json(const models::model_desc& desc);

} // namespace salamander::apps
