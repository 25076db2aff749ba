// The KServe v2 routes and the Prometheus text of `salamander serve`, over
// the bounded transport of http_transport.cpp (see http_front.hpp).
#include "apps/http_front.hpp"

#include "apps/infer_request.hpp"
#include "apps/triton_reports.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <array>
#include <map>
#include <mutex>

namespace salamander::apps {

namespace {

using json = nlohmann::json;

constexpr std::array<double, 14> latency_buckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

void reply(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

void error(httplib::Response& res, int code, const std::string& what) {
  reply(res, code, json{{"error", what}});
}

// The protocol's extensions this server implements, by Triton's names.
json extensions() {
  return json::array({"binary_tensor_data", "statistics", "model_configuration"});
}

// The path of a model's route: its name, then an optional version.
std::string model_route(const std::string& rest) {
  return R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)" + rest;
}

int64_t ns_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now() - t)
      .count();
}

} // namespace

struct http_front::impl {
  const actors::service& svc;
  models::model_desc desc;
  http_front_options opts;
  http_server server;
  std::vector<int64_t> input_shape;  ///< -1 first
  std::vector<int64_t> output_shape; ///< -1 first
  model_io io;
  served_model model;

  std::mutex mutex; // the counters below
  front_counters front;
  int64_t answered = 0;
  std::map<int, int64_t> errors; ///< by HTTP status
  std::array<int64_t, latency_buckets.size()> bucket_counts{};
  int64_t latency_count = 0;
  double latency_sum = 0;

  impl(const actors::service& s, models::model_desc d, http_front_options o)
      : svc(s), desc(std::move(d)), opts(std::move(o)),
        server(opts, [this](httplib::Response& res, int code, const std::string& why) {
          count(code, 0);
          error(res, code, why);
        }) {
    input_shape = {-1};
    input_shape.insert(input_shape.end(), desc.input.begin(), desc.input.end());
    output_shape = {-1, desc.classes};
    io.input_shape = input_shape;
    auto& cfg = svc.config();
    model.name = opts.model_name;
    model.spec = desc.spec.canonical();
    model.input_dims = desc.input;
    model.output_dims = {desc.classes};
    model.max_batch = cfg.max_batch;
    model.batching = cfg.batching;
    model.batch_delay_us = cfg.batch_delay.count() * 1000;
  }

  void count(int code, double seconds) {
    std::lock_guard<std::mutex> lock(mutex);
    auto ns = static_cast<int64_t>(seconds * 1e9);
    (code == 200 ? front.success : front.failure).add(ns);
    if (code == 200) {
      ++answered;
      ++latency_count;
      latency_sum += seconds;
      for (size_t i = 0; i < latency_buckets.size(); ++i) {
        if (seconds <= latency_buckets[i]) {
          ++bucket_counts[i];
        }
      }
    } else {
      ++errors[code];
    }
  }

  json tensor_meta(const std::string& name, const std::vector<int64_t>& shape) const {
    return json{{"name", name}, {"datatype", "FP32"}, {"shape", shape}};
  }

  /// The served model's name and version in the path, or a 404 naming them.
  bool known(const httplib::Request& req, httplib::Response& res) const {
    auto name = req.matches[1].str();
    if (name != opts.model_name) {
      error(res, 404,
            "unknown model '" + name + "'; this server serves '" + opts.model_name + "'");
      return false;
    }
    if (req.matches.size() > 2 && req.matches[2].matched &&
        req.matches[2].str() != model.version) {
      error(res, 404,
            "unknown version '" + req.matches[2].str() + "' of model '" + name +
                "'; versions served: " + model.version);
      return false;
    }
    return true;
  }

  /// The error of a failed inference as HTTP: its status and message.
  void refuse(const caf::error& err, httplib::Response& res) {
    auto what = svc.system().render(err);
    int code = 500;
    if (err.category() == caf::atom("salamander")) {
      switch (static_cast<errc>(err.code())) {
      case errc::busy:
        res.set_header("Retry-After", "1");
        code = 503;
        break;
      case errc::bad_config:
        code = 400;
        break;
      case errc::timeout:
        code = 504;
        break;
      default:
        break;
      }
    } else if (err == caf::sec::request_timeout) {
      code = 504;
      what = "no answer in time: " + what;
    }
    error(res, code, what);
  }

