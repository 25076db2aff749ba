// The gRPC front of `salamander serve --grpc-listen HOST:PORT`: KServe v2's
// GRPCInferenceService (apps/kserve.proto) over Debian's libgrpc++, beside
// the HTTP front and answering the same: a ModelInfer request is read by the
// same reader as an HTTP one (apps/infer_request.cpp), so its checks and
// messages are the same; errors map to gRPC codes (INVALID_ARGUMENT for 400,
// NOT_FOUND for 404, UNAVAILABLE for 503, DEADLINE_EXCEEDED for 504,
// PERMISSION_DENIED for 403). The requests count into the same statistics
// and metrics (model_endpoint); the models are the server's registry, so
// RepositoryModelLoad and -Unload (behind the secret in the "authorization"
// metadata) change what both fronts serve.
//
// This header includes no gRPC and no LibTorch: grpc_front.cpp and the
// generated code are the only translation units that see gRPC.
#pragma once

#include "apps/front_options.hpp"
#include "apps/model_registry.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace salamander::apps {

/// Its address, message bound (max_body_bytes), threads and TLS.
using grpc_front_options = front_options;

class grpc_front {
public:
  grpc_front(model_registry& models, grpc_front_options opts);
  ~grpc_front();
  grpc_front(const grpc_front&) = delete;
  grpc_front& operator=(const grpc_front&) = delete;

  /// Binds and serves on gRPC's threads; the port it bound. Throws when it
  /// cannot bind or the TLS material does not load.
  int start();
  /// Stops taking calls, lets the ones running finish (5 s at most).
  void stop();

  struct impl;

private:
  std::unique_ptr<impl> impl_;
};

} // namespace salamander::apps
