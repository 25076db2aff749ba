// KServe v2 over gRPC for `salamander serve`, see grpc_front.hpp.
#include "apps/grpc_front.hpp"

#include "kserve.grpc.pb.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>

#include <climits>
#include <fstream>
#include <sstream>
#include <stdexcept>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "raw tensor contents are little-endian: this front copies them as they are");

namespace salamander::apps {

namespace {

using json = nlohmann::json;
namespace pb = inference;

grpc::Status status_of(int http_status, const std::string& why) {
  switch (http_status) {
  case 400:
    return {grpc::StatusCode::INVALID_ARGUMENT, why};
  case 403:
    return {grpc::StatusCode::PERMISSION_DENIED, why};
  case 404:
    return {grpc::StatusCode::NOT_FOUND, why};
  case 503:
    return {grpc::StatusCode::UNAVAILABLE, why};
  case 504:
    return {grpc::StatusCode::DEADLINE_EXCEEDED, why};
  default:
    return {grpc::StatusCode::INTERNAL, why};
  }
}

std::string pem_file(const std::string& path, const char* what) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().find("-----BEGIN") == std::string::npos) {
    throw std::runtime_error(std::string("gRPC TLS: cannot read the ") + what + " " + path);
  }
  return text.str();
}

// A parameter as JSON (for the reader of the HTTP form).
json parameter(const pb::InferParameter& p) {
  switch (p.parameter_choice_case()) {
  case pb::InferParameter::kBoolParam:
    return p.bool_param();
  case pb::InferParameter::kInt64Param:
    return p.int64_param();
  case pb::InferParameter::kStringParam:
    return p.string_param();
  default:
    return nullptr;
  }
}

// One input as the HTTP form's JSON.
json input_json(const pb::ModelInferRequest& r, int i) {
  auto& in = r.inputs(i);
  json t{{"name", in.name()},
         {"datatype", in.datatype()},
         {"shape", std::vector<int64_t>(in.shape().begin(), in.shape().end())}};
  if (r.raw_input_contents_size() > 0) {
    if (in.has_contents()) {
      throw request_error("input '" + in.name() +
                          "' has both contents and raw_input_contents: send one");
    }
    t["parameters"] = json{{"binary_data_size", r.raw_input_contents(i).size()}};
  } else if (in.contents().fp32_contents_size() > 0) {
    t["data"] = std::vector<float>(in.contents().fp32_contents().begin(),
                                   in.contents().fp32_contents().end());
  }
  return t;
}

// The gRPC request read as an HTTP client would send it (the binary tensor
// data extension: a JSON header, then the inputs' bytes), so that one reader
// checks both and the same request gets the same answer over either. The
// raw contents are read where they are when there is one input.
infer_request read_grpc_request(const pb::ModelInferRequest& r, const model_io& io) {
  if (r.raw_input_contents_size() > 0 && r.raw_input_contents_size() != r.inputs_size()) {
    throw request_error("raw_input_contents has " +
                        std::to_string(r.raw_input_contents_size()) + " entries for " +
                        std::to_string(r.inputs_size()) +
                        " inputs: give one per input, in the order of inputs");
  }
  json inputs = json::array();
  for (int i = 0; i < r.inputs_size(); ++i) {
    inputs.push_back(input_json(r, i));
  }
  json header{{"inputs", inputs}};
  if (!r.id().empty()) {
    header["id"] = r.id();
  }
  if (r.outputs_size() > 0) {
    json outputs = json::array();
    for (auto& o : r.outputs()) {
      json out{{"name", o.name()}};
      if (auto c = o.parameters().find("classification"); c != o.parameters().end()) {
        out["parameters"] = json{{"classification", parameter(c->second)}};
      }
      outputs.push_back(out);
    }
    header["outputs"] = outputs;
  }
  std::string joined;
  std::string_view binary;
  if (r.raw_input_contents_size() == 1) {
    binary = r.raw_input_contents(0);
  } else {
    for (auto& raw : r.raw_input_contents()) {
      joined += raw;
    }
    binary = joined;
  }
  return parse_infer_request_parts(header.dump(), binary, io);
}

void fill(pb::StatisticDuration* d, const json& j) {
  d->set_count(j.value("count", uint64_t{0}));
  d->set_ns(j.value("ns", uint64_t{0}));
}

