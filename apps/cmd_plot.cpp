// `salamander plot metrics.jsonl -o run.png`: throughput and loss over time
// with failures, recoveries, re-plans and joins marked, drawn by gnuplot.
// `salamander audit metrics.jsonl`: checks that the final weights' lineage
// holds every batch exactly once.
#include "actors/job/metrics.hpp"
#include "apps/commands.hpp"
#include "apps/runtime_env.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sys/wait.h>

namespace salamander::apps {

namespace {

struct run_log {
  std::vector<nlohmann::json> batches;
  std::vector<nlohmann::json> events; ///< everything but batches
  nlohmann::json start;
  nlohmann::json end;
  size_t lines = 0;
  size_t bad_lines = 0;
  size_t first_bad_line = 0; ///< 1-based; 0: none
};

run_log read_log(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::invalid_argument("cannot read the metrics log " + path);
  }
  run_log r;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) {
      continue;
    }
    r.lines++;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("event") || !j["event"].is_string() ||
        !j.contains("t") || !j["t"].is_number()) {
      // e.g. the last line of a run that was killed mid-write
      r.bad_lines++;
      if (r.first_bad_line == 0) {
        r.first_bad_line = number;
      }
      continue;
    }
    auto kind = j["event"].get<std::string>();
    if (kind == "batch") {
      r.batches.push_back(std::move(j));
    } else {
      if (kind == "start") {
        r.start = j;
      } else if (kind == "end") {
        r.end = j;
      }
      r.events.push_back(std::move(j));
    }
  }
  return r;
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
};

const marker markers[] = {
    {"failure", "#d62728", "failure"},   {"recovered", "#2ca02c", "recovered"},
    {"replan", "#1f77b4", "re-plan"},    {"join", "#ff7f0e", "join"},
    {"paused", "#9467bd", "paused"},     {"pause", "#9467bd", "pause"},
    {"resume", "#9467bd", "resume"},     {"checkpoint", "#7f7f7f", "checkpoint"},
};

} // namespace

