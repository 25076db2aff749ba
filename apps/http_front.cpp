// The KServe v2 routes and the Prometheus text of `salamander serve`, over
// the bounded transport of http_transport.cpp (see http_front.hpp).
#include "apps/http_front.hpp"

#include "apps/http_json.hpp"
#include "apps/infer_request.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

namespace salamander::apps {

namespace {

using json = nlohmann::json;

constexpr auto reply = json_reply;
constexpr auto error = json_error;

// The path of a model's route: its name, then an optional version.
std::string model_route(const std::string& rest) {
  return R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)" + rest;
}

std::string version_in(const httplib::Request& req) {
  return req.matches.size() > 2 && req.matches[2].matched ? req.matches[2].str() : "";
}

} // namespace

struct http_front::impl {
  using endpoint_ptr = model_registry::endpoint_ptr;
  model_registry& models;
  http_front_options opts;
  http_server server;

  impl(model_registry& m, http_front_options o)
      : models(m), opts(with_bodiless(std::move(o))),
        server(opts, [this](httplib::Response& res, int code, const std::string& why) {
          refused_count(code);
          error(res, code, why);
        }) {}

  static http_front_options with_bodiless(http_front_options o) {
    o.bodiless_posts.push_back("/v2/repository/");
    return o;
  }

  /// A refusal of the transport's (no request read): counted to the first
  /// model loaded, as the server's.
  void refused_count(int code) {
    auto loaded = models.loaded();
    if (!loaded.empty()) {
      loaded.front()->refused(code);
    }
  }

  json tensor_meta(const std::string& name, const std::vector<int64_t>& shape) const {
    return json{{"name", name}, {"datatype", "FP32"}, {"shape", shape}};
  }

  /// The model and version in the path, or null with a 404 naming them.
  endpoint_ptr known(const httplib::Request& req, httplib::Response& res) const {
    std::string why;
    auto m = models.find(req.matches[1].str(), version_in(req), why);
    if (!m) {
      error(res, 404, why);
    }
    return m;
  }

  /// The request's model input, read (binary or JSON); throws request_error.
  infer_request read_request(const httplib::Request& req, const model_endpoint& model) {
    std::optional<size_t> json_length;
    if (req.has_header("Inference-Header-Content-Length")) {
      json_length = parse_json_length(req.get_header_value("Inference-Header-Content-Length"));
    } else if (req.get_header_value("Content-Type").rfind("application/octet-stream", 0) == 0) {
      throw request_error(
          "a body sent as application/octet-stream is the binary tensor data extension: it "
          "needs an Inference-Header-Content-Length header (the length of its JSON part)");
    }
    return parse_infer_request(req.body, json_length, model.io());
  }

  void infer(const httplib::Request& req, httplib::Response& res) {
    auto start = model_endpoint::clock::now();
    std::string why;
    auto model = models.accept(req.matches[1].str(), version_in(req), start, why);
    if (!model) {
      return error(res, 404, why);
    }
    infer_request request;
    try {
      request = read_request(req, *model);
    } catch (const request_error& e) {
      error(res, 400, e.what());
      return model->finished(400, start);
    }
    auto out = model->infer(request, start);
    if (out.status != 200) {
      if (out.status == 503) {
        res.set_header("Retry-After", "1");
      }
      error(res, out.status, out.error);
      return model->finished(out.status, start);
    }
    auto output_start = model_endpoint::clock::now();
    auto answer =
        write_infer_response(request, model->io(), model->model().name,
                             out.version.empty() ? model->model().version : out.version,
                             out.shape, out.values.data());
    res.status = 200;
    if (answer.json_length) {
      res.set_header("Inference-Header-Content-Length", std::to_string(*answer.json_length));
      res.set_content(std::move(answer.body), "application/octet-stream");
    } else {
      res.set_content(std::move(answer.body), "application/json");
    }
    model->finished(200, start, output_start);
  }

  /// A repository call: load or unload the model in the path.
  void control(const httplib::Request& req, httplib::Response& res, bool load) {
    auto name = req.matches[1].str();
    auto auth = req.get_header_value("Authorization");
    auto a = load ? models.load(name, auth) : models.unload(name, auth);
    if (a.status != 200) {
      error(res, a.status, a.message);
      return;
    }
    reply(res, 200, json::object());
  }