  /// The request's model input, read (binary or JSON); throws request_error.
  infer_request read_request(const httplib::Request& req) {
    std::optional<size_t> json_length;
    if (req.has_header("Inference-Header-Content-Length")) {
      json_length = parse_json_length(req.get_header_value("Inference-Header-Content-Length"));
    } else if (req.get_header_value("Content-Type").rfind("application/octet-stream", 0) == 0) {
      throw request_error(
          "a body sent as application/octet-stream is the binary tensor data extension: it "
          "needs an Inference-Header-Content-Length header (the length of its JSON part)");
    }
    return parse_infer_request(req.body, json_length, io);
  }

  void infer(const httplib::Request& req, httplib::Response& res) {
    auto start = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++front.pending;
    }
    auto done = [&](int code) {
      count(code, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                      .count());
      std::lock_guard<std::mutex> lock(mutex);
      --front.pending;
    };
    if (!known(req, res)) {
      return done(404);
    }
    infer_request request;
    torch::Tensor x;
    try {
      request = read_request(req);
      // the tensor takes the values over, uncopied
      auto values = std::make_shared<std::vector<float>>(std::move(request.data));
      x = torch::from_blob(
          values->data(), request.shape, [values](void*) {}, torch::kFloat32);
    } catch (const request_error& e) {
      error(res, 400, e.what());
      return done(400);
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      front.compute_input.add(ns_since(start));
    }
    auto y = svc.infer(x);
    if (!y) {
      refuse(y.error(), res);
      return done(res.status);
    }
    auto output_start = std::chrono::steady_clock::now();
    auto out = y->contiguous();
    auto answer = write_infer_response(request, io, opts.model_name, model.version,
                                       out.sizes().vec(), out.data_ptr<float>());
    res.status = 200;
    if (answer.json_length) {
      res.set_header("Inference-Header-Content-Length", std::to_string(*answer.json_length));
      res.set_content(std::move(answer.body), "application/octet-stream");
    } else {
      res.set_content(std::move(answer.body), "application/json");
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      front.compute_output.add(ns_since(output_start));
    }
    done(200);
  }

  json stats_of_model() {
    auto s = svc.status();
    std::lock_guard<std::mutex> lock(mutex);
    return model_stats(model, s.serving, front);
  }

  std::string metrics() {
    auto s = svc.status();
    std::string out = request_metrics() + pipeline_metrics(s);
    std::lock_guard<std::mutex> lock(mutex);
    return out + triton_metrics(model, s.serving, front);
  }

  // salamander_*: the requests as this front answered them
  std::string request_metrics() {
    std::string out;
    auto m = opts.model_name;
    {
      std::lock_guard<std::mutex> lock(mutex);
      out +=
          "# HELP salamander_requests_total Inference requests answered with outputs.\n"
          "# TYPE salamander_requests_total counter\n";
      out += fmt::format("salamander_requests_total{{model=\"{}\"}} {}\n", m, answered);
      out += "# HELP salamander_request_failures_total Inference requests answered with "
             "an error, by HTTP status.\n"
             "# TYPE salamander_request_failures_total counter\n";
      for (int code : {400, 404, 408, 411, 413, 500, 503, 504}) {
        auto it = errors.find(code);
        out += fmt::format(
            "salamander_request_failures_total{{model=\"{}\",code=\"{}\"}} {}\n", m, code,
            it == errors.end() ? 0 : it->second);
      }
      out += "# HELP salamander_request_latency_seconds Time from the request's arrival "
             "to its answer (successful requests).\n"
             "# TYPE salamander_request_latency_seconds histogram\n";
      for (size_t i = 0; i < latency_buckets.size(); ++i) {
        out += fmt::format(
            "salamander_request_latency_seconds_bucket{{model=\"{}\",le=\"{}\"}} {}\n", m,
            latency_buckets[i], bucket_counts[i]);
      }
      out += fmt::format(
          "salamander_request_latency_seconds_bucket{{model=\"{}\",le=\"+Inf\"}} {}\n", m,
          latency_count);
      out += fmt::format("salamander_request_latency_seconds_sum{{model=\"{}\"}} {}\n", m,
                         latency_sum);
      out += fmt::format("salamander_request_latency_seconds_count{{model=\"{}\"}} {}\n",
                         m, latency_count);
    }
    return out;
  }

  // salamander_*: the queue, the pipeline and the transport
  std::string pipeline_metrics(const job_status& s) {
    std::string out;
    auto m = opts.model_name;
    out +=
        "# HELP salamander_queue_depth Requests waiting to be put into a micro-batch.\n"
        "# TYPE salamander_queue_depth gauge\n";
    out += fmt::format("salamander_queue_depth{{model=\"{}\"}} {}\n", m,
                       s.serving.queue_depth);
    out += "# HELP salamander_in_flight Micro-batches in the pipeline.\n"
           "# TYPE salamander_in_flight gauge\n";
    out +=
        fmt::format("salamander_in_flight{{model=\"{}\"}} {}\n", m, s.serving.in_flight);
    out += "# HELP salamander_ready 1 while a pipeline serves.\n"
           "# TYPE salamander_ready gauge\n";
    out += fmt::format("salamander_ready{{model=\"{}\"}} {}\n", m,
                       s.phase == status_phase::serving ? 1 : 0);
    out += "# HELP salamander_stage_busy_seconds_total Compute time of each stage of the "
           "current plan.\n"
           "# TYPE salamander_stage_busy_seconds_total counter\n";
    for (auto& r : s.stages) {
      out += fmt::format("salamander_stage_busy_seconds_total{{model=\"{}\",stage=\"{}\","
                         "node=\"{}\"}} {}\n",
                         m, r.index, r.node, r.measured_s);
    }
    out += "# HELP salamander_recoveries_total Failures served through (re-planned over "
           "the survivors).\n"
           "# TYPE salamander_recoveries_total counter\n";
    out += fmt::format("salamander_recoveries_total{{model=\"{}\"}} {}\n", m,
                       s.pipeline.recoveries);
    out +=
        "# HELP salamander_replans_total Plans replaced while serving (joins, console).\n"
        "# TYPE salamander_replans_total counter\n";
    out += fmt::format("salamander_replans_total{{model=\"{}\"}} {}\n", m,
                       s.pipeline.replans);
    out += "# HELP salamander_resent_total Micro-batches sent again after a failure.\n"
           "# TYPE salamander_resent_total counter\n";
    out +=
        fmt::format("salamander_resent_total{{model=\"{}\"}} {}\n", m, s.serving.resent);
    out +=
        "# HELP salamander_rejected_total Requests refused because the queue was full.\n"
        "# TYPE salamander_rejected_total counter\n";
    out += fmt::format("salamander_rejected_total{{model=\"{}\"}} {}\n", m,
                       s.serving.rejected);
    out += "# HELP salamander_http_connections_refused_total Connections answered 503 at "
           "once: the server held as many as it takes.\n"
           "# TYPE salamander_http_connections_refused_total counter\n";
    out += fmt::format("salamander_http_connections_refused_total{{model=\"{}\"}} {}\n",
                       m, server.connections_turned_away());
    out += "# HELP salamander_http_too_slow_total Requests cut off: stalled, or too slow.\n"
           "# TYPE salamander_http_too_slow_total counter\n";
    out += fmt::format("salamander_http_too_slow_total{{model=\"{}\"}} {}\n", m,
                       server.too_slow());
    if (auto refused = server.handshakes_refused()) {
      out += "# HELP salamander_https_handshakes_refused_total TLS handshakes failed or cut "
             "off (plaintext, silent or unverified clients).\n"
             "# TYPE salamander_https_handshakes_refused_total counter\n";
      out += fmt::format("salamander_https_handshakes_refused_total{{model=\"{}\"}} {}\n",
                         m, *refused);
    }
    return out;
  }

  // Words what httplib or the transport refused (no handler's own error):
  // a JSON error, counted.
  void on_error(const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) {
      return; // a handler's own error
    }
    if (refusal_of_request() == refusal::too_large) {
      res.status = 413; // a chunked body past the limit
    } else if (refusal_of_request() == refusal::too_slow) {
      count(408, 0);
      auto& lim = server.limits();
      error(res, 408,
            fmt::format("the request did not arrive in time: nothing for {} s, or slower "
                        "than {} KiB/s after its first {} s, or longer than {} s",
                        lim.read.count() / 1000, lim.min_rate / 1024,
                        lim.grace.count() / 1000, lim.longest.count() / 1000));
      return;
    } else if (refusal_of_request() == refusal::over_budget) {
      count(503, 0);
      res.set_header("Retry-After", "1");
      error(res, 503,
            "the server is receiving too many large requests at once; try again");
      return;
    }
    // (the body was read: a refusal from the headers alone leaves it empty)
    if (res.status == 413 &&
        req.body.size() > CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH &&
        req.get_header_value("Content-Type")
                .rfind("application/x-www-form-urlencoded", 0) == 0) {
      // httplib parses such a body as a form and takes at most 8 KiB of it
      count(413, 0);
      error(res, 413,
            "a body sent as application/x-www-form-urlencoded (curl -d without -H) is "
            "limited to 8 KiB: send Content-Type: application/json");
      return;
    }
    if (res.status == 413) {
      count(413, 0);
      error(res, 413,
            fmt::format("the body is larger than the limit of {} bytes (--max-body-mb)",
                        opts.max_body_bytes));
      return;
    }
    error(res, res.status,
          res.status == 404 ? "no such path: " + req.method + " " + req.path +
                                  " (see /v2/models/" + opts.model_name + ")"
                            : "HTTP " + std::to_string(res.status));
  }

  void routes() {
    auto& http = server.handlers();
    http.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) {
      reply(res, 200, json{{"live", true}});
    });
    http.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
      auto s = svc.status();
      reply(res, s.phase == status_phase::serving ? 200 : 503,
            json{{"ready", s.phase == status_phase::serving}, {"phase", to_string(s.phase)}});
    });
    http.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
      reply(res, 200,
            json{{"name", "salamander"},
                 {"version", SALAMANDER_VERSION},
                 {"extensions", extensions()}});
    });
    // before the model's own routes: "stats" is no model's name here
    http.Get("/v2/models/stats", [this](const httplib::Request&, httplib::Response& res) {
      reply(res, 200, json{{"model_stats", json::array({stats_of_model()})}});
    });
    http.Get(model_route(""), [this](const httplib::Request& req, httplib::Response& res) {
      if (known(req, res)) {
        reply(res, 200,
              json{{"name", opts.model_name},
                   {"versions", json::array({model.version})},
                   {"platform", "salamander"},
                   {"spec", model.spec},
                   {"inputs", json::array({tensor_meta(io.input, input_shape)})},
                   {"outputs", json::array({tensor_meta(io.output, output_shape)})}});
      }
    });
    http.Get(model_route("/ready"), [this](const httplib::Request& req,
                                           httplib::Response& res) {
      if (known(req, res)) {
        auto s = svc.status();
        reply(res, s.phase == status_phase::serving ? 200 : 503,
              json{{"name", opts.model_name}, {"ready", s.phase == status_phase::serving}});
      }
    });
    http.Get(model_route("/stats"), [this](const httplib::Request& req,
                                           httplib::Response& res) {
      if (known(req, res)) {
        reply(res, 200, json{{"model_stats", json::array({stats_of_model()})}});
      }
    });
    http.Get(model_route("/config"), [this](const httplib::Request& req,
                                            httplib::Response& res) {
      if (known(req, res)) {
        reply(res, 200, model_config(model, svc.status()));
      }
    });
    http.Post(model_route("/infer"), [this](const httplib::Request& req,
                                            httplib::Response& res) { infer(req, res); });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics(), "text/plain; version=0.0.4");
    });
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      on_error(req, res);
    });
    http.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
          std::string what = "internal error";
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          error(res, 500, what);
        });
  }
};

http_front::http_front(const actors::service& svc, const models::model_desc& desc,
                       http_front_options opts)
    : impl_(std::make_unique<impl>(svc, desc, std::move(opts))) {
  impl_->routes();
}

http_front::~http_front() {
  stop();
}

int http_front::start() {
  return impl_->server.start();
}

void http_front::stop() {
  impl_->server.stop();
}

} // namespace salamander::apps
