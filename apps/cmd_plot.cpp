// `salamander plot metrics.jsonl -o run.png`: throughput and loss over time
// with failures, recoveries, re-plans and joins marked, drawn by gnuplot.
// `salamander audit metrics.jsonl`: checks that the final weights' lineage
// holds every batch exactly once.
//
// Both read the log through one reader that keeps each event's line, so a
// field of the wrong type is reported as FILE:LINE, the event, the field
// and what was there. The plot's lines break where training did not run
// (an evaluation between epochs, a pause, a recovery, a re-plan, a long
// gap): a line drawn across them would show a rate nobody measured.
#include "actors/job/metrics.hpp"
#include "apps/commands.hpp"
#include "apps/dashboard/report.hpp"

#include "apps/json_depth.hpp"
#include "apps/runtime_env.hpp"
#include <CLI/CLI.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <sys/wait.h>

namespace salamander::apps {

namespace {

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

/// A metrics log that cannot be read as one: the message names the file and line.
class log_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct entry {
  nlohmann::json j;
  size_t line = 0; ///< 1-based
  std::string event;
};

struct run_log {
  std::string path;
  std::vector<entry> batches;
  std::vector<entry> events; ///< everything but batches
  std::optional<entry> start;
  std::optional<entry> end;
  size_t lines = 0;
  size_t bad_lines = 0;
  size_t first_bad_line = 0; ///< 1-based; 0: none
};

template <class T> const char* kind_of() {
  if constexpr (std::is_same_v<T, std::string>) {
    return "a string";
  } else if constexpr (std::is_same_v<T, bool>) {
    return "true or false";
  } else if constexpr (std::is_arithmetic_v<T>) {
    return "a number";
  } else {
    return "a list of numbers";
  }
}

// Whether the number `x` is one a T holds. get<T>() cuts a float to a
// whole number, and outside T's range that cut is undefined behaviour
// ("epoch": 1e300, "lineage": [-5.5]: fuzz/regressions/metrics/).
template <class T> bool holds(const nlohmann::json& x) {
  if constexpr (std::is_integral_v<T>) {
    using limits = std::numeric_limits<T>;
    if (x.is_number_unsigned()) {
      return x.get<uint64_t>() <= static_cast<uint64_t>(limits::max());
    }
    if (x.is_number_integer()) {
      auto v = x.get<int64_t>();
      return v >= 0 ? static_cast<uint64_t>(v) <= static_cast<uint64_t>(limits::max())
                    : limits::is_signed;
    }
    double v = x.get<double>();
    double end = std::ldexp(1.0, limits::digits); // max() + 1, exactly
    return limits::is_signed ? v >= -end && v < end : v > -1.0 && v < end;
  } else {
    return true;
  }
}

/// `e`'s field `key` as a T (`fallback` when absent or null); a field of
/// another type is a log_error naming the file, line, event and field.
template <class T>
T field(const run_log& r, const entry& e, const std::string& key, T fallback) {
  auto it = e.j.find(key);
  if (it == e.j.end() || it->is_null()) {
    return fallback;
  }
  bool fits = false;
  if constexpr (std::is_same_v<T, std::string>) {
    fits = it->is_string();
  } else if constexpr (std::is_same_v<T, bool>) {
    fits = it->is_boolean();
  } else if constexpr (std::is_arithmetic_v<T>) {
    fits = it->is_number() && holds<T>(*it);
  } else {
    fits = it->is_array() &&
           std::all_of(it->begin(), it->end(), [](const nlohmann::json& x) {
             return x.is_number() && holds<typename T::value_type>(x);
           });
  }
  if (!fits) {
    auto shown = it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (shown.size() > 60) {
      shown = shown.substr(0, 57) + "...";
    }
    // a number out of range is said so: "should be a number, got 1e300" would not
    const char* kind = kind_of<T>();
    if constexpr (std::is_same_v<T, int64_t>) {
      kind = it->is_number() ? "a whole number of at most 19 digits" : kind;
    } else if constexpr (!std::is_arithmetic_v<T> && !std::is_same_v<T, std::string>) {
      kind = it->is_array() ? "a list of whole numbers, 0 or more" : kind;
    }
    throw log_error(fmt::format("{}:{}: the {} event's field '{}' should be {}, got {}",
                                r.path, e.line, e.event, key, kind, shown));
  }
  return it->get<T>();
}

double time_of(const run_log& r, const entry& e) {
  return field(r, e, "t", 0.0);
}

// The lines of a metrics log; `path` names it in messages. Lines that are
// not events are counted, not fatal.
run_log read_log(std::istream& in, const std::string& path) {
  run_log r;
  r.path = path;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) {
      continue;
    }
    r.lines++;
    // a line nested deeper than any event is not one (and copying or
    // printing it would recurse that deep)
    nlohmann::json j(nlohmann::json::value_t::discarded);
    if (json_depth(line) <= max_json_depth) {
      j = nlohmann::json::parse(line, nullptr, false);
    }
    if (j.is_discarded() || !j.is_object() || !j.contains("event") ||
        !j["event"].is_string() || !j.contains("t") || !j["t"].is_number()) {
      // e.g. the last line of a run that was killed mid-write
      r.bad_lines++;
      if (r.first_bad_line == 0) {
        r.first_bad_line = number;
      }
      continue;
    }
    entry e{std::move(j), number, ""};
    e.event = e.j["event"].get<std::string>();
    if (e.event == "batch") {
      r.batches.push_back(std::move(e));
      continue;
    }
    if (e.event == "start") {
      r.start = e;
    } else if (e.event == "end") {
      r.end = e;
    }
    r.events.push_back(std::move(e));
  }
  return r;
}

