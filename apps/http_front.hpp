// The HTTP front of `salamander serve`: the Open Inference Protocol (KServe
// v2, what Triton and KServe speak) over cpp-httplib, plus Prometheus
// metrics. It validates and converts requests; queueing, dynamic batching
// and the answer-once guarantee are the serving job's (actors/serve/).
//
//   GET  /v2/health/live            200 while the process runs
//   GET  /v2/health/ready           200 once every model's pipeline serves, else 503
//   GET  /v2                        server metadata and the extensions served
//   GET  /v2/models/stats           Triton's statistics of every model
//   POST /v2/repository/index       every model known: READY, LOADING, UNAVAILABLE
//   POST /v2/repository/models/NAME/load     (re)load a model (Authorization:
//   POST /v2/repository/models/NAME/unload    Bearer SECRET, else 403)
// and for each model, each path also under /v2/models/NAME/versions/V/...:
//   GET  /v2/models/NAME            model metadata: inputs, outputs, shapes
//   GET  /v2/models/NAME/ready
//   GET  /v2/models/NAME/stats      Triton's statistics extension
//   GET  /v2/models/NAME/config     Triton's model configuration, with the plan
//   POST /v2/models/NAME/infer      JSON, or the binary tensor data extension
//                                   (Inference-Header-Content-Length)
//   GET  /metrics                   Prometheus text: salamander_* and Triton's nv_*
//
// Errors are JSON {"error": "..."}: 400 malformed JSON, wrong shape or
// datatype, an input or output the model does not have, binary sizes that
// disagree with the body; 404 unknown model, version or path; 413 a body
// over the limit; 503 (with Retry-After) a full queue or a stopping service;
// 504 not answered in time.
//
// With a certificate and key (`serve --https`, the --tls material) the same
// endpoint speaks HTTPS (TLS 1.2+) under the same bounds; a client
// certificate is asked only when a client CA is given. The transport (those
// bounds, HTTPS) is http_transport.hpp's; this file is the protocol.
#pragma once

#include "apps/http_transport.hpp"
#include "apps/model_registry.hpp"

#include <memory>
#include <string>

namespace salamander::apps {

/// The transport's options (address, body limit, threads, HTTPS).
struct http_front_options : http_transport_options {};

class http_front {
public:
  http_front(model_registry& models, http_front_options opts);
  ~http_front();
  http_front(const http_front&) = delete;
  http_front& operator=(const http_front&) = delete;

  /// Binds and serves on a thread of its own; the port it bound. Throws
  /// when it cannot bind, or (HTTPS) when the certificate or key do not load.
  int start();
  void stop();

  struct impl;

private:
  std::unique_ptr<impl> impl_;
};

} // namespace salamander::apps