int plot_log(const plot_cli& cli) {
  auto log = logger("plot");
  auto r = read_log(cli.metrics);
  if (r.bad_lines > 0) {
    log->warn("skipped {} unreadable line(s) in {}", r.bad_lines, cli.metrics);
  }
  if (r.batches.empty()) {
    log->error("{} has no batch lines: nothing to plot", cli.metrics);
    return 1;
  }
  auto tmp = std::filesystem::temp_directory_path() /
             fmt::format("salamander-plot-{}", ::getpid());
  std::filesystem::create_directories(tmp);
  auto data = tmp / "batches.dat";
  {
    std::ofstream out(data);
    out << "# t samples_per_s loss batch plan_version\n";
    for (auto& b : r.batches) {
      out << b.value("t", 0.0) << ' ' << b.value("samples_per_s", 0.0) << ' '
          << b.value("loss", 0.0) << ' ' << b.value("batch", 0) << ' '
          << b.value("plan_version", 0) << '\n';
    }
  }
  std::string title = cli.title;
  if (title.empty()) {
    title = "salamander";
    if (r.start.is_object()) {
      title += fmt::format(": {} on {} nodes", r.start.value("model", std::string("?")),
                           r.start.contains("nodes") ? r.start["nodes"].size() : 0);
    }
    if (r.end.is_object() && r.end.value("accuracy", -1.0) >= 0) {
      title += fmt::format(", test accuracy {:.2f}%", 100 * r.end.value("accuracy", 0.0));
    }
  }
  std::string arrows;
  size_t shown = 0;
  std::map<std::string, size_t> counts;
  std::map<std::string, double> last_marked; // kind -> t
  for (auto& e : r.events) {
    auto kind = e["event"].get<std::string>();
    for (auto& m : markers) {
      if (kind == m.kind) {
        double t = e.value("t", 0.0);
        counts[kind]++;
        // a node's loss shows as its stages' and its own failure at once: one mark
        if (auto it = last_marked.find(kind); it != last_marked.end() && t - it->second < 0.3) {
          continue;
        }
        last_marked[kind] = t;
        arrows += fmt::format("set arrow from {t}, graph 0 to {t}, graph 1 nohead lw 1.5 "
                              "lc rgb '{c}' dt 2\n",
                              fmt::arg("t", t), fmt::arg("c", m.color));
        std::string label = m.label;
        if (kind == "recovered") {
          label += fmt::format(" {:.2f}s", e.value("recovery_s", 0.0));
        } else if (kind == "join") {
          label += " " + e.value("node", std::string());
        }
        arrows += fmt::format("set label {} at {}, graph {:.2f} tc rgb '{}' font ',9' offset 0.3,0\n",
                              quote(label), t, 0.95 - 0.07 * static_cast<double>(shown % 4),
                              m.color);
        shown++;
      }
    }
  }
  auto script = tmp / "plot.gp";
  {
    std::ofstream gp(script);
    gp << "set terminal pngcairo size 1200,800 font 'sans,10'\n";
    gp << "set output " << quote(cli.output) << "\n";
    gp << "set multiplot layout 2,1 title " << quote(title) << "\n";
    gp << "set grid\nset key below\nset xlabel 'time (s)'\n";
    gp << "set ylabel 'samples/s'\nset yrange [0:*]\n";
    gp << arrows;
    gp << "plot " << quote(data.string())
       << " using 1:($2 > 0 ? $2 : 1/0) with lines lw 2 lc rgb '#1f77b4' "
          "title 'throughput (samples/s over the last 20 batches)'\n";
    gp << "set ylabel 'loss'\nset yrange [*:*]\n";
    gp << arrows;
    gp << "plot " << quote(data.string())
       << " using 1:3 with points pt 7 ps 0.3 lc rgb '#555555' title 'loss (per batch)', "
       << quote(data.string())
       << " using 1:3 smooth bezier lw 2 lc rgb '#d62728' title 'loss (smoothed)'\n";
    gp << "unset multiplot\n";
  }
  auto cmd = fmt::format("gnuplot {} 2>{}", quote(script.string()),
                         quote((tmp / "gnuplot.err").string()));
  int rc = std::system(cmd.c_str());
  int code = rc == -1 ? -1 : WEXITSTATUS(rc);
  if (code != 0) {
    std::ifstream err(tmp / "gnuplot.err");
    std::string why((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
    std::filesystem::remove_all(tmp);
    if (code == 127) {
      log->error("gnuplot is not installed (apt install gnuplot-nox; deploy/install-deps.sh "
                 "does)");
    } else {
      log->error("gnuplot failed ({}): {}", code, why);
    }
    return 1;
  }
  std::filesystem::remove_all(tmp);
  std::string summary;
  for (auto& [k, n] : counts) {
    summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", n, k);
  }
  log->info("plotted {} batches{} to {}", r.batches.size(),
            summary.empty() ? "" : " and " + summary + " event(s)", cli.output);
  std::printf("plot: %s\n", cli.output.c_str());
  return 0;
}

int run_plot(const plot_cli& cli) {
  try {
    return plot_log(cli);
  } catch (const nlohmann::json::exception& e) {
    logger("plot")->error("{}: a metrics event has a field of the wrong type: {}", cli.metrics,
                          e.what());
    return 2;
  }
}

int audit_log(const audit_cli& cli) {
  auto log = logger("audit");
  auto r = read_log(cli.metrics);
  if (r.bad_lines > 0) {
    log->warn("{}: {} line(s) are not metrics events and were skipped (the first is line {})",
              cli.metrics, r.bad_lines, r.first_bad_line);
  }
  if (r.lines == 0) {
    log->error("{} is empty: no job wrote to it", cli.metrics);
    return 2;
  }
  if (!r.end.is_object()) {
    log->error("{} has no end line: the job did not end (still running, or its supervisor "
               "died)",
               cli.metrics);
    return 2;
  }
  auto lineage = r.end.value("lineage", std::vector<uint64_t>{});
  auto problem = actors::check_lineage(lineage);
  size_t failures = 0, recoveries = 0;
  for (auto& e : r.events) {
    auto kind = e["event"].get<std::string>();
    failures += kind == "failure";
    recoveries += kind == "recovered";
  }
  std::printf("job ended: %s after %lld committed batches; %zu failure(s), %zu recovery(ies), "
              "%lld batches redone\n",
              r.end.value("phase", std::string("?")).c_str(),
              static_cast<long long>(r.end.value("committed", 0)), failures, recoveries,
              static_cast<long long>(r.end.value("redone_batches", 0)));
  if (!problem.empty()) {
    std::printf("lineage: %zu batches, NOT each exactly once: %s\n", lineage.size(),
                problem.c_str());
    return 1;
  }
  if (!r.end.value("exact", true)) {
    std::printf("lineage: %zu batches, but NOT exact: the fast recovery policy kept "
                "survivors' newer weights and lost layers missed %lld (layer, batch) updates\n",
                lineage.size(), static_cast<long long>(r.end.value("missed_layer_updates", 0)));
    return 1;
  }
  std::printf("lineage: %zu batches, each exactly once: yes\n", lineage.size());
  if (r.end.value("phase", std::string()) != "finished") {
    // a job that failed trained what its lineage says, but not what was asked
    std::printf("the job did NOT finish: %s\n", r.end.value("error", std::string("?")).c_str());
    return 1;
  }
  return 0;
}

int run_audit(const audit_cli& cli) {
  try {
    return audit_log(cli);
  } catch (const nlohmann::json::exception& e) {
    // a field of the wrong type (hand-edited or foreign file): say which file
    logger("audit")->error("{}: a metrics event has a field of the wrong type: {}", cli.metrics,
                           e.what());
    return 2;
  }
}

} // namespace salamander::apps
