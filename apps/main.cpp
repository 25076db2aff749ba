// salamander: train and serve deep networks across weak, mismatched,
// unreliable edge devices. This file only registers the subcommands, parses
// the command line and runs the one given; each subcommand (its options and
// how it runs) lives in its own cmd_*.cpp.
#include "apps/commands.hpp"
#include "apps/runtime_env.hpp"
#include "models/torchscript.hpp"

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

using namespace salamander::apps;

namespace {

// Parses `args` (after the program's name); an exit code if the command line
// is wrong or asked for help, none if a command should run.
std::optional<int> parse(CLI::App& app, char* program, std::vector<std::string>& args) {
  std::vector<char*> argv{program};
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
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
  return std::nullopt;
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
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::vector<command> commands{add_train(app, args), add_supervisor(app, args),
                                      add_node(app),        add_eval(app),
                                      add_export(app),      add_infer(app),
                                      add_serve(app),       add_federate(app),
                                      add_split(app),       add_describe(app),
                                      add_chaos(app),       add_console(app),
                                      add_plot(app),        add_audit(app)};
  try {
    args = with_resumed_job(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  if (auto code = parse(app, argv[0], args)) {
    return *code;
  }
  setup_logging(log_level);
  try {
    for (auto& c : commands) {
      if (c.app->parsed()) {
        return c.run();
      }
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