run_log read_log(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw log_error("cannot read the metrics log " + path);
  }
  return read_log(in, path);
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out + "\"";
}

struct marker {
  const char* kind;
  const char* color;
  const char* label;
  const char* legend; ///< the key's entry for this colour
};

const marker markers[] = {
    {"failure", "#d62728", "failure", "failure"},
    {"recovered", "#2ca02c", "recovered", "recovered"},
    {"replan", "#1f77b4", "re-plan", "re-plan"},
    {"join", "#ff7f0e", "join", "join"},
    {"paused", "#9467bd", "paused", "pause / resume"},
    {"pause", "#9467bd", "pause", "pause / resume"},
    {"resume", "#9467bd", "resume", "pause / resume"},
    {"checkpoint", "#7f7f7f", "checkpoint", "checkpoint"},
};

// Events after which the line of points starts anew: training stopped.
bool stops_training(const std::string& kind) {
  return kind == "failure" || kind == "pause" || kind == "paused" || kind == "replan" ||
         kind == "recovery_plan" || kind == "recovered";
}

// breaks[i]: no line from batch point i-1 to i. A new epoch (an evaluation
// ran between), an event that stopped training, or a gap far longer than
// the usual spacing of points.
std::vector<bool> line_breaks(const run_log& r) {
  std::vector<double> t;
  for (auto& b : r.batches) {
    t.push_back(time_of(r, b));
  }
  std::vector<double> gaps;
  for (size_t i = 1; i < t.size(); ++i) {
    gaps.push_back(t[i] - t[i - 1]);
  }
  double usual = 0;
  if (!gaps.empty()) {
    auto mid = gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2);
    std::nth_element(gaps.begin(), mid, gaps.end());
    usual = *mid;
  }
  std::vector<double> stops;
  for (auto& e : r.events) {
    if (stops_training(e.event)) {
      stops.push_back(time_of(r, e));
    }
  }
  std::vector<bool> breaks(t.size(), false);
  for (size_t i = 1; i < t.size(); ++i) {
    bool gap = t[i] - t[i - 1] > std::max(1.0, 10 * usual);
    bool epoch = field(r, r.batches[i], "epoch", int64_t{0}) !=
                 field(r, r.batches[i - 1], "epoch", int64_t{0});
    bool stopped = std::any_of(stops.begin(), stops.end(),
                               [&](double s) { return s > t[i - 1] && s <= t[i]; });
    breaks[i] = gap || epoch || stopped;
  }
  return breaks;
}