  /// Every model's series, each family's HELP and TYPE once (Prometheus'
  /// text format), then the transport's.
  std::string metrics() {
    std::vector<std::string> parts;
    for (auto& m : models.loaded()) {
      auto s = m->status();
      parts.push_back(request_metrics(*m) + pipeline_metrics(*m, s) +
                      m->triton_metrics(s));
    }
    return merge_metric_families(parts) + transport_metrics();
  }

  // salamander_*: the requests as the model was asked them (HTTP and gRPC)
  static std::string request_metrics(const model_endpoint& model) {
    auto c = model.counters();
    auto& m = model.model().name;
    std::string out =
        "# HELP salamander_requests_total Inference requests answered with outputs.\n"
        "# TYPE salamander_requests_total counter\n";
    out += fmt::format("salamander_requests_total{{model=\"{}\"}} {}\n", m, c.answered);
    out += "# HELP salamander_request_failures_total Inference requests answered with "
           "an error, by HTTP status.\n"
           "# TYPE salamander_request_failures_total counter\n";
    for (int code : {400, 404, 408, 411, 413, 500, 503, 504}) {
      auto it = c.errors.find(code);
      out += fmt::format("salamander_request_failures_total{{model=\"{}\",code=\"{}\"}} {}\n",
                         m, code, it == c.errors.end() ? 0 : it->second);
    }
    out += "# HELP salamander_request_latency_seconds Time from the request's arrival "
           "to its answer (successful requests).\n"
           "# TYPE salamander_request_latency_seconds histogram\n";
    for (size_t i = 0; i < latency_buckets.size(); ++i) {
      out += fmt::format("salamander_request_latency_seconds_bucket{{model=\"{}\",le=\"{}\"}} {}\n",
                         m, latency_buckets[i], c.buckets[i]);
    }
    out += fmt::format("salamander_request_latency_seconds_bucket{{model=\"{}\",le=\"+Inf\"}} {}\n",
                       m, c.latency_count);
    out += fmt::format("salamander_request_latency_seconds_sum{{model=\"{}\"}} {}\n", m,
                       c.latency_sum);
    out += fmt::format("salamander_request_latency_seconds_count{{model=\"{}\"}} {}\n", m,
                       c.latency_count);
    return out;
  }

  // salamander_*: the model's queue and pipeline
  static std::string pipeline_metrics(const model_endpoint& model, const job_status& s) {
    std::string out;
    auto& m = model.model().name;
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
    return out;
  }

  // salamander_*: the server's connections (no model: every model's requests
  // come through the same sockets)
  std::string transport_metrics() {
    std::string out;
    out += "# HELP salamander_http_connections_refused_total Connections answered 503 at "
           "once: the server held as many as it takes.\n"
           "# TYPE salamander_http_connections_refused_total counter\n";
    out += fmt::format("salamander_http_connections_refused_total {}\n",
                       server.connections_turned_away());
    out += "# HELP salamander_http_too_slow_total Requests cut off: stalled, or too slow.\n"
           "# TYPE salamander_http_too_slow_total counter\n";
    out += fmt::format("salamander_http_too_slow_total {}\n", server.too_slow());
    if (auto refused = server.handshakes_refused()) {
      out += "# HELP salamander_https_handshakes_refused_total TLS handshakes failed or cut "
             "off (plaintext, silent or unverified clients).\n"
             "# TYPE salamander_https_handshakes_refused_total counter\n";
      out += fmt::format("salamander_https_handshakes_refused_total {}\n", *refused);
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
      refused_count(408);
      auto& lim = server.limits();
      error(res, 408,
            fmt::format("the request did not arrive in time: nothing for {} s, or slower "
                        "than {} KiB/s after its first {} s, or longer than {} s",
                        lim.read.count() / 1000, lim.min_rate / 1024,
                        lim.grace.count() / 1000, lim.longest.count() / 1000));
      return;
    } else if (refusal_of_request() == refusal::over_budget) {
      refused_count(503);
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
      refused_count(413);
      error(res, 413,
            "a body sent as application/x-www-form-urlencoded (curl -d without -H) is "
            "limited to 8 KiB: send Content-Type: application/json");
      return;
    }
    if (res.status == 413) {
      refused_count(413);
      error(res, 413,
            fmt::format("the body is larger than the limit of {} bytes (--max-body-mb)",
                        opts.max_body_bytes));
      return;
    }
    error(res, res.status,
          res.status == 404 ? "no such path: " + req.method + " " + req.path + " (" +
                                  served_paths() + ")"
                            : "HTTP " + std::to_string(res.status));
  }

