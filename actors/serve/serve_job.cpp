// The serving job's behaviour: requests in, dynamic batching, micro-batches
// out to the pipeline, answers cut back into requests (each once), status,
// stats and the console's commands. Plans, launches and failures are in
// serve_plan.cpp.
#include "actors/elapsed.hpp"
#include "actors/job/ended.hpp"
#include "actors/job/metrics.hpp"
#include "actors/job/running.hpp"
#include "actors/logging.hpp"
#include "actors/replication/replica_holder.hpp"
#include "actors/serve/serve_job_impl.hpp"
#include "actors/serve/served_load.hpp"
#include "messages/checkpoint.hpp"
#include "messages/errors.hpp"
#include "models/layered_model.hpp"

#include <algorithm>

namespace salamander::actors {

namespace serve_detail {

void log_event(self_ptr self, const std::string& kind, nlohmann::json fields) {
  self->state.log_event(kind, std::move(fields));
}

bool enter(self_ptr self, algorithms::serve_event e) {
  auto& st = self->state;
  auto next = algorithms::next_phase(st.phase, e);
  if (!next) {
    return false;
  }
  st.phase = *next;
  st.status.phase = status_phase_from_text(algorithms::to_string(st.phase));
  if (algorithms::is_over(st.phase)) {
    become_ended(self);
  }
  return true;
}

bool over(const serve_job_state& st) {
  return algorithms::is_over(st.phase);
}

int window_for(const serve_job_state& st, size_t stages) {
  return st.cfg.in_flight > 0 ? st.cfg.in_flight
                              : static_cast<int>(2 * std::max<size_t>(stages, 1));
}

size_t in_flight_on(const serve_job_state& st, uint64_t generation) {
  size_t n = 0;
  for (auto& [id, m] : st.micros) {
    n += m.generation == generation ? 1 : 0;
  }
  return n;
}

void requeue(self_ptr self, uint64_t generation) {
  auto& st = self->state;
  std::vector<uint64_t> ids;
  for (auto& [id, m] : st.micros) {
    if (m.generation == generation) {
      m.generation = 0;
      ids.push_back(id); // map order: the order they were built and sent
      --st.sent_unanswered;
    }
  }
  st.resend.insert(st.resend.begin(), ids.begin(), ids.end());
  st.status.serving.resent += static_cast<int64_t>(ids.size());
}

void stop_all(self_ptr self) {
  auto& st = self->state;
  if (st.current) {
    stop_pipeline(self, *st.current);
  }
  if (st.next) {
    stop_pipeline(self, *st.next);
  }
  for (auto& p : st.old) {
    stop_pipeline(self, p);
  }
  st.current.reset();
  st.next.reset();
  st.old.clear();
  if (st.cfg.shared_load) {
    st.cfg.shared_load->clear(self->id());
  }
}

namespace {

auto log() {
  return subsystem_log("serve");
}

caf::error ended() {
  // a service that has ended is unavailable (HTTP 503), not a bad request
  return caf::make_error(errc::busy, "the serving job has ended");
}

// The next micro-batch from the queued rows, or 0 when it should wait
// (nothing queued, or batching waits for more rows until the oldest
// request's deadline).
uint64_t build_micro(self_ptr self) {
  auto& st = self->state;
  while (!st.waiting.empty() && !st.requests.count(st.waiting.front().first)) {
    st.waiting.pop_front(); // answered with an error (timed out) meanwhile
  }
  if (st.waiting.empty()) {
    return 0;
  }
  auto& oldest = st.requests.at(st.waiting.front().first);
  auto deadline = oldest.accepted + st.cfg.batch_delay;
  algorithms::batching_view view{st.cfg.batching, st.waiting_rows,
                                 st.cfg.max_batch, clock::now() < deadline,
                                 !st.stop_requested.empty(), st.sent_unanswered};
  if (algorithms::hold_for_more_rows(view)) {
    if (!st.dispatch_scheduled) {
      st.dispatch_scheduled = true;
      auto wait = std::chrono::duration_cast<std::chrono::microseconds>(
          deadline - clock::now() + std::chrono::microseconds(100));
      self->delayed_send(self, wait, dispatch_atom_v);
    }
    return 0;
  }
  serve_micro m;
  std::vector<torch::Tensor> parts;
  int64_t rows = 0;
  while (!st.waiting.empty() && rows < st.cfg.max_batch) {
    auto& [id, from] = st.waiting.front();
    auto it = st.requests.find(id);
    if (it == st.requests.end()) {
      st.waiting.pop_front();
      continue;
    }
    if (!st.cfg.batching && rows > 0) {
      break; // one request per micro-batch
    }
    if (from == 0) {
      it->second.scheduled = clock::now();
    }
    auto take = std::min(it->second.rows - from, st.cfg.max_batch - rows);
    m.segments.push_back({id, from, from + take});
    parts.push_back(it->second.x.narrow(0, from, take));
    rows += take;
    st.waiting_rows -= take;
    from += take;
    if (from == it->second.rows) {
      st.waiting.pop_front();
    }
  }
  if (parts.empty()) {
    return 0;
  }
  m.x = parts.size() == 1 ? parts[0].contiguous() : torch::cat(parts, 0);
  m.built = clock::now();
  auto id = st.next_micro++;
  st.micros.emplace(id, std::move(m));
  return id;
}

int64_t nanoseconds(clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

// Triton's statistics: one micro-batch of `rows` answered `took` after it
// was put together.
void count_execution(serving_status& s, int64_t rows, clock::duration took) {
  s.executions++;
  auto at = std::lower_bound(s.batches.begin(), s.batches.end(), rows,
                             [](const batch_size_stat& b, int64_t r) { return b.rows < r; });
  if (at == s.batches.end() || at->rows != rows) {
    at = s.batches.insert(at, batch_size_stat{rows, 0, 0});
  }
  at->count++;
  at->infer_ns += nanoseconds(took);
}

// ... and one request of `rows` answered after `queued` in the queue and
// `infer` in the pipeline.
void count_answer(serving_status& s, int64_t rows, clock::duration queued,
                  clock::duration infer) {
  s.rows += rows;
  s.queue_ns += nanoseconds(queued);
  s.infer_ns += nanoseconds(infer);
  s.last_answer_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
}

// The request rate is taken over the answers of the last few seconds.
constexpr std::chrono::seconds rate_window{5};

void forget_old_answers(serve_job_state& st, clock::time_point now) {
  while (!st.answered_at.empty() && now - st.answered_at.front() > rate_window) {
    st.answered_at.pop_front();
  }
}

void record_latency(serve_job_state& st, double s) {
  st.latencies.push_back(s);
  if (st.latencies.size() > tuning::serve_latency_window) {
    st.latencies.pop_front();
  }
  auto now = clock::now();
  st.answered_at.push_back(now);
  forget_old_answers(st, now);
}

// The q-quantile of `sorted` (ascending); 0 when empty.
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) {
    return 0;
  }
  auto i = static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

void refresh_status(self_ptr self) {
  auto& st = self->state;
  auto& s = st.status;
  s.elapsed_s = since(st.started);
  s.serving.queue_depth = static_cast<int64_t>(st.waiting.size());
  s.serving.in_flight = static_cast<int64_t>(st.sent_unanswered);
  std::vector<double> lat(st.latencies.begin(), st.latencies.end());
  std::sort(lat.begin(), lat.end());
  s.serving.latency_p50_s = percentile(lat, 0.50);
  s.serving.latency_p95_s = percentile(lat, 0.95);
  s.serving.latency_p99_s = percentile(lat, 0.99);
  forget_old_answers(st, clock::now());
  double span = std::min(std::chrono::duration<double>(rate_window).count(),
                         std::max(since(st.started), 1e-3));
  s.serving.requests_per_s = static_cast<double>(st.answered_at.size()) / span;
  s.paused_by_user = st.user_paused;
  s.stages.clear();
  if (st.current) {
    s.plan = describe_plan(st, st.current->plan);
    for (size_t i = 0; i < st.current->plan.ranges.size(); ++i) {
      stage_row r;
      r.index = static_cast<uint32_t>(i);
      r.node = st.nodes[st.current->plan.nodes[i]].name;
      r.begin = st.current->plan.ranges[i].first;
      r.end = st.current->plan.ranges[i].second;
      r.measured_s = i < st.stage_busy_s.size() ? st.stage_busy_s[i] : 0;
      s.stages.push_back(r);
    }
    s.pipeline.stage_compute_s = st.stage_busy_s;
  }
  s.nodes.clear();
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    static const std::vector<size_t> none;
    auto& plan_nodes = st.current ? st.current->plan.nodes : none;
    auto row = basic_row(st.nodes[n], n, plan_nodes, plan_nodes.size());
    row.speed = st.capacity.profiled() ? st.capacity.speed(n) : 0;
    s.nodes.push_back(row);
  }
}

void write_stats(self_ptr self) {
  auto& st = self->state;
  refresh_status(self);
  auto& s = st.status;
  nlohmann::json busy = nlohmann::json::array();
  for (auto b : st.stage_busy_s) {
    busy.push_back(b);
  }
  log_event(self, "serve",
            {{"requests", s.serving.requests},
             {"requests_per_s", s.serving.requests_per_s},
             {"latency_p50_s", s.serving.latency_p50_s},
             {"latency_p95_s", s.serving.latency_p95_s},
             {"latency_p99_s", s.serving.latency_p99_s},
             {"queue", s.serving.queue_depth},
             {"in_flight", s.serving.in_flight},
             {"failed", s.serving.failed_requests},
             {"rejected", s.serving.rejected},
             {"resent", s.serving.resent},
             {"duplicates", s.serving.duplicates},
             {"stage_busy_s", busy}});
}

void answer_error(serve_job_state& st, uint64_t id, caf::error err) {
  auto it = st.requests.find(id);
  if (it == st.requests.end()) {
    return;
  }
  // its rows not yet in a micro-batch leave the queue with it
  for (auto w = st.waiting.begin(); w != st.waiting.end(); ++w) {
    if (w->first == id) {
      st.waiting_rows -= it->second.rows - w->second;
      st.waiting.erase(w);
      break;
    }
  }
  it->second.promise.deliver(std::move(err));
  st.requests.erase(it);
  st.status.serving.failed_requests++;
}

// The last stage's outputs for micro-batch `id`: the first answer is cut
// into its requests' rows; a later copy (sent again after a failure) is
// dropped.
void on_output(self_ptr self, uint64_t id, const torch::Tensor& y) {
  auto& st = self->state;
  auto it = st.micros.find(id);
  if (it == st.micros.end()) {
    st.status.serving.duplicates++;
    return;
  }
  auto m = std::move(it->second);
  st.micros.erase(it);
  if (m.generation != 0) {
    --st.sent_unanswered;
  } else {
    // answered by an old pipeline while it waited to be sent again
    st.resend.erase(std::remove(st.resend.begin(), st.resend.end(), id), st.resend.end());
  }
  if (!y.defined() || y.dim() < 1 || y.size(0) != m.x.size(0)) {
    fail(self, "the last stage answered micro-batch " + std::to_string(id) + " with " +
                   (y.defined() ? std::to_string(y.size(0)) : std::string("no")) +
                   " rows for " + std::to_string(m.x.size(0)));
    return;
  }
  auto now = clock::now();
  count_execution(st.status.serving, m.x.size(0), now - m.built);
  settle_replication(self, id);
  int64_t offset = 0;
  for (auto& seg : m.segments) {
    auto len = seg.end - seg.begin;
    auto r = st.requests.find(seg.request);
    if (r != st.requests.end()) {
      auto& req = r->second;
      if (!req.y.defined()) {
        auto sizes = y.sizes().vec();
        sizes[0] = req.rows;
        req.y = torch::empty(sizes, y.options());
      }
      req.y.narrow(0, seg.begin, len).copy_(y.narrow(0, offset, len));
      req.answered_rows += len;
      if (req.answered_rows == req.rows) {
        record_latency(st, since(req.accepted));
        count_answer(st.status.serving, req.rows, req.scheduled - req.accepted,
                     now - req.scheduled);
        req.promise.deliver(tensor_payload{req.y});
        st.requests.erase(r);
        st.status.serving.requests++;
      }
    }
    offset += len;
  }
  dispatch(self);
  check_pipelines(self);
}

caf::result<tensor_payload> on_infer(self_ptr self, tensor_payload& in) {
  auto& st = self->state;
  if (!st.stop_requested.empty()) {
    return caf::make_error(errc::busy, "the service is stopping (" + st.stop_requested +
                                           "): no new requests");
  }
  auto& x = in.tensor;
  auto want = st.desc.input;
  auto shape_text = [](c10::IntArrayRef s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) {
      out += (i ? "," : "") + std::to_string(s[i]);
    }
    return out + "]";
  };
  std::vector<int64_t> expect{-1};
  expect.insert(expect.end(), want.begin(), want.end());
  bool ok =
      x.defined() && x.dim() == static_cast<int64_t>(want.size()) + 1 && x.size(0) > 0;
  for (size_t i = 0; ok && i < want.size(); ++i) {
    ok = x.size(static_cast<int64_t>(i) + 1) == want[i];
  }
  if (!ok) {
    return caf::make_error(
        errc::bad_config,
        "input of shape " + (x.defined() ? shape_text(x.sizes()) : std::string("none")) +
            ", the model takes " + shape_text(expect) + " (rows first, at least one)");
  }
  if (x.scalar_type() != torch::kFloat32) {
    return caf::make_error(errc::bad_config, std::string("input of type ") +
                                                 c10::toString(x.scalar_type()) +
                                                 ", the model takes float32");
  }
  if (st.requests.size() >= st.cfg.max_queue) {
    st.status.serving.rejected++;
    return caf::make_error(errc::busy, "the queue is full (" +
                                           std::to_string(st.cfg.max_queue) +
                                           " requests waiting); try again shortly");
  }
  auto id = st.next_request++;
  serve_request r;
  r.x = x.contiguous();
  r.rows = x.size(0);
  r.accepted = clock::now();
  r.promise = self->make_response_promise<tensor_payload>();
  auto rp = r.promise;
  st.requests.emplace(id, std::move(r));
  st.waiting.emplace_back(id, 0);
  st.waiting_rows += x.size(0);
  dispatch(self);
  return rp;
}

void finish(self_ptr self) {
  auto& st = self->state;
  stop_all(self);
  enter(self, algorithms::serve_event::finish);
  write_stats(self);
  log_event(self, "end",
            {{"phase", "finished"},
             {"stopped", st.stop_requested},
             {"requests", st.status.serving.requests},
             {"failed", st.status.serving.failed_requests},
             {"rejected", st.status.serving.rejected},
             {"resent", st.status.serving.resent},
             {"duplicates", st.status.serving.duplicates},
             {"recoveries", st.status.pipeline.recoveries},
             {"replans", st.status.pipeline.replans}});
  st.flush_metrics();
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  // requests that waited too long are answered with a timeout
  auto now = clock::now();
  std::vector<uint64_t> late;
  for (auto& [id, r] : st.requests) {
    if (now - r.accepted > st.cfg.request_timeout) {
      late.push_back(id);
    }
  }
  for (auto id : late) {
    answer_error(st, id,
                 caf::make_error(errc::timeout,
                                 "not answered within " +
                                     std::to_string(st.cfg.request_timeout.count()) +
                                     " ms (the service is " + algorithms::to_string(st.phase) + ")"));
  }
  check_pipelines(self);
  if (!st.stop_requested.empty() && st.requests.empty()) {
    finish(self);
    return;
  }
  if (now - st.last_stats >= st.cfg.stats_period) {
    st.last_stats = now;
    write_stats(self);
    st.flush_metrics();
  }
  self->delayed_send(self, tuning::serve_tick, tick_atom_v);
}

// The console, SIGINT or SIGTERM asked the service to stop (the job core
// kept why): what was accepted is answered, then it ends.
caf::result<std::string> on_stop(self_ptr self) {
  auto& st = self->state;
  st.status.stopped = st.stop_requested;
  st.resume_by_user(); // what was accepted is answered
  log_event(self, "stop", {{"why", st.stop_requested}});
  auto left = st.requests.size();
  dispatch(self); // what waits for a batching deadline goes now
  if (left == 0) {
    finish(self);
    return std::string("stopped: no request was waiting");
  }
  return "stopping: " + std::to_string(left) +
         " accepted request(s) are answered first, new ones are refused";
}

void on_busy(self_ptr self, const batch_stats& s) {
  auto& st = self->state;
  if (!st.current) {
    return;
  }
  auto sender = self->current_sender();
  auto& stages = st.current->stages;
  if (s.stage >= stages.size() ||
      caf::actor_cast<caf::strong_actor_ptr>(stages[s.stage]) != sender) {
    return; // a stage of a pipeline that was replaced
  }
  st.stage_busy_s.resize(stages.size());
  st.stage_busy_s[s.stage] += s.compute_s;
}

caf::result<snapshot_payload> on_snapshot(self_ptr self) {
  auto& st = self->state;
  auto rp = self->make_response_promise<snapshot_payload>();
  self->request(st.central_holder, st.cfg.node_timeout, snapshot_atom_v, uint64_t{0},
                static_cast<uint64_t>(st.layers()), uint64_t{0})
      .then([=](snapshot_payload& p) mutable { rp.deliver(std::move(p)); },
            [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

caf::result<std::string> on_checkpoint(self_ptr self, const std::string& path) {
  auto& st = self->state;
  auto rp = self->make_response_promise<std::string>();
  auto seed = st.cfg.seed;
  self->request(st.central_holder, st.cfg.node_timeout, snapshot_atom_v, uint64_t{0},
                static_cast<uint64_t>(st.layers()), uint64_t{0})
      .then(
          [=](snapshot_payload& p) mutable {
            try {
              messages::checkpoint c;
              c.snapshot = std::move(p.snapshot);
              c.seed = seed;
              c.note = "the weights a serving job serves";
              messages::save_checkpoint(path, c);
              rp.deliver("wrote the served weights to " + path);
            } catch (const std::exception& e) {
              rp.deliver(caf::make_error(errc::io_failed, e.what()));
            }
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

// The service's workers stop, and what waits is refused (the caller quits).
void stop_workers(self_ptr self) {
  auto& st = self->state;
  for (auto& [id, r] : st.requests) {
    r.promise.deliver(caf::make_error(errc::busy, "the service stopped"));
  }
  st.requests.clear();
  stop_all(self);
  st.flush_metrics();
  self->send_exit(st.central_holder, caf::exit_reason::user_shutdown);
}

} // namespace

void dispatch(self_ptr self) {
  auto& st = self->state;
  if (!st.current || st.user_paused) {
    return;
  }
  auto& p = *st.current;
  auto window = static_cast<size_t>(window_for(st, p.stages.size()));
  while (st.sent_unanswered < window) {
    uint64_t id = 0;
    if (!st.resend.empty()) {
      id = st.resend.front();
      st.resend.pop_front();
      if (!st.micros.count(id)) {
        continue;
      }
    } else {
      id = build_micro(self);
      if (id == 0) {
        return;
      }
    }
    auto& m = st.micros.at(id);
    m.generation = p.generation;
    m.sent = clock::now();
    ++st.sent_unanswered;
    self->send(p.stages.front(), eval_atom_v, id, uint32_t{0}, tensor_payload{m.x});
  }
}

void fail(self_ptr self, const std::string& what) {
  auto& st = self->state;
  if (over(st)) {
    return;
  }
  log()->error("serving failed: {}", what);
  st.status.error = what;
  for (auto& [id, r] : st.requests) {
    r.promise.deliver(caf::make_error(errc::stage_failed, what));
    st.status.serving.failed_requests++;
  }
  st.requests.clear();
  st.waiting.clear();
  st.waiting_rows = 0;
  stop_all(self);
  enter(self, algorithms::serve_event::fail);
  log_event(
      self, "end",
      {{"phase", "failed"}, {"error", what}, {"requests", st.status.serving.requests}});
  st.flush_metrics();
}

// The model and its weights on the central holder, the metrics log;
// throws what is wrong.
void prepare(self_ptr self) {
  auto& st = self->state;
  if (st.cfg.max_batch < 1) {
    throw std::invalid_argument("the maximum batch must be at least 1 row");
  }
  st.desc = models::describe(models::model_spec::parse(st.cfg.model));
  // every layer on the central holder from the start: the checkpoint's,
  // or the seed's (what the stages build themselves)
  models::weight_snapshot all;
  if (st.cfg.weights) {
    all = *st.cfg.weights;
    if (all.fingerprint != st.desc.fingerprint) {
      throw std::invalid_argument("the checkpoint is of model " + all.model + " (" +
                                  all.fingerprint + "), not " + st.cfg.model);
    }
  } else {
    models::layered_model full(st.desc, st.cfg.seed);
    all = models::capture(full, nullptr, "", 0);
  }
  all.version = 0; // served weights never step
  for (auto& l : all.layers) {
    l.optimizer_state.clear();
  }
  self->send(st.central_holder, replicate_atom_v, snapshot_payload{std::move(all)});
  st.open_metrics(st.cfg.metrics_path);
}

// The cluster admitted the nodes: log the start, plan the first pipeline.
void on_admitted(self_ptr self, const std::vector<cluster_member>& members) {
  auto& st = self->state;
  nlohmann::json names = nlohmann::json::array();
  for (auto& m : members) {
    st.nodes.push_back(node_of(m));
    names.push_back(m.name);
  }
  log_event(self, "start",
            {{"mode", "serve"},
             {"model", st.cfg.model},
             {"nodes", names},
             {"max_batch", st.cfg.max_batch},
             {"batching", st.cfg.batching},
             {"batch_delay_ms", st.cfg.batch_delay.count()},
             {"unix_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count()}});
  for (auto& m : members) {
    if (m.lost) {
      fail(self, "node " + m.name + " went away during start-up: " + m.why);
      return;
    }
  }
  first_plan(self);
}

// The console paused the service (the job core took it): requests queue.
caf::result<std::string> on_pause(self_ptr self) {
  auto& st = self->state;
  log_event(self, "pause");
  return "paused: " + std::to_string(st.sent_unanswered) +
         " micro-batch(es) in flight finish; requests queue (up to " +
         std::to_string(st.cfg.max_queue) + ") until resume";
}

caf::result<std::string> on_resume(self_ptr self) {
  auto& st = self->state;
  log_event(self, "resume");
  dispatch(self);
  return "resumed with " + std::to_string(st.requests.size()) + " request(s) waiting";
}

caf::result<std::string> on_kill(self_ptr self, uint32_t stage) {
  auto& st = self->state;
  if (!st.current || stage >= st.current->stages.size()) {
    return caf::make_error(errc::no_such_worker,
                           "there is no stage " + std::to_string(stage) + " serving now");
  }
  self->send_exit(st.current->stages[stage], caf::exit_reason::kill);
  return "stage " + std::to_string(stage) + " on node " +
         st.nodes[st.current->plan.nodes[stage]].name + " killed";
}

caf::result<std::string> on_replan(self_ptr self, const std::string& balance) {
  auto& st = self->state;
  if (st.phase != algorithms::serve_phase::serving) {
    return caf::make_error(errc::not_ready, "the service is " +
                                                algorithms::to_string(st.phase) +
                                                "; re-plan once it serves");
  }
  st.replan_balance = balance;
  auto generations = st.generations;
  auto why = plan_next(self, balance.empty() ? "console" : "console, balance " + balance);
  if (!why.empty()) {
    return caf::make_error(errc::bad_config, "repartition " + balance + " refused: " + why);
  }
  if (st.generations == generations) {
    return "the plan that serves (" + describe_plan(st, st.current->plan) +
           ") is that plan already";
  }
  return std::string("re-planning; the current pipeline serves until the new one is up");
}

} // namespace serve_detail

using namespace serve_detail;

namespace {

job_status status_of(self_ptr self) {
  refresh_status(self);
  return self->state.status;
}

// A profiler's capacity report, passed on by the cluster supervisor.
void on_capacity(self_ptr self, const std::string& name, double factor) {
  auto& st = self->state;
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    if (st.nodes[n].name == name && factor > 0) {
      st.capacity.report_capacity(n, factor, false);
    }
  }
}

// The behaviour while the service runs (every phase but finished and failed).
serve_job_actor::behavior_type running(self_ptr self) {
  auto& st = self->state;
  auto hooks = bind_hooks<self_ptr>(
      self, {status_of, on_pause, on_resume, on_stop, on_checkpoint, on_node_lost,
             on_node_joined, on_capacity, stop_workers});
  return running_behavior(
      self, st, std::move(hooks),
      // ---- requests
      [=](infer_atom, tensor_payload& x) { return on_infer(self, x); },
      // ---- from the stages
      [=](eval_atom, uint64_t id, uint32_t, tensor_payload& y) {
        on_output(self, id, y.tensor);
      },
      [=](ready_atom, uint32_t) { on_ready(self); },
      [=](failed_atom, uint32_t stage, std::string& what) {
        log()->warn("stage {} failed: {}", stage, what); // its down message follows
      },
      [=](done_atom, batch_stats& s) { on_busy(self, s); },
      // ---- its own timers
      [=](tick_atom) { on_tick(self); },
      [=](dispatch_atom) {
        self->state.dispatch_scheduled = false;
        dispatch(self);
      },
      // ---- the console
      [=](kill_atom, uint32_t stage) { return on_kill(self, stage); },
      [=](replan_atom, std::string& balance) { return on_replan(self, balance); },
      [=](replicate_atom) -> caf::result<std::string> {
        return std::string(
            "serving: the weights do not change, and every layer is on the "
            "central holder and its chain holder already");
      },
      [=](snapshot_atom) { return on_snapshot(self); });
}

// The behaviour once it finished or failed (actors/job/ended.hpp): requests
// are refused as `busy` (HTTP 503), not as bad requests.
serve_job_actor::behavior_type ended_behavior_of(self_ptr self) {
  return ended_behavior(
      self,
      {"the serving job", "", [self] { return status_of(self); },
       [self] { return on_snapshot(self); }, [self] { stop_workers(self); },
       self->state.events},
      [](infer_atom, const tensor_payload&) -> caf::result<tensor_payload> {
        return ended();
      },
      drop<eval_atom, uint64_t, uint32_t, tensor_payload>(), drop<ready_atom, uint32_t>(),
      drop<failed_atom, uint32_t, std::string>(), drop<done_atom, batch_stats>(),
      drop<dispatch_atom>());
}

} // namespace

void serve_detail::become_ended(self_ptr self) {
  self->become(ended_behavior_of(self));
}

serve_job_actor::behavior_type
serve_job(serve_job_actor::stateful_pointer<serve_job_state> self, serve_config cfg,
          cluster_actor cluster) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.cluster = std::move(cluster);
  st.started = clock::now();
  st.last_stats = clock::now();
  st.status.mode = job_mode::serve;
  st.status.phase = status_phase_from_text(algorithms::to_string(st.phase));
  st.central_holder =
      self->spawn(replica_holder, std::string("central"), std::shared_ptr<link_shaper>{});
  self->set_down_handler([=](caf::down_msg& dm) { on_down(self, dm); });
  if (st.cfg.shared_load) {
    // however the job goes, the others stop planning around it
    self->attach_functor(
        [load = st.cfg.shared_load, id = self->id()] { load->clear(id); });
  }
  bool ok = true;
  try {
    prepare(self);
  } catch (const std::exception& e) {
    fail(self, e.what());
    ok = false;
  }
  if (ok) {
    auto timeout = st.cfg.node_timeout + tuning::helper_margin;
    self->request(st.cluster, timeout, submit_atom_v, caf::actor_cast<caf::actor>(self))
        .then([=](std::vector<cluster_member>& members) { on_admitted(self, members); },
              [=](caf::error& err) { fail(self, self->system().render(err)); });
  }
  self->delayed_send(self, tuning::serve_tick, tick_atom_v);
  // a job that failed here (its model, its metrics log) starts ended
  return over(st) ? ended_behavior_of(self) : running(self);
}

} // namespace salamander::actors
