#include "actors/serve/inference.hpp"

#include "messages/errors.hpp"

#include <future>
#include <thread>

namespace salamander::actors {

service::service(caf::actor_system& sys, serve_config cfg, std::vector<remote_node> nodes)
    : sys_(sys), cfg_(cfg) {
  cluster_ = sys.spawn(cluster_supervisor, cluster_config_for(cfg), std::move(nodes));
  job_ = sys.spawn(serve_job, std::move(cfg), cluster_);
}

service::service(caf::actor_system& sys, serve_config cfg, cluster_actor shared)
    : sys_(sys), cfg_(cfg), cluster_(std::move(shared)), owns_cluster_(false) {
  job_ = sys.spawn(serve_job, std::move(cfg), cluster_);
}

service::~service() {
  caf::scoped_actor self{sys_};
  self->send(job_, leave_atom_v);
  if (owns_cluster_) {
    self->send(cluster_, leave_atom_v);
  }
}

job_status service::status() const {
  job_status out;
  caf::scoped_actor self{sys_};
  self->request(job_, cfg_.node_timeout, caf::get_atom_v)
      .receive([&](job_status& s) { out = std::move(s); },
               [&](caf::error& err) {
                 out.phase = status_phase::unknown;
                 out.error = "the serving job does not answer: " + sys_.render(err);
               });
  return out;
}

bool service::wait_serving(std::chrono::milliseconds limit,
                           const std::function<void(const job_status&)>& on_status,
                           std::chrono::milliseconds poll) const {
  auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto s = status();
    if (on_status) {
      on_status(s);
    }
    if (s.phase == status_phase::serving) {
      return true;
    }
    if (s.finished() || std::chrono::steady_clock::now() > until) {
      return false;
    }
    std::this_thread::sleep_for(poll);
  }
}

job_status service::stop(const std::string& why, std::chrono::milliseconds limit) {
  {
    caf::scoped_actor self{sys_};
    self->request(job_, cfg_.node_timeout, stop_atom_v, why)
        .receive([](std::string&) {}, [](caf::error&) {});
  }
  auto until = std::chrono::steady_clock::now() + limit;
  job_status s;
  do {
    s = status();
    if (s.finished() || s.phase == status_phase::unknown) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < until);
  stopped_ = true;
  return s;
}

caf::expected<torch::Tensor> service::infer(const torch::Tensor& x) const {
  caf::expected<torch::Tensor> out{torch::Tensor{}};
  caf::scoped_actor self{sys_};
  self->request(job_, cfg_.request_timeout + std::chrono::seconds(5), infer_atom_v,
                tensor_payload{x})
      .receive([&](tensor_payload& y) { out = std::move(y.tensor); },
               [&](caf::error& err) { out = std::move(err); });
  return out;
}