  /// Where the models are, for a 404 of a path that is none.
  std::string served_paths() const {
    std::string out;
    for (auto& n : models.names()) {
      out += (out.empty() ? "see " : ", ") + std::string("/v2/models/") + n;
    }
    return out.empty() ? "no model is loaded: POST /v2/repository/index" : out;
  }

  // POST /v2/repository/index: every model, or the ready ones
  void repository_index(const httplib::Request& req, httplib::Response& res) {
    bool ready_only = false;
    if (!req.body.empty()) {
      auto body = json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.is_object()) {
        return error(res, 400,
                     "the index request's body must be a JSON object, e.g. "
                     "{\"ready\": true}");
      }
      if (body.contains("ready") && !body["ready"].is_boolean()) {
        return error(res, 400, "\"ready\" must be true or false");
      }
      ready_only = body.value("ready", false);
    }
    reply(res, 200, models.index(ready_only));
  }

  void routes() {
    auto& http = server.handlers();
    http.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) {
      reply(res, 200, json{{"live", true}});
    });
    http.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
      json phases = json::object();
      for (auto& m : models.loaded()) {
        phases[m->model().name] = to_string(m->status().phase);
      }
      bool ready = models.all_ready();
      json body{{"ready", ready}, {"models", phases}};
      if (phases.size() == 1) {
        body["phase"] = phases.begin().value();
      }
      reply(res, ready ? 200 : 503, body);
    });
    http.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
      reply(res, 200,
            json{{"name", "salamander"},
                 {"version", SALAMANDER_VERSION},
                 {"extensions", protocol_extensions()}});
    });
    // before the model's own routes: "stats" is no model's name here
    http.Get("/v2/models/stats", [this](const httplib::Request&, httplib::Response& res) {
      json all = json::array();
      for (auto& m : models.loaded()) {
        all.push_back(m->stats());
      }
      reply(res, 200, json{{"model_stats", all}});
    });
    http.Get(
        model_route(""), [this](const httplib::Request& req, httplib::Response& res) {
          if (auto m = known(req, res)) {
            reply(res, 200,
                  json{{"name", m->model().name},
                       {"versions", json::array({m->model().version})},
                       {"platform", "salamander"},
                       {"spec", m->model().spec},
                       {"inputs",
                        json::array({tensor_meta(m->io().input, m->io().input_shape)})},
                       {"outputs",
                        json::array({tensor_meta(m->io().output, m->output_shape())})}});
          }
        });
    http.Get(model_route("/ready"), [this](const httplib::Request& req,
                                           httplib::Response& res) {
      if (auto m = known(req, res)) {
        auto ready = m->ready();
        reply(res, ready ? 200 : 503, json{{"name", m->model().name}, {"ready", ready}});
      }
    });
    http.Get(model_route("/stats"),
             [this](const httplib::Request& req, httplib::Response& res) {
               if (auto m = known(req, res)) {
                 reply(res, 200, json{{"model_stats", json::array({m->stats()})}});
               }
             });
    http.Get(model_route("/config"),
             [this](const httplib::Request& req, httplib::Response& res) {
               if (auto m = known(req, res)) {
                 reply(res, 200, m->config());
               }
             });
    http.Post(model_route("/infer"), [this](const httplib::Request& req,
                                            httplib::Response& res) { infer(req, res); });
    // Triton's model repository extension: the index is open, load and
    // unload need the cluster secret
    http.Post("/v2/repository/index",
              [this](const httplib::Request& req, httplib::Response& res) {
                repository_index(req, res);
              });
    http.Post(R"(/v2/repository/models/([^/]+)/load)",
              [this](const httplib::Request& req, httplib::Response& res) {
                control(req, res, true);
              });
    http.Post(R"(/v2/repository/models/([^/]+)/unload)",
              [this](const httplib::Request& req, httplib::Response& res) {
                control(req, res, false);
              });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics(), "text/plain; version=0.0.4");
    });
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      on_error(req, res);
    });
    answer_exceptions_as_json(http);
  }
};

http_front::http_front(model_registry& models, http_front_options opts)
    : impl_(std::make_unique<impl>(models, std::move(opts))) {
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
