// The KServe v2 routes and the Prometheus text of `salamander serve`, over
// the bounded transport of http_transport.cpp (see http_front.hpp).
#include "apps/http_front.hpp"

#include "apps/infer_request.hpp"
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

} // namespace

struct http_front::impl {
  const actors::service& svc;
  models::model_desc desc;
  http_front_options opts;
  http_server server;
  std::vector<int64_t> input_shape;  ///< -1 first
  std::vector<int64_t> output_shape; ///< -1 first

  std::mutex mutex; // the counters below
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
  }

  void count(int code, double seconds) {
    std::lock_guard<std::mutex> lock(mutex);
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

  bool known(const httplib::Request& req, httplib::Response& res) const {
    auto name = req.matches[1].str();
    if (name != opts.model_name) {
      error(res, 404,
            "unknown model '" + name + "'; this server serves '" + opts.model_name + "'");
      return false;
    }
    return true;
  }

  void infer(const httplib::Request& req, httplib::Response& res) {
    auto start = std::chrono::steady_clock::now();
    auto done = [&](int code) {
      count(code, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                      .count());
    };
    if (!known(req, res)) {
      done(404);
      return;
    }
    infer_request request;
    try {
      request = parse_infer_request(req.body, input_shape);
    } catch (const request_error& e) {
      error(res, 400, e.what());
      done(400);
      return;
    }
    auto bad = [&](const std::string& what) {
      error(res, 400, what);
      done(400);
    };
    auto x = torch::from_blob(request.data.data(), request.shape, torch::kFloat32).clone();
    auto y = svc.infer(x);
    if (!y) {
      auto& err = y.error();
      auto what = svc.system().render(err);
      if (err.category() == caf::atom("salamander")) {
        auto code = static_cast<errc>(err.code());
        if (code == errc::busy) {
          res.set_header("Retry-After", "1");
          error(res, 503, what);
          done(503);
          return;
        }
        if (code == errc::bad_config) {
          return bad(what);
        }
        if (code == errc::timeout) {
          error(res, 504, what);
          done(504);
          return;
        }
      }
      if (err == caf::sec::request_timeout) {
        error(res, 504, "no answer in time: " + what);
        done(504);
        return;
      }
      error(res, 500, what);
      done(500);
      return;
    }
    auto out = y->contiguous();
    std::vector<float> values(out.data_ptr<float>(), out.data_ptr<float>() + out.numel());
    json answer{{"model_name", opts.model_name},
                {"model_version", "1"},
                {"outputs", json::array({json{{"name", "output"},
                                              {"datatype", "FP32"},
                                              {"shape", out.sizes().vec()},
                                              {"data", values}}})}};
    if (request.has_id) {
      answer["id"] = request.id;
    }
    reply(res, 200, answer);
    done(200);
  }

  std::string metrics() {
    auto s = svc.status();
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
    http.Get("/v2", [this](const httplib::Request&, httplib::Response& res) {
      reply(res, 200,
            json{{"name", "salamander"},
                 {"version", SALAMANDER_VERSION},
                 {"extensions", json::array()}});
    });
    http.Get(R"(/v2/models/([^/]+))", [this](const httplib::Request& req,
                                             httplib::Response& res) {
      if (!known(req, res)) {
        return;
      }
      reply(res, 200,
            json{{"name", opts.model_name},
                 {"versions", json::array({"1"})},
                 {"platform", "salamander"},
                 {"spec", desc.spec.canonical()},
                 {"inputs", json::array({tensor_meta("input", input_shape)})},
                 {"outputs", json::array({tensor_meta("output", output_shape)})}});
    });
    http.Get(R"(/v2/models/([^/]+)/ready)",
             [this](const httplib::Request& req, httplib::Response& res) {
               if (!known(req, res)) {
                 return;
               }
               auto s = svc.status();
               reply(res, s.phase == status_phase::serving ? 200 : 503,
                     json{{"name", opts.model_name}, {"ready", s.phase == status_phase::serving}});
             });
    http.Post(
        R"(/v2/models/([^/]+)/infer)",
        [this](const httplib::Request& req, httplib::Response& res) { infer(req, res); });
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