namespace {

struct driver_state {
  torch::Tensor inputs;
  int64_t rows_per = 1;
  int64_t chunks = 0;
  int64_t next = 0;
  int64_t done = 0;
  std::atomic<int64_t> rows_done{0};
  std::vector<torch::Tensor> outputs;
  std::vector<std::pair<double, int64_t>> answers;
  std::string error;
  std::promise<void> finished;
  bool over = false;
  std::chrono::steady_clock::time_point first{}, last{};
};

void send_chunk(caf::event_based_actor* self, std::shared_ptr<driver_state> d,
                serve_job_actor job, std::chrono::milliseconds timeout, int64_t i);

void send_next(caf::event_based_actor* self, std::shared_ptr<driver_state> d,
               serve_job_actor job, std::chrono::milliseconds timeout) {
  if (d->over || d->next >= d->chunks) {
    return;
  }
  send_chunk(self, d, job, timeout, d->next++);
}

// Request `i`; a full queue (another client's requests) is asked again
// shortly, any other error ends the run.
void send_chunk(caf::event_based_actor* self, std::shared_ptr<driver_state> d,
                serve_job_actor job, std::chrono::milliseconds timeout, int64_t i) {
  auto begin = i * d->rows_per;
  auto rows = std::min(d->rows_per, d->inputs.size(0) - begin);
  if (d->first == std::chrono::steady_clock::time_point{}) {
    d->first = std::chrono::steady_clock::now();
  }
  self->request(job, timeout, infer_atom_v,
                tensor_payload{d->inputs.narrow(0, begin, rows)})
      .then(
          [=](tensor_payload& y) {
            if (d->over) {
              return;
            }
            d->outputs[static_cast<size_t>(i)] = std::move(y.tensor);
            d->rows_done += rows;
            d->answers.emplace_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - d->first)
                    .count(),
                rows);
            if (++d->done == d->chunks) {
              d->over = true;
              d->last = std::chrono::steady_clock::now();
              d->finished.set_value();
              self->quit();
              return;
            }
            send_next(self, d, job, timeout);
          },
          [=](caf::error& err) {
            if (d->over) {
              return;
            }
            if (err == errc::busy && err.context().match_elements<std::string>() &&
                err.context().get_as<std::string>(0).find("queue is full") !=
                    std::string::npos) {
              self->delayed_send(self, std::chrono::milliseconds(20), i);
              return;
            }
            d->over = true;
            d->error = "request " + std::to_string(i) + " (rows " +
                       std::to_string(begin) + ".." + std::to_string(begin + rows) +
                       "): " + self->system().render(err);
            d->finished.set_value();
            self->quit();
          });
}

} // namespace

inference_result infer_all(service& s, const torch::Tensor& inputs,
                           const inference_options& opts) {
  inference_result result;
  auto d = std::make_shared<driver_state>();
  d->inputs = inputs.contiguous();
  d->rows_per = opts.request_rows > 0 ? opts.request_rows : s.config().max_batch;
  d->chunks = (inputs.size(0) + d->rows_per - 1) / d->rows_per;
  d->outputs.resize(static_cast<size_t>(d->chunks));
  if (!s.wait_serving(s.config().launch_timeout + s.config().profile_timeout)) {
    result.status = s.status();
    result.error = result.status.error.empty() ? "the service did not start serving"
                                               : result.status.error;
    return result;
  }
  auto stages = std::max<size_t>(s.status().stages.size(), 1);
  auto outstanding =
      opts.outstanding > 0 ? opts.outstanding : std::max<size_t>(8, 4 * stages);
  outstanding = std::max<size_t>(1, std::min(outstanding, s.config().max_queue));
  auto future = d->finished.get_future();
  auto job = s.job();
  auto timeout = s.config().request_timeout + std::chrono::seconds(5);
  if (d->chunks == 0) {
    d->finished.set_value();
  } else {
    s.system().spawn([=](caf::event_based_actor* self) -> caf::behavior {
      for (size_t k = 0; k < outstanding; ++k) {
        send_next(self, d, job, timeout);
      }
      return {[=](int64_t i) { send_chunk(self, d, job, timeout, i); }};
    });
  }
  while (future.wait_for(opts.poll) != std::future_status::ready) {
    if (opts.on_progress) {
      opts.on_progress(s.status(), d->rows_done.load());
    }
  }
  result.status = s.status();
  result.error = d->error;
  if (d->error.empty() && d->chunks > 0) {
    result.outputs = torch::cat(d->outputs, 0);
    result.seconds = std::chrono::duration<double>(d->last - d->first).count();
    result.answers = d->answers;
  }
  return result;
}

double inference_result::steady_rate(double skip) const {
  if (answers.size() < 2) {
    return seconds > 0 && outputs.defined()
               ? static_cast<double>(outputs.size(0)) / seconds
               : 0.0;
  }
  auto from = std::min(static_cast<size_t>(skip * static_cast<double>(answers.size())),
                       answers.size() - 2);
  int64_t rows = 0;
  for (size_t i = from + 1; i < answers.size(); ++i) {
    rows += answers[i].second;
  }
  double span = answers.back().first - answers[from].first;
  return span > 0 ? static_cast<double>(rows) / span : 0.0;
}

} // namespace salamander::actors