std::string shorten(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

// The events as dashed vertical lines with labels, the end as a line of its
// own, and their entries for the key.
std::pair<std::string, std::string> event_marks(const run_log& r,
                                                std::map<std::string, size_t>& counts) {
  std::string phase;
  double end_t = 0;
  if (r.end) {
    phase = field(r, *r.end, "phase", std::string("?"));
    end_t = time_of(r, *r.end);
  }
  std::string arrows;
  std::vector<const marker*> legend;
  size_t shown = 0;
  std::map<std::string, double> last_marked; // kind -> t
  for (auto& e : r.events) {
    for (auto& m : markers) {
      if (e.event != m.kind) {
        continue;
      }
      double t = time_of(r, e);
      counts[e.event]++;
      if (std::none_of(legend.begin(), legend.end(), [&](const marker* l) {
            return std::string(l->legend) == m.legend;
          })) {
        legend.push_back(&m);
      }
      // a node's loss shows as its stages' and its own failure at once: one mark
      if (auto it = last_marked.find(e.event);
          it != last_marked.end() && t - it->second < 0.3) {
        continue;
      }
      last_marked[e.event] = t;
      arrows += fmt::format("set arrow from {t}, graph 0 to {t}, graph 1 nohead lw 1.5 "
                            "lc rgb '{c}' dt 2\n",
                            fmt::arg("t", t), fmt::arg("c", m.color));
      std::string label = m.label;
      if (e.event == "recovered") {
        label += fmt::format(" {:.2f}s", field(r, e, "recovery_s", 0.0));
      } else if (e.event == "join") {
        label += " " + field(r, e, "node", std::string());
      }
      arrows += fmt::format(
          "set label {} at {}, graph {:.2f} tc rgb '{}' font ',9' offset 0.3,0\n",
          quote(label), t, 0.95 - 0.07 * static_cast<double>(shown % 4), m.color);
      shown++;
    }
  }
  // the end: a thick red line for a failed job, a dotted black one otherwise
  std::string end_key;
  if (r.end) {
    bool failed = phase == "failed";
    auto color = failed ? "#d62728" : "#000000";
    arrows += fmt::format(
        "set arrow from {t}, graph 0 to {t}, graph 1 nohead lw {w} lc rgb '{c}' "
        "dt {d}\n",
        fmt::arg("t", end_t), fmt::arg("w", failed ? 3 : 1.5), fmt::arg("c", color),
        fmt::arg("d", failed ? 1 : 3));
    arrows += fmt::format("set label {} at {}, graph 0.5 right tc rgb '{}' font ',10' "
                          "offset -0.3,0\n",
                          quote(failed ? "FAILED" : "end"), end_t, color);
    end_key =
        fmt::format(", NaN with lines lw {} dt {} lc rgb '{}' title {}", failed ? 3 : 1.5,
                    failed ? 1 : 3, color, quote(failed ? "job failed" : "job ended"));
  }
  std::string key;
  for (auto* m : legend) {
    key += fmt::format(", NaN with lines lw 1.5 dt 2 lc rgb '{}' title {}", m->color,
                       quote(m->legend));
  }
  key += end_key;
  return {arrows, key};
}

// "salamander: cnn on 4 nodes" (`kind` after "salamander"), or how the
// run did not end.
std::string title_start(const run_log& r, const std::string& kind) {
  std::string title = "salamander" + kind;
  if (r.start) {
    auto nodes = r.start->j.find("nodes");
    title +=
        fmt::format(": {} on {} nodes", field(r, *r.start, "model", std::string("?")),
                    nodes != r.start->j.end() && nodes->is_array() ? nodes->size() : 0);
  }
  if (!r.end) {
    title += ", NOT ENDED (no end line: still running, or its supervisor died)";
  }
  return title;
}

// The terminal, the data and two plots one above the other, with room right
// of the end marker.
std::string script_start(const plot_cli& cli, const std::string& data,
                         const std::string& title) {
  std::string gp;
  gp += "set terminal pngcairo size 1200,800 font 'sans,10'\n";
  gp += "set output " + quote(cli.output) + "\n";
  gp += data;
  gp += "set multiplot layout 2,1 title " + quote(title) + "\n";
  gp +=
      "set grid\nset key below\nset xlabel 'time (s)'\nset offsets 0, graph 0.03, 0, 0\n";
  return gp;
}

// The whole gnuplot script, data inline (a datablock), so that --script
// gives a file that draws the same plot again.
std::string gnuplot_script(const run_log& r, const plot_cli& cli,
                           std::map<std::string, size_t>& counts) {
  std::string data =
      "$batches << EOD\n# t samples_per_s loss batch plan_version loss_smoothed\n";
  auto breaks = line_breaks(r);
  double smooth = 0;
  for (size_t i = 0; i < r.batches.size(); ++i) {
    auto& b = r.batches[i];
    double loss = field(r, b, "loss", 0.0);
    smooth = i == 0 ? loss : 0.9 * smooth + 0.1 * loss;
    if (breaks[i]) {
      data += "\n"; // a blank line: gnuplot lifts the pen
    }
    data += fmt::format("{:.10g} {:.6g} {:.6g} {} {} {:.6g}\n", time_of(r, b),
                        field(r, b, "samples_per_s", 0.0), loss,
                        field(r, b, "batch", int64_t{0}),
                        field(r, b, "plan_version", int64_t{0}), smooth);
  }
  data += "EOD\n";

  std::string phase, error;
  double end_t = 0;
  if (r.end) {
    phase = field(r, *r.end, "phase", std::string("?"));
    error = field(r, *r.end, "error", std::string());
    end_t = time_of(r, *r.end);
  }
  std::string title = cli.title;
  if (title.empty()) {
    title = title_start(r, "");
    if (r.end && phase == "failed") {
      title += fmt::format(", FAILED at {:.1f} s: {}", end_t, shorten(error, 70));
    } else if (auto acc = r.end ? field(r, *r.end, "accuracy", -1.0) : -1.0; acc >= 0) {
      title += fmt::format(", test accuracy {:.2f}%", 100 * acc);
    }
  }

  auto [arrows, key] = event_marks(r, counts);

  auto gp = script_start(cli, data, title);
  gp += "set ylabel 'samples/s'\nset yrange [0:*]\n";
  gp += arrows;
  gp += "plot $batches using 1:($2 > 0 ? $2 : 1/0) with lines lw 2 lc rgb '#1f77b4' "
        "title 'throughput (samples/s over the last 20 batches)'" +
        key + "\n";
  gp += "set ylabel 'loss'\nset yrange [*:*]\n";
  gp += arrows;
  gp +=
      "plot $batches using 1:3 with points pt 7 ps 0.3 lc rgb '#555555' title 'loss (per "
      "batch)', $batches using 1:6 with lines lw 2 lc rgb '#d62728' title 'loss "
      "(smoothed)'\n";
  gp += "unset multiplot\n";
  return gp;
}

// A serving run: requests per second and latency percentiles from its
// `serve` lines (one a second), with the same event marks.
std::string serve_script(const run_log& r, const plot_cli& cli,
                         std::map<std::string, size_t>& counts) {
  std::string data = "$serve << EOD\n# t requests_per_s p50_ms p95_ms p99_ms queue\n";
  size_t rows = 0;
  for (auto& e : r.events) {
    if (e.event != "serve") {
      continue;
    }
    rows++;
    data += fmt::format(
        "{:.10g} {:.6g} {:.6g} {:.6g} {:.6g} {}\n", time_of(r, e),
        field(r, e, "requests_per_s", 0.0), 1e3 * field(r, e, "latency_p50_s", 0.0),
        1e3 * field(r, e, "latency_p95_s", 0.0), 1e3 * field(r, e, "latency_p99_s", 0.0),
        field(r, e, "queue", int64_t{0}));
  }
  data += "EOD\n";
  counts["serve"] = rows;
  if (rows == 0) {
    throw log_error(r.path + " has no serve lines: nothing to plot");
  }
  std::string title = cli.title;
  if (title.empty()) {
    title = title_start(r, " serve");
    if (r.end) {
      title += fmt::format(", {} requests answered, {} failed, {} refused",
                           field(r, *r.end, "requests", int64_t{0}),
                           field(r, *r.end, "failed", int64_t{0}),
                           field(r, *r.end, "rejected", int64_t{0}));
    }
  }
  auto [arrows, key] = event_marks(r, counts);
  auto gp = script_start(cli, data, title);
  gp += "set ylabel 'requests/s'\nset yrange [0:*]\n";
  gp += arrows;
  gp += "plot $serve using 1:2 with lines lw 2 lc rgb '#1f77b4' title 'answered "
        "(requests/s over the last 5 s)'" +
        key + "\n";
  gp += "set ylabel 'latency (ms)'\nset yrange [0:*]\n";
  gp += arrows;
  gp +=
      "plot $serve using 1:3 with lines lw 2 lc rgb '#2ca02c' title 'p50', $serve using "
      "1:4 with lines lw 1.5 lc rgb '#ff7f0e' title 'p95', $serve using 1:5 with lines "
      "lw 2 lc rgb '#d62728' title 'p99'\n";
  gp += "unset multiplot\n";
  return gp;
}

// Runs gnuplot on `gp` (and keeps it in --script); `what` not "": the
// line that says what was plotted.
int draw(const plot_cli& cli, const std::string& gp, const std::string& what) {
  auto log = logger("plot");
  if (!cli.script.empty()) {
    std::ofstream(cli.script) << gp;
  }
  auto tmp = std::filesystem::temp_directory_path() /
             fmt::format("salamander-plot-{}", ::getpid());
  std::filesystem::create_directories(tmp);
  auto script = tmp / "plot.gp";
  std::ofstream(script) << gp;
  auto cmd = fmt::format("gnuplot {} 2>{}", quote(script.string()),
                         quote((tmp / "gnuplot.err").string()));
  int rc = std::system(cmd.c_str());
  int code = rc == -1 ? -1 : WEXITSTATUS(rc);
  if (code != 0) {
    std::ifstream err(tmp / "gnuplot.err");
    std::string why((std::istreambuf_iterator<char>(err)),
                    std::istreambuf_iterator<char>());
    std::filesystem::remove_all(tmp);
    if (code == 127) {
      log->error(
          "gnuplot is not installed (apt install gnuplot-nox; deploy/install-deps.sh "
          "does)");
    } else {
      log->error("gnuplot failed ({}): {}", code, why);
    }
    return 1;
  }
  std::filesystem::remove_all(tmp);
  if (!what.empty()) {
    log->info("plotted {} to {}", what, cli.output);
    std::printf("plot: %s\n", cli.output.c_str());
  }
  return 0;
}

bool federated(const run_log& r) {
  return r.start && field(r, *r.start, "mode", std::string()) == "federate";
}

bool split_run(const run_log& r) {
  return r.start && field(r, *r.start, "mode", std::string()) == "split";
}

// Runs in rounds, one or several: federated runs draw the global model's
// accuracy after each round against training time (the first round's start
// is 0) and the rounds' times below; split-learning runs draw accuracy
// against the bytes that crossed the cut, and against training time below.
// One line per run.
std::string rounds_script(const std::vector<run_log>& runs, const plot_cli& cli,
                          std::map<std::string, size_t>& counts) {
  bool split = split_run(runs.front());
  std::string data, top_plot, bottom_plot;
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                 "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  for (size_t i = 0; i < runs.size(); ++i) {
    auto& r = runs[i];
    auto block = fmt::format("$run{}", i);
    data += block + " << EOD\n# train_s accuracy round_s round mbytes\n";
    size_t rows = 0;
    for (auto& e : r.events) {
      if (e.event != "round") {
        continue;
      }
      rows++;
      data +=
          fmt::format("{:.6g} {:.6g} {:.6g} {} {:.6g}\n", field(r, e, "train_s", 0.0),
                      100 * field(r, e, "accuracy", 0.0), field(r, e, "round_s", 0.0),
                      field(r, e, "round", int64_t{0}), field(r, e, "bytes", 0.0) / 1e6);
    }
    data += "EOD\n";
    counts["round"] += rows;
    if (rows == 0) {
      throw log_error(r.path + " has no round lines: nothing to plot");
    }
    auto key = split ? "method" : "strategy";
    auto name_of = [&](const run_log& x) {
      return x.start ? field(x, *x.start, key, std::string("?")) : std::string("?");
    };
    auto name = name_of(r);
    // two runs of one method or strategy (a sweep): their files tell them apart
    if (std::count_if(runs.begin(), runs.end(),
                      [&](const run_log& x) { return name_of(x) == name; }) > 1) {
      name = std::filesystem::path(r.path).stem().string();
      std::replace(name.begin(), name.end(), '_', ' '); // gnuplot: _ subscripts
    }
    auto color = colors[i % (sizeof(colors) / sizeof(colors[0]))];
    auto sep = i == 0 ? std::string("plot ") : std::string(", ");
    auto line = [&](const char* cols) {
      return sep +
             fmt::format("{} using {} with linespoints lw 2 pt 7 ps 0.5 lc rgb '{}' "
                         "title {}",
                         block, cols, color, quote(name));
    };
    top_plot += split ? line("5:2") : line("1:2");
    bottom_plot += split
                       ? line("1:2")
                       : sep + fmt::format("{} using 1:3 with points pt 7 ps 0.6 lc rgb "
                                           "'{}' title {}",
                                           block, color, quote(name));
  }
  std::string title = cli.title;
  if (title.empty()) {
    title = title_start(runs.front(), split ? " split learning" : " federated");
    if (runs.size() > 1) {
      title += fmt::format(" ({} runs)", runs.size());
    }
  }
  auto gp = script_start(cli, data, title);
  if (split) {
    gp += "set xlabel 'across the cut, up and down (MB)'\n";
    gp += "set ylabel 'test accuracy (%)'\nset yrange [*:*]\n" + top_plot + "\n";
    gp += "set xlabel 'training time (s)'\n";
    gp += "set ylabel 'test accuracy (%)'\nset yrange [*:*]\n" + bottom_plot + "\n";
  } else {
    gp += "set xlabel 'training time (s)'\n";
    gp += "set ylabel 'test accuracy (%)'\nset yrange [*:*]\n" + top_plot + "\n";
    gp += "set ylabel 'round time (s)'\nset yrange [0:*]\n" + bottom_plot + "\n";
  }
  gp += "unset multiplot\n";
  return gp;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// -o report.html: the run as the dashboard shows it, in one self-contained
// page (apps/dashboard/report.hpp).
int report_log(const plot_cli& cli, const run_log& r) {
  if (!cli.more.empty()) {
    throw log_error("an HTML report is of one run: give one metrics log");
  }
  std::vector<entry> all;
  all.insert(all.end(), r.batches.begin(), r.batches.end());
  all.insert(all.end(), r.events.begin(), r.events.end());
  std::stable_sort(all.begin(), all.end(),
                   [](const entry& a, const entry& b) { return a.line < b.line; });
  std::vector<nlohmann::json> lines;
  lines.reserve(all.size());
  for (auto& e : all) {
    lines.push_back(e.j);
  }
  auto title = cli.title.empty() ? std::filesystem::path(cli.metrics).parent_path().filename().string()
                                 : cli.title;
  auto page = report_page(report_data(lines, title.empty() ? cli.metrics : title));
  std::ofstream out(cli.output, std::ios::binary);
  if (!out || !(out << page) || !out.flush()) {
    throw log_error("cannot write " + cli.output);
  }
  logger("plot")->info("wrote the report of {} ({} batches, {} events) to {}", cli.metrics,
                       r.batches.size(), r.events.size(), cli.output);
  std::printf("plot: %s\n", cli.output.c_str());
  return 0;
}

int plot_log(const plot_cli& cli) {
  auto log = logger("plot");
  bool html = ends_with(cli.output, ".html") || ends_with(cli.output, ".htm");
  if (!html && !ends_with(cli.output, ".png")) {
    throw log_error("-o " + cli.output + ": the format follows the extension, .png (a plot, "
                    "with gnuplot) or .html (a self-contained report page)");
  }
  auto r = read_log(cli.metrics);
  if (r.bad_lines > 0) {
    log->warn("{}: skipped {} unreadable line(s) (the first is line {})", cli.metrics,
              r.bad_lines, r.first_bad_line);
  }
  if (html) {
    return report_log(cli, r);
  }
  bool serving = r.start && field(r, *r.start, "mode", std::string()) == "serve";
  if (federated(r) || split_run(r) || !cli.more.empty()) {
    std::vector<run_log> runs{r};
    for (auto& path : cli.more) {
      runs.push_back(read_log(path));
    }
    for (auto& run : runs) {
      if (!(federated(run) && federated(r)) && !(split_run(run) && split_run(r))) {
        throw log_error(run.path + " is not a " + (split_run(r) ? "split" : "federated") +
                        " run's log: only federated runs, or split-learning runs, are "
                        "drawn together");
      }
    }
    std::map<std::string, size_t> counts;
    auto gp = rounds_script(runs, cli, counts);
    return draw(cli, gp,
                fmt::format("{} round(s) of {} run(s)", counts["round"], runs.size()));
  }
  if (r.batches.empty() && !serving) {
    log->error("{} has no batch lines: nothing to plot", cli.metrics);
    return 1;
  }
  std::map<std::string, size_t> counts;
  auto gp = serving ? serve_script(r, cli, counts) : gnuplot_script(r, cli, counts);
  if (int code = draw(cli, gp, ""); code != 0) {
    return code;
  }
  std::string summary;
  for (auto& [k, n] : counts) {
    summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", n, k);
  }
  log->info("plotted {} {}{} to {}", serving ? counts["serve"] : r.batches.size(),
            serving ? "serve lines" : "batches",
            summary.empty() ? "" : " and " + summary + " event(s)", cli.output);
  std::printf("plot: %s\n", cli.output.c_str());
  return 0;
}

int run_plot(const plot_cli& cli) {
  try {
    return plot_log(cli);
  } catch (const log_error& e) {
    logger("plot")->error("{}", e.what());
    return 2;
  }
}

// What `audit` says about a log read in full.
int audit_run(const run_log& r) {
  auto log = logger("audit");
  if (r.bad_lines > 0) {
    log->warn(
        "{}: {} line(s) are not metrics events and were skipped (the first is line {})",
        r.path, r.bad_lines, r.first_bad_line);
  }
  if (r.lines == 0) {
    log->error("{} is empty: no job wrote to it", r.path);
    return 2;
  }
  if (!r.end) {
    log->error(
        "{} has no end line: the job did not end (still running, or its supervisor "
        "died)",
        r.path);
    return 2;
  }
  auto& end = *r.end;
  auto lineage = field(r, end, "lineage", std::vector<uint64_t>{});
  auto phase = field(r, end, "phase", std::string("?"));
  auto committed = field(r, end, "committed", int64_t{0});
  auto redone = field(r, end, "redone_batches", int64_t{0});
  auto exact = field(r, end, "exact", true);
  auto missed = field(r, end, "missed_layer_updates", int64_t{0});
  auto error = field(r, end, "error", std::string("?"));
  auto problem = actors::check_lineage(lineage);
  size_t failures = 0, recoveries = 0;
  for (auto& e : r.events) {
    failures += e.event == "failure";
    recoveries += e.event == "recovered";
  }
  std::printf(
      "job ended: %s after %lld committed batches; %zu failure(s), %zu recovery(ies), "
      "%lld batches redone\n",
      phase.c_str(), static_cast<long long>(committed), failures, recoveries,
      static_cast<long long>(redone));
  if (!problem.empty()) {
    std::printf("lineage: %zu batches, NOT each exactly once: %s\n", lineage.size(),
                problem.c_str());
    return 1;
  }
  if (!exact) {
    std::printf(
        "lineage: %zu batches, but NOT exact: the fast recovery policy kept "
        "survivors' newer weights and lost layers missed %lld (layer, batch) updates\n",
        lineage.size(), static_cast<long long>(missed));
    return 1;
  }
  std::printf("lineage: %zu batches, each exactly once: yes\n", lineage.size());
  if (phase != "finished") {
    // a job that failed trained what its lineage says, but not what was asked
    std::printf("the job did NOT finish: %s\n", error.c_str());
    return 1;
  }
  return 0;
}

int audit_log(const audit_cli& cli) {
  return audit_run(read_log(cli.metrics));
}

int run_audit(const audit_cli& cli) {
  try {
    return audit_log(cli);
  } catch (const log_error& e) {
    // a field of the wrong type (hand-edited or foreign file): say where
    logger("audit")->error("{}", e.what());
    return 2;
  }
}

} // namespace

