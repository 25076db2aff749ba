#include "apps/dashboard/report.hpp"

#include "apps/dashboard/assets.hpp"

#include <algorithm>
#include <regex>
#include <stdexcept>

namespace salamander::apps {

namespace {

using json = nlohmann::json;

double num(const json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string text(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

// Replaces the one `marker` in `page`; throws when it is not there (the
// page and this file disagree).
void put(std::string& page, const std::string& marker, const std::string& with) {
  auto at = page.find(marker);
  if (at == std::string::npos) {
    throw std::logic_error("the dashboard's page has no " + marker);
  }
  page.replace(at, marker.size(), with);
}

// JSON inside <script>: no "</" can end the element early.
std::string script_safe(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') {
      out += "\\u003c";
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string mode_of(const std::vector<json>& lines) {
  for (auto& l : lines) {
    if (text(l, "event") == "start") {
      auto m = text(l, "mode");
      return m.empty() ? "train" : m;
    }
  }
  for (auto& l : lines) {
    if (text(l, "event") == "serve") {
      return "serve";
    }
  }
  return "train";
}

// The events after which another plan runs (each names it in "plan").
bool starts_plan(const std::string& ev) {
  return ev == "plan" || ev == "recovered" || ev == "replan" || ev == "resumed";
}

// Each stage's mean compute, wait and send per batch since the last plan
// (the batch lines' "stages").
json stage_time(const std::vector<json>& lines) {
  std::vector<double> compute, wait, send;
  double n = 0;
  for (auto& l : lines) {
    auto ev = text(l, "event");
    if (starts_plan(ev)) {
      compute.clear();
      wait.clear();
      send.clear();
      n = 0;
    }
    if (ev != "batch" || !l.contains("stages") || !l["stages"].is_array()) {
      continue;
    }
    ++n;
    for (auto& s : l["stages"]) {
      auto i = static_cast<size_t>(std::max(0.0, num(s, "stage")));
      if (i >= 1024) {
        continue;
      }
      if (i >= compute.size()) {
        compute.resize(i + 1);
        wait.resize(i + 1);
        send.resize(i + 1);
      }
      compute[i] += num(s, "compute_s");
      wait[i] += num(s, "wait_s");
      send[i] += num(s, "send_s");
    }
  }
  json out = json::array();
  for (size_t i = 0; i < compute.size() && n > 0; ++i) {
    out.push_back({{"stage", i},
                   {"compute_s", compute[i] / n},
                   {"wait_s", wait[i] / n},
                   {"send_s", send[i] / n}});
  }
  return out;
}

// The nodes of the final plan (bars), and the ones the start named.
json final_state(const std::vector<json>& lines, const std::string& mode) {
  std::string plan, phase = "unknown", error;
  double t = 0;
  double batches = 0;
  std::vector<std::string> names;
  for (auto& l : lines) {
    auto ev = text(l, "event");
    t = std::max(t, num(l, "t"));
    batches += ev == "batch";
    if (ev == "start" && l.contains("nodes") && l["nodes"].is_array()) {
      for (auto& n : l["nodes"]) {
        if (n.is_string()) {
          names.push_back(n.get<std::string>());
        }
      }
    }
    if (starts_plan(ev) &&
        !text(l, "plan").empty()) {
      plan = text(l, "plan");
    }
    if (ev == "end") {
      phase = text(l, "phase").empty() ? "finished" : text(l, "phase");
      error = text(l, "error");
    }
  }
  auto stages = parse_plan_text(plan);
  json st = json::array();
  for (size_t i = 0; i < stages.size(); ++i) {
    st.push_back({{"index", i},
                  {"node", stages[i]["node"]},
                  {"begin", stages[i]["begin"]},
                  {"end", stages[i]["end"]}});
    auto name = stages[i]["node"].get<std::string>();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(name);
    }
  }
  json nodes = json::array();
  for (auto& name : names) {
    json layers = json::array();
    json replicas = json::array();
    for (size_t i = 0; i < st.size(); ++i) {
      if (st[i]["node"] == name) {
        layers.push_back({{"stage", i}, {"begin", st[i]["begin"]}, {"end", st[i]["end"]}});
      }
      if (mode == "train" && i + 1 < st.size() && st[i + 1]["node"] == name) {
        replicas.push_back({{"stage", i}, {"begin", st[i]["begin"]}, {"end", st[i]["end"]}});
      }
    }
    nodes.push_back({{"name", name},
                     {"state", layers.empty() && !st.empty() ? "idle" : "online"},
                     {"health", "ok"},
                     {"role", layers.empty() ? "not in the final plan" : ""},
                     {"emulation", "none"},
                     {"cpu_share", 1.0},
                     {"speed", 0.0},
                     {"capacity", 1.0},
                     {"memory_bytes", 0.0},
                     {"link_bytes_per_s", 0.0},
                     {"link_latency_s", 0.0},
                     {"last_heartbeat_s", -1.0},
                     {"layers", layers},
                     {"replicas", replicas},
                     {"clients", json::array()}});
  }
  json job{{"mode", mode},
           {"phase", phase},
           {"finished", true},
           {"elapsed_s", t},
           {"plan", plan},
           {"error", error},
           {"health", "ok"},
           {"stages", st},
           {"pipeline", {{"stage_time", stage_time(lines)}}},
           {"progress", {{"done", batches}, {"total", batches}, {"unit", "batches"}, {"eta_s", 0}}}};
  return json{{"job", job}, {"nodes", nodes}};
}

} // namespace

json parse_plan_text(const std::string& plan) {
  static const std::regex entry(R"(([^\s\[]+)\[(\d+),(\d+)\))");
  json out = json::array();
  for (auto it = std::sregex_iterator(plan.begin(), plan.end(), entry);
       it != std::sregex_iterator(); ++it) {
    out.push_back({{"node", (*it)[1].str()},
                   {"begin", std::stoull((*it)[2].str())},
                   {"end", std::stoull((*it)[3].str())}});
  }
  return out;
}

json report_data(const std::vector<json>& lines, const std::string& title,
                 size_t max_samples) {
  auto mode = mode_of(lines);
  size_t batches = 0;
  for (auto& l : lines) {
    batches += text(l, "event") == "batch";
  }
  size_t every = std::max<size_t>(1, (batches + max_samples - 1) / std::max<size_t>(1, max_samples));
  json samples = json::array();
  json events = json::array();
  size_t batch = 0;
  for (auto& l : lines) {
    auto ev = text(l, "event");
    double t = num(l, "t");
    if (ev == "batch") {
      if (batch++ % every == 0) {
        samples.push_back({{"t", t},
                           {"samples_per_s", num(l, "samples_per_s")},
                           {"loss", l.contains("loss") ? l["loss"] : json(nullptr)}});
      }
      continue;
    }
    if (ev == "evaluated" && l.contains("accuracy")) {
      samples.push_back({{"t", t}, {"accuracy", l["accuracy"]}});
    }
    if (ev == "serve") {
      samples.push_back({{"t", t},
                         {"requests_per_s", num(l, "requests_per_s")},
                         {"p50_ms", 1e3 * num(l, "latency_p50_s")},
                         {"p99_ms", 1e3 * num(l, "latency_p99_s")},
                         {"queue", num(l, "queue")}});
    }
    auto e = l;
    e["seq"] = events.size(); // the page tells events apart by number
    events.push_back(std::move(e));
  }
  return json{{"title", title},
              {"mode", mode},
              {"state", final_state(lines, mode)},
              {"samples", samples},
              {"events", events}};
}

std::string report_page(const json& data) {
  std::string page(dashboard_assets::page());
  put(page, R"(<link rel="stylesheet" href="app.css">)",
      "<style>\n" + std::string(dashboard_assets::style()) + "\n</style>");
  put(page, R"(<script src="chart.js"></script>)",
      "<script>\n" + std::string(dashboard_assets::chart()) + "\n</script>");
  put(page, R"(<script src="app.js"></script>)",
      "<script>\n" + std::string(dashboard_assets::script()) + "\n</script>");
  put(page, "<!--salamander:report-data-->",
      R"(<script type="application/json" id="report-data">)" +
          script_safe(data.dump(-1, ' ', false, json::error_handler_t::replace)) +
          "</script>");
  put(page, "<!--salamander:report-head-->",
      "<meta name=\"generator\" content=\"salamander plot\">");
  return page;
}

} // namespace salamander::apps
