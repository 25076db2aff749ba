// The served model behind both protocol fronts, see model_endpoint.hpp.
#include "apps/model_endpoint.hpp"

#include "actors/serve/inference.hpp"
#include "messages/errors.hpp"
#include "models/model_desc.hpp"

namespace salamander::apps {

namespace {

int64_t ns_between(model_endpoint::clock::time_point a, model_endpoint::clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

// A failed inference as an HTTP status and its message.
infer_outcome refusal_outcome(const caf::actor_system& sys, const caf::error& err) {
  infer_outcome out;
  out.status = 500;
  out.error = sys.render(err);
  if (err.category() == caf::atom("salamander")) {
    switch (static_cast<errc>(err.code())) {
    case errc::busy:
      out.status = 503;
      break;
    case errc::bad_config:
      out.status = 400;
      break;
    case errc::timeout:
      out.status = 504;
      break;
    default:
      break;
    }
  } else if (err == caf::sec::request_timeout) {
    out.status = 504;
    out.error = "no answer in time: " + out.error;
  }
  return out;
}

} // namespace

struct model_endpoint::answer {
  caf::expected<torch::Tensor> y;
  const model_endpoint* by;
};

model_endpoint::model_endpoint(const actors::service& svc, const models::model_desc& desc,
                               std::string name)
    : svc_(svc) {
  io_.input_shape = {-1};
  io_.input_shape.insert(io_.input_shape.end(), desc.input.begin(), desc.input.end());
  output_shape_ = {-1, desc.classes};
  auto& cfg = svc.config();
  model_.name = std::move(name);
  model_.spec = desc.spec.canonical();
  model_.input_dims = desc.input;
  model_.output_dims = {desc.classes};
  model_.max_batch = cfg.max_batch;
  model_.batching = cfg.batching;
  model_.batch_delay_us = cfg.batch_delay.count() * 1000;
}

model_endpoint::model_endpoint(std::shared_ptr<actors::service> svc,
                               const models::model_desc& desc, std::string name,
                               std::string version)
    : model_endpoint(*svc, desc, std::move(name)) {
  owned_ = std::move(svc);
  model_.version = std::move(version);
}

model_endpoint::~model_endpoint() = default;

std::vector<int64_t> model_endpoint::output_shape() const {
  return output_shape_;
}

std::optional<std::string> model_endpoint::unknown(const std::string& name,
                                                   const std::string& version) const {
  if (name != model_.name) {
    return "unknown model '" + name + "'; this server serves '" + model_.name + "'";
  }
  if (!version.empty() && version != model_.version) {
    return "unknown version '" + version + "' of model '" + name +
           "'; versions served: " + model_.version;
  }
  return std::nullopt;
}

void model_endpoint::arrived() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counters_.triton.pending;
}

infer_outcome model_endpoint::infer(infer_request& request, clock::time_point start) {
  // the tensor takes the values over, uncopied
  auto values = std::make_shared<std::vector<float>>(std::move(request.data));
  auto x = torch::from_blob(
      values->data(), request.shape, [values](void*) {}, torch::kFloat32);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    counters_.triton.compute_input.add(ns_between(start, clock::now()));
  }
  auto a = run(x);
  if (!a.y) {
    return refusal_outcome(svc_.system(), a.y.error());
  }
  auto out = a.y->contiguous();
  infer_outcome r;
  r.shape = out.sizes().vec();
  r.values.assign(out.data_ptr<float>(), out.data_ptr<float>() + out.numel());
  r.version = a.by->model_.version;
  return r;
}

model_endpoint::answer model_endpoint::run(const torch::Tensor& x) const {
  answer a{svc_.infer(x), this};
  if (!a.y) {
    std::shared_ptr<model_endpoint> next;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      next = successor_;
    }
    if (next) {
      // this version's job stopped for a reload while the request was on
      // its way: the version that replaced it answers
      return next->run(x);
    }
  }
  return a;
}

void model_endpoint::replaced_by(std::shared_ptr<model_endpoint> next) {
  std::lock_guard<std::mutex> lock(mutex_);
  successor_ = std::move(next);
}

void model_endpoint::finished(int status, clock::time_point start,
                              std::optional<clock::time_point> output_start) {
  auto now = clock::now();
  auto ns = ns_between(start, now);
  auto seconds = static_cast<double>(ns) * 1e-9;
  std::lock_guard<std::mutex> lock(mutex_);
  auto& c = counters_;
  --c.triton.pending;
  (status == 200 ? c.triton.success : c.triton.failure).add(ns);
  if (status != 200) {
    ++c.errors[status];
    return;
  }
  c.triton.compute_output.add(output_start ? ns_between(*output_start, now) : 0);
  ++c.answered;
  ++c.latency_count;
  c.latency_sum += seconds;
  for (size_t i = 0; i < latency_buckets.size(); ++i) {
    if (seconds <= latency_buckets[i]) {
      ++c.buckets[i];
    }
  }
}

void model_endpoint::refused(int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_.triton.failure.add(0);
  ++counters_.errors[status];
}

job_status model_endpoint::status() const {
  return svc_.status();
}

bool model_endpoint::ready() const {
  return status().phase == status_phase::serving;
}

bool model_endpoint::wait_serving(std::chrono::milliseconds limit) const {
  return svc_.wait_serving(limit);
}

job_status model_endpoint::stop(const std::string& why) {
  if (!owned_) {
    throw std::logic_error("model_endpoint::stop: the endpoint does not own its service");
  }
  return owned_->stop(why);
}

request_counters model_endpoint::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

nlohmann::json model_endpoint::stats() const {
  auto s = status();
  std::lock_guard<std::mutex> lock(mutex_);
  return model_stats(model_, s.serving, counters_.triton);
}

nlohmann::json model_endpoint::config() const {
  return model_config(model_, status());
}

std::string model_endpoint::triton_metrics(const job_status& s) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return apps::triton_metrics(model_, s.serving, counters_.triton);
}

} // namespace salamander::apps