// Triton's statistics (model_stats' JSON, triton_reports.cpp) as protobuf.
void fill(pb::ModelStatistics* m, const json& j) {
  m->set_name(j["name"].get<std::string>());
  m->set_version(j["version"].get<std::string>());
  m->set_last_inference(j["last_inference"].get<uint64_t>());
  m->set_inference_count(j["inference_count"].get<uint64_t>());
  m->set_execution_count(j["execution_count"].get<uint64_t>());
  auto& s = j["inference_stats"];
  auto* is = m->mutable_inference_stats();
  fill(is->mutable_success(), s["success"]);
  fill(is->mutable_fail(), s["fail"]);
  fill(is->mutable_queue(), s["queue"]);
  fill(is->mutable_compute_input(), s["compute_input"]);
  fill(is->mutable_compute_infer(), s["compute_infer"]);
  fill(is->mutable_compute_output(), s["compute_output"]);
  fill(is->mutable_cache_hit(), s["cache_hit"]);
  fill(is->mutable_cache_miss(), s["cache_miss"]);
  for (auto& b : j["batch_stats"]) {
    auto* bs = m->add_batch_stats();
    bs->set_batch_size(b["batch_size"].get<uint64_t>());
    fill(bs->mutable_compute_infer(), b["compute_infer"]);
  }
}

void tensor_meta(pb::ModelMetadataResponse::TensorMetadata* t, const std::string& name,
                 const std::vector<int64_t>& shape) {
  t->set_name(name);
  t->set_datatype("FP32");
  for (auto d : shape) {
    t->add_shape(d);
  }
}

} // namespace

class grpc_service final : public pb::GRPCInferenceService::Service {
public:
  using endpoint_ptr = model_registry::endpoint_ptr;
  explicit grpc_service(model_registry& m) : models_(m) {}

  grpc::Status ServerLive(grpc::ServerContext*, const pb::ServerLiveRequest*,
                          pb::ServerLiveResponse* res) override {
    res->set_live(true);
    return grpc::Status::OK;
  }

  grpc::Status ServerReady(grpc::ServerContext*, const pb::ServerReadyRequest*,
                           pb::ServerReadyResponse* res) override {
    res->set_ready(models_.all_ready());
    return grpc::Status::OK;
  }

  grpc::Status ModelReady(grpc::ServerContext*, const pb::ModelReadyRequest* req,
                          pb::ModelReadyResponse* res) override {
    std::string why;
    auto m = models_.find(req->name(), req->version(), why);
    if (!m) {
      return status_of(404, why);
    }
    res->set_ready(m->ready());
    return grpc::Status::OK;
  }

  grpc::Status ServerMetadata(grpc::ServerContext*, const pb::ServerMetadataRequest*,
                              pb::ServerMetadataResponse* res) override {
    res->set_name("salamander");
    res->set_version(SALAMANDER_VERSION);
    for (auto& e : protocol_extensions()) {
      res->add_extensions(e);
    }
    return grpc::Status::OK;
  }

  grpc::Status ModelMetadata(grpc::ServerContext*, const pb::ModelMetadataRequest* req,
                             pb::ModelMetadataResponse* res) override {
    std::string why;
    auto model = models_.find(req->name(), req->version(), why);
    if (!model) {
      return status_of(404, why);
    }
    auto& m = model->model();
    res->set_name(m.name);
    res->add_versions(m.version);
    res->set_platform("salamander");
    tensor_meta(res->add_inputs(), model->io().input, model->io().input_shape);
    tensor_meta(res->add_outputs(), model->io().output, model->output_shape());
    return grpc::Status::OK;
  }

  grpc::Status ModelInfer(grpc::ServerContext*, const pb::ModelInferRequest* req,
                          pb::ModelInferResponse* res) override {
    auto start = model_endpoint::clock::now();
    std::string why;
    auto model = models_.accept(req->model_name(), req->model_version(), start, why);
    if (!model) {
      return status_of(404, why);
    }
    infer_request request;
    try {
      request = read_grpc_request(*req, model->io());
    } catch (const request_error& e) {
      model->finished(400, start);
      return status_of(400, e.what());
    }
    auto out = model->infer(request, start);
    if (out.status != 200) {
      model->finished(out.status, start);
      return status_of(out.status, out.error);
    }
    auto output_start = model_endpoint::clock::now();
    res->set_model_name(model->model().name);
    res->set_model_version(out.version.empty() ? model->model().version : out.version);
    res->set_id(req->id());
    auto* o = res->add_outputs();
    o->set_name(model->io().output);
    o->set_datatype("FP32");
    for (auto d : out.shape) {
      o->add_shape(d);
    }
    res->add_raw_output_contents(reinterpret_cast<const char*>(out.values.data()),
                                 out.values.size() * sizeof(float));
    model->finished(200, start, output_start);
    return grpc::Status::OK;
  }

