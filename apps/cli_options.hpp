// What the subcommands' option declarations share: the checks of numbers
// (in words, "--epochs must be at least 1, got 0"), the long help texts, and
// the options several commands take (cluster secret, TLS, metrics log,
// threads, hang timeout, data set). Each is declared here once; a command
// passes the help text that fits it where the wording differs.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace salamander::apps {

extern const char* const model_help;
extern const char* const tls_help;

/// No upper bound, for number().
constexpr double unbounded = std::numeric_limits<double>::max();

/// A whole number in [min, max]; `max` is the bound type's largest value.
CLI::Validator whole_number(int64_t min, long double max);

/// A whole number of type T, at least `min`.
template <class T> CLI::Validator whole(int64_t min) {
  return whole_number(min, static_cast<long double>(std::numeric_limits<T>::max()));
}

/// A number in [min, max] (or (min, max] with `above`); `unit` follows the bounds.
CLI::Validator number(double min, double max, bool above = false,
                      const std::string& unit = "");

// ---- options several commands take

/// --tls DIR (else $SALAMANDER_TLS; none: plaintext).
void add_tls(CLI::App& sub, std::string& tls);

/// --secret-file FILE: the cluster secret (else $SALAMANDER_SECRET).
void add_secret_file(CLI::App& sub, std::string& file,
                     const std::string& help = "cluster secret the nodes must prove "
                                               "(default: $SALAMANDER_SECRET)");

/// --metrics FILE: the job's JSON-lines log ("": runs/job-.../metrics.jsonl).
void add_metrics(CLI::App& sub, std::string& path,
                 const std::string& help = "JSON-lines log (default "
                                           "runs/job-.../metrics.jsonl; none: off)");

/// --threads N, at least `min` (0: LibTorch's default).
void add_threads(CLI::App& sub, int& threads, const std::string& help, int min = 0);

/// --hang-timeout SECONDS: silence after which a node counts as lost.
void add_hang_timeout(CLI::App& sub, double& seconds,
                      const std::string& help = "seconds of silence after which a node "
                                                "counts as lost");

/// --cluster FILE of node processes (it must exist).
void add_cluster_file(CLI::App& sub, std::string& file,
                      const std::string& help = "TOML file listing the node processes");

/// --dataset NAME.
void add_dataset(CLI::App& sub, std::string& dataset,
                 const std::string& help = "fashion-mnist or synthetic");

/// --data DIR: the Fashion-MNIST IDX files.
void add_data_dir(CLI::App& sub, std::string& dir,
                  const std::string& help = "directory with the Fashion-MNIST IDX files");

} // namespace salamander::apps