command add_plot(CLI::App& app) {
  auto cli = std::make_shared<plot_cli>();
  auto files = std::make_shared<std::vector<std::string>>();
  auto* sub = app.add_subcommand(
      "plot", "draw throughput and loss over time from a metrics log, with failures, "
              "recoveries, re-plans and joins marked; for federated runs, accuracy "
              "against training time of one or several runs; for split-learning runs, "
              "accuracy against the bytes across the cut (needs gnuplot); with -o "
              "report.html, one self-contained page of the run as the dashboard shows it");
  sub->add_option("metrics", *files,
                  "the job's metrics.jsonl; several federated (or split-learning) runs' "
                  "logs are drawn together")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("-o,--output", cli->output,
                  "file to write: .png draws the plot (gnuplot), .html a self-contained "
                  "report page with the dashboard's curves and timeline")
      ->required();
  sub->add_option(
      "--title", cli->title,
      "title (default: model, nodes, and the accuracy or why the job failed)");
  sub->add_option(
      "--script", cli->script,
      "also write the gnuplot script here (its data inline), to adjust and re-run");
  return {sub, [cli, files] {
            cli->metrics = files->front();
            cli->more.assign(files->begin() + 1, files->end());
            return run_plot(*cli);
          }};
}

command add_audit(CLI::App& app) {
  auto cli = std::make_shared<audit_cli>();
  auto* sub = app.add_subcommand(
      "audit",
      "check from a metrics log that the final weights saw every batch exactly once");
  sub->add_option("metrics", cli->metrics, "the job's metrics.jsonl")
      ->required()
      ->check(CLI::ExistingFile);
  return {sub, [cli] { return run_audit(*cli); }};
}

} // namespace salamander::apps