  grpc::Status ModelStatistics(grpc::ServerContext*, const pb::ModelStatisticsRequest* req,
                               pb::ModelStatisticsResponse* res) override {
    if (!req->name().empty()) {
      std::string why;
      auto m = models_.find(req->name(), req->version(), why);
      if (!m) {
        return status_of(404, why);
      }
      fill(res->add_model_stats(), m->stats());
      return grpc::Status::OK;
    }
    for (auto& m : models_.loaded()) {
      fill(res->add_model_stats(), m->stats());
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryIndex(grpc::ServerContext*, const pb::RepositoryIndexRequest* req,
                               pb::RepositoryIndexResponse* res) override {
    for (auto& e : models_.index(req->ready())) {
      auto* m = res->add_models();
      m->set_name(e["name"].get<std::string>());
      m->set_version(e.value("version", ""));
      m->set_state(e["state"].get<std::string>());
      m->set_reason(e.value("reason", ""));
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryModelLoad(grpc::ServerContext* ctx,
                                   const pb::RepositoryModelLoadRequest* req,
                                   pb::RepositoryModelLoadResponse*) override {
    auto a = models_.load(req->model_name(), authorization(*ctx));
    return a.status == 200 ? grpc::Status::OK : status_of(a.status, a.message);
  }

  grpc::Status RepositoryModelUnload(grpc::ServerContext* ctx,
                                     const pb::RepositoryModelUnloadRequest* req,
                                     pb::RepositoryModelUnloadResponse*) override {
    auto a = models_.unload(req->model_name(), authorization(*ctx));
    return a.status == 200 ? grpc::Status::OK : status_of(a.status, a.message);
  }

private:
  // The "authorization" metadata ("Bearer SECRET"), or "".
  static std::string authorization(const grpc::ServerContext& ctx) {
    auto& md = ctx.client_metadata();
    auto it = md.find("authorization");
    return it == md.end() ? std::string()
                          : std::string(it->second.data(), it->second.size());
  }

  model_registry& models_;
};

struct grpc_front::impl {
  grpc_front_options opts;
  grpc_service service;
  std::unique_ptr<grpc::Server> server;

  impl(model_registry& m, grpc_front_options o) : opts(std::move(o)), service(m) {}

  std::shared_ptr<grpc::ServerCredentials> credentials() const {
    if (opts.tls_cert.empty()) {
      return grpc::InsecureServerCredentials();
    }
    grpc::SslServerCredentialsOptions tls(
        opts.client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                               : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_key_cert_pairs.push_back(
        {pem_file(opts.tls_key, "key"), pem_file(opts.tls_cert, "certificate")});
    if (!opts.client_ca.empty()) {
      tls.pem_root_certs = pem_file(opts.client_ca, "client CA");
    }
    return grpc::SslServerCredentials(tls);
  }
};

grpc_front::grpc_front(model_registry& models, grpc_front_options opts)
    : impl_(std::make_unique<impl>(models, std::move(opts))) {}

grpc_front::~grpc_front() {
  stop();
}

int grpc_front::start() {
  auto& o = impl_->opts;
  auto address = (o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host) + ":" +
                 std::to_string(o.port);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, impl_->credentials(), &port);
  builder.RegisterService(&impl_->service);
  auto limit = static_cast<int>(std::min<size_t>(o.max_body_bytes, INT_MAX));
  builder.SetMaxReceiveMessageSize(limit);
  builder.SetMaxSendMessageSize(limit);
  // A handler waits for its answer (model_endpoint::infer blocks). With
  // gRPC's default of at most two threads polling a queue, a thread that
  // has answered ends whenever two others poll, and the next call starts a
  // new one: a thread created and ended per request under load (gRPC over
  // HTTP, per round of bench serve: 0.79-0.89 with it, 0.83-1.07 without).
  // Threads that have answered go back to polling, up to the thread bound.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              std::max(2, o.threads));
  grpc::ResourceQuota quota("salamander-grpc");
  quota.SetMaxThreads(std::max(2, o.threads));
  builder.SetResourceQuota(quota);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || port == 0) {
    impl_->server.reset();
    throw std::runtime_error("cannot listen for gRPC on " + address +
                             " (in use, or not an address of this machine)");
  }
  return port;
}

void grpc_front::stop() {
  if (impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    impl_->server->Wait();
    impl_->server.reset();
  }
}

} // namespace salamander::apps
