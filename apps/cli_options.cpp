#include "apps/cli_options.hpp"
#include "apps/number_word.hpp"

#include <fmt/format.h>

#include <exception>

namespace salamander::apps {

const char* const model_help =
    "model spec: mlp, cnn, resnet or vit, with options after a colon, e.g. "
    "cnn, mlp:hidden=512, resnet:width=16,blocks=2, vit:size=tiny, "
    "vit:size=base,image=224,patch=16,channels=3,classes=1000; or a PyTorch model: "
    "torchscript:FILE (a scripted nn.Sequential, its children the layers; the same "
    "path on every node)";

const char* const tls_help =
    "TLS on every link: a directory from deploy/make-certs.sh (ca.pem, cert.pem, "
    "key.pem); peers must hold a certificate of the same CA (default: $SALAMANDER_TLS; "
    "none: plaintext)";

namespace {

// Numeric ranges in words. CLI11's own (PositiveNumber, Range) print
// "Value 0 not in range 0.000000 to 1797693...": these say "must be at
// least 1, got 0", and main() puts the option's name in front.

std::string number_text(double x) {
  return fmt::format("{}", x);
}

std::string range_desc(double min, double max, bool above) {
  auto low = (above ? ">" : ">=") + number_text(min);
  return max < unbounded ? low + ",<=" + number_text(max) : low;
}

} // namespace

CLI::Validator whole_number(int64_t min, long double max) {
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

CLI::Validator number(double min, double max, bool above, const std::string& unit) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        auto read = finite_number(text);
        if (!read) {
          return "must be a number, got '" + text + "'";
        }
        double v = *read;
        auto u = unit.empty() ? std::string() : " " + unit;
        bool bounded = max < unbounded;
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

void add_tls(CLI::App& sub, std::string& tls) {
  sub.add_option("--tls", tls, tls_help);
}

void add_secret_file(CLI::App& sub, std::string& file, const std::string& help) {
  sub.add_option("--secret-file", file, help);
}

void add_metrics(CLI::App& sub, std::string& path, const std::string& help) {
  sub.add_option("--metrics", path, help);
}

void add_threads(CLI::App& sub, int& threads, const std::string& help, int min) {
  sub.add_option("--threads", threads, help)
      ->check(whole<int>(min))
      ->capture_default_str();
}

void add_hang_timeout(CLI::App& sub, double& seconds, const std::string& help) {
  sub.add_option("--hang-timeout", seconds, help)
      ->check(number(1.5, 3600, false, "seconds"))
      ->capture_default_str();
}

void add_cluster_file(CLI::App& sub, std::string& file, const std::string& help) {
  sub.add_option("--cluster", file, help)->check(CLI::ExistingFile);
}

void add_dataset(CLI::App& sub, std::string& dataset, const std::string& help) {
  sub.add_option("--dataset", dataset, help)->capture_default_str();
}

void add_data_dir(CLI::App& sub, std::string& dir, const std::string& help) {
  sub.add_option("--data", dir, help);
}

} // namespace salamander::apps
