// Triton's statistics, configuration and metrics for a served model, see
// triton_reports.hpp.
#include "apps/triton_reports.hpp"

#include <fmt/format.h>

#include <map>

namespace salamander::apps {

namespace {

using json = nlohmann::json;

json timed(int64_t count, int64_t ns) {
  return json{{"count", count}, {"ns", ns}};
}

json timed(const timed_count& t) {
  return timed(t.count, t.ns);
}

json tensor_config(const std::string& name, const std::vector<int64_t>& dims) {
  return json{{"name", name}, {"data_type", "TYPE_FP32"}, {"dims", dims}};
}

} // namespace

std::vector<std::string> protocol_extensions() {
  return {"binary_tensor_data", "statistics", "model_configuration", "model_repository"};
}

json model_stats(const served_model& m, const serving_status& s, const front_counters& front) {
  json batches = json::array();
  for (auto& b : s.batches) {
    // the pipeline times a micro-batch as a whole: reading inputs and
    // writing outputs are per request (inference_stats), not per batch
    batches.push_back(json{{"batch_size", b.rows}, {"compute_infer", timed(b.count, b.infer_ns)}});
  }
  return json{{"name", m.name},
              {"version", m.version},
              {"last_inference", s.last_answer_ms},
              {"inference_count", s.rows},
              {"execution_count", s.executions},
              {"inference_stats",
               {{"success", timed(front.success)},
                {"fail", timed(front.failure)},
                {"queue", timed(s.requests, s.queue_ns)},
                {"compute_input", timed(front.compute_input)},
                {"compute_infer", timed(s.requests, s.infer_ns)},
                {"compute_output", timed(front.compute_output)},
                {"cache_hit", timed(0, 0)},
                {"cache_miss", timed(0, 0)}}},
              {"batch_stats", batches}};
}

json model_config(const served_model& m, const job_status& s) {
  json stages = json::array();
  for (auto& r : s.stages) {
    stages.push_back(json{{"stage", r.index},
                          {"node", r.node},
                          {"layers", json::array({r.begin, r.end})},
                          {"busy_s", r.measured_s}});
  }
  json config{{"name", m.name},
              {"platform", "salamander"},
              {"backend", "salamander"},
              {"version_policy", {{"specific", {{"versions", json::array({m.version})}}}}},
              {"max_batch_size", m.max_batch},
              {"input", json::array({tensor_config("input", m.input_dims)})},
              {"output", json::array({tensor_config("output", m.output_dims)})},
              {"salamander",
               {{"spec", m.spec}, {"phase", to_string(s.phase)}, {"plan", s.plan},
                {"stages", stages}}}};
  if (m.batching) {
    config["dynamic_batching"] = json{{"max_queue_delay_microseconds", m.batch_delay_us}};
  }
  return config;
}

std::string triton_metrics(const served_model& m, const serving_status& s,
                           const front_counters& front) {
  std::string out;
  auto labels = fmt::format("model=\"{}\",version=\"{}\"", m.name, m.version);
  auto series = [&](const char* name, const char* type, const char* help, int64_t value) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0}{{{3}}} {4}\n", name, help, type,
                       labels, value);
  };
  auto us = [](int64_t ns) { return ns / 1000; };
  series("nv_inference_request_success", "counter",
         "Number of successful inference requests, all batch sizes", front.success.count);
  series("nv_inference_request_failure", "counter",
         "Number of failed inference requests, all batch sizes", front.failure.count);
  series("nv_inference_count", "counter", "Number of inferences performed (rows)", s.rows);
  series("nv_inference_exec_count", "counter",
         "Number of model executions performed (micro-batches)", s.executions);
  series("nv_inference_request_duration_us", "counter",
         "Cumulative inference request duration in microseconds", us(front.success.ns));
  series("nv_inference_queue_duration_us", "counter",
         "Cumulative inference queuing duration in microseconds", us(s.queue_ns));
  series("nv_inference_compute_input_duration_us", "counter",
         "Cumulative compute input duration in microseconds", us(front.compute_input.ns));
  series("nv_inference_compute_infer_duration_us", "counter",
         "Cumulative compute inference duration in microseconds (the pipeline)",
         us(s.infer_ns));
  series("nv_inference_compute_output_duration_us", "counter",
         "Cumulative inference compute output duration in microseconds",
         us(front.compute_output.ns));
  series("nv_inference_pending_request_count", "gauge",
         "Instantaneous number of pending requests awaiting execution", front.pending);
  return out;
}

std::string merge_metric_families(const std::vector<std::string>& texts) {
  struct family {
    std::string help, type, samples;
  };
  std::vector<std::string> order;
  std::map<std::string, family> families;
  for (auto& text : texts) {
    std::string current;
    size_t at = 0;
    while (at < text.size()) {
      auto end = text.find('\n', at);
      if (end == std::string::npos) {
        end = text.size();
      }
      auto line = text.substr(at, end - at);
      at = end + 1;
      if (line.empty()) {
        continue;
      }
      bool help = line.rfind("# HELP ", 0) == 0;
      if (help || line.rfind("# TYPE ", 0) == 0) {
        auto rest = line.substr(7);
        current = rest.substr(0, rest.find(' '));
        if (!families.count(current)) {
          order.push_back(current);
        }
        auto& f = families[current];
        auto& slot = help ? f.help : f.type;
        if (slot.empty()) {
          slot = line + "\n";
        }
        continue;
      }
      if (!families.count(current)) {
        order.push_back(current);
      }
      families[current].samples += line + "\n";
    }
  }
  std::string out;
  for (auto& name : order) {
    auto& f = families[name];
    out += f.help + f.type + f.samples;
  }
  return out;
}

} // namespace salamander::apps
