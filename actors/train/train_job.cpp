#include "actors/supervisor.hpp"

#include "actors/auth.hpp"
#include "actors/metrics.hpp"
#include "actors/replica_holder.hpp"
#include "algorithms/sampling.hpp"
#include "messages/checkpoint.hpp"
#include "messages/errors.hpp"
#include "models/trainer.hpp"

#include <spdlog/spdlog.h>

#include <numeric>
#include <optional>
#include <set>
#include <sstream>

namespace salamander::actors {

namespace {

using self_ptr = supervisor_actor::stateful_pointer<supervisor_state>;
using clock = std::chrono::steady_clock;

double since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

// One line in the metrics log, when the job keeps one.
void log_event(self_ptr self, const std::string& kind,
               nlohmann::json fields = nlohmann::json::object()) {
  if (auto& m = self->state.metrics) {
    m->write(kind, std::move(fields));
  }
}

// The end of the job in the metrics log: how it ended and the lineage of the
// final weights, checked (the audit: every batch exactly once).
void log_end(self_ptr self) {
  auto& st = self->state;
  auto problem = check_lineage(st.status.lineage);
  log_event(self, "end",
            {{"phase", st.status.phase},
             {"error", st.status.error},
             {"committed", st.status.committed},
             {"accuracy", st.status.test_accuracy},
             {"recoveries", st.status.recoveries},
             {"replans", st.status.replans},
             {"redone_batches", st.status.redone_batches},
             {"lineage_ok", problem.empty()},
             {"exact", st.status.exact},
             {"missed_layer_updates", st.status.missed_layer_updates},
             {"lineage_problem", problem},
             {"lineage", st.status.lineage}});
}

// "training", or "paused" while the console holds the job.
const char* running_phase(const supervisor_state& st) {
  return st.user_paused ? "paused" : "training";
}

void stop_stages(self_ptr self) {
  for (auto& s : self->state.stages) {
    self->send_exit(s, caf::exit_reason::user_shutdown);
  }
}

void fail(self_ptr self, const std::string& what) {
  auto& st = self->state;
  if (st.status.finished()) {
    return;
  }
  st.status.phase = "failed";
  st.status.error = what;
  st.status.elapsed_s = since(st.started);
  stop_stages(self);
  for (auto& c : st.checkpoints) {
    c.promise.deliver(caf::make_error(errc::bad_config, "the job failed: " + what));
  }
  st.checkpoints.clear();
  log_end(self);
}

uint64_t total_batches(const supervisor_state& st) {
  return static_cast<uint64_t>(st.batches_per_epoch * st.cfg.epochs);
}

void begin_replan(self_ptr self);
void track_capacity(self_ptr self);
void pause_job(self_ptr self, const std::string& why);
void take_checkpoints(self_ptr self);

void feed(self_ptr self) {
  auto& st = self->state;
  if (st.replanning || st.checkpointing) {
    return;
  }
  if (!st.checkpoints.empty()) {
    if (st.committed == st.fed && !st.recovering) {
      take_checkpoints(self); // at the flush: every stage at one version
    }
    return;
  }
  if (st.user_paused) {
    return; // the console paused the job: what is in flight finishes
  }
  if (st.replan_requested) {
    if (st.committed == st.fed) {
      begin_replan(self); // at the flush: nothing in flight
    }
    return;
  }
  auto epoch_end = (st.committed / st.batches_per_epoch + 1) * st.batches_per_epoch;
  while (st.fed < st.committed + static_cast<uint64_t>(st.cfg.window) && st.fed < epoch_end &&
         st.fed < total_batches(st)) {
    uint64_t g = st.fed++;
    auto epoch = g / st.batches_per_epoch;
    auto id = static_cast<int64_t>(g % st.batches_per_epoch);
    auto b = models::get_batch(*st.train, st.cfg.seed, epoch, id, st.cfg.batch_size);
    int64_t m = std::min<int64_t>(st.cfg.micro_batches, b.x.size(0));
    auto xs = models::split_micro(b.x, m);
    auto ys = models::split_micro(b.y, m);
    size_t member = 0;
    int block_end = st.micro_split.empty() ? static_cast<int>(m) : st.micro_split[0];
    for (int64_t i = 0; i < m; ++i) {
      double weight = static_cast<double>(xs[static_cast<size_t>(i)].size(0)) /
                      static_cast<double>(b.x.size(0));
      // data parallelism: micro-batch i goes to the member whose block has it
      while (!st.micro_split.empty() && i >= block_end && member + 1 < st.stages.size()) {
        block_end += st.micro_split[++member];
      }
      auto& first = st.micro_split.empty() ? st.stages.front() : st.stages[member];
      auto& last = st.micro_split.empty() ? st.stages.back() : st.stages[member];
      self->send(first, forward_atom_v, g, static_cast<uint32_t>(i),
                 tensor_payload{xs[static_cast<size_t>(i)].contiguous()});
      self->send(last, labels_atom_v, g, static_cast<uint32_t>(i), weight,
                 tensor_payload{ys[static_cast<size_t>(i)].contiguous()});
    }
  }
}

void start_epoch(self_ptr self) {
  auto& st = self->state;
  st.status.phase = running_phase(st);
  st.status.epoch = static_cast<int64_t>(st.committed / st.batches_per_epoch) + 1;
  st.status.batch = 0;
  st.epoch_started = clock::now();
  st.epoch_samples = 0;
  feed(self);
}

void finish(self_ptr self) {
  auto& st = self->state;
  st.status.phase = "finished";
  st.status.elapsed_s = since(st.started);
  for (auto& c : st.checkpoints) {
    c.promise.deliver(caf::make_error(errc::bad_config,
                                      "the job finished first; use --save for the final weights"));
  }
  st.checkpoints.clear();
  log_end(self);
}

void evaluate(self_ptr self) {
  auto& st = self->state;
  st.status.phase = "evaluating";
  st.eval_round++;
  st.eval_correct = 0;
  st.eval_pending = 0;
  for (int64_t begin = 0; begin < st.test->size(); begin += st.eval_chunk) {
    auto b = models::get_range(*st.test, begin, std::min(st.test->size(), begin + st.eval_chunk));
    self->send(st.stages.front(), eval_atom_v, st.eval_round,
               static_cast<uint32_t>(begin / st.eval_chunk), tensor_payload{b.x.contiguous()});
    st.eval_pending++;
  }
}

void after_epoch(self_ptr self) {
  auto& st = self->state;
  st.evaluated_epochs = static_cast<int64_t>(st.committed / st.batches_per_epoch);
  if (st.committed >= total_batches(st)) {
    finish(self);
  } else {
    start_epoch(self);
  }
}

void commit(self_ptr self, uint64_t g) {
  auto& st = self->state;
  auto it = st.reports.find(g);
  st.last_reports = std::move(it->second);
  st.reports.erase(it);
  st.status.lineage.push_back(g);
  st.committed++;
  st.last_progress = clock::now();
  st.status.plan_batches++;
  st.status.stage_compute_s.resize(st.stages.size());
  st.status.stage_wait_s.resize(st.stages.size());
  st.status.stage_send_s.resize(st.stages.size());
  for (auto& r : st.last_reports) {
    st.status.stage_compute_s[r.stage] += r.compute_s;
    st.status.stage_wait_s[r.stage] += r.wait_s;
    st.status.stage_send_s[r.stage] += r.send_s;
  }
  // the last stage computes the loss; data-parallel members each their share
  st.status.loss = 0;
  int64_t samples = 0;
  for (auto& r : st.last_reports) {
    if (r.stage + 1 == st.stages.size() || !st.micro_split.empty()) {
      st.status.loss += r.loss;
      samples += r.samples;
    }
  }
  st.epoch_samples += samples;
  st.status.committed = static_cast<int64_t>(st.committed);
  track_capacity(self);
  if (auto it = st.cfg.replan_at.find(st.committed); it != st.cfg.replan_at.end()) {
    st.replan_requested = true;
    st.replan_balance = it->second;
    st.replan_reason = "forced (--replan-at)";
  }
  st.status.batch = static_cast<int64_t>((st.committed - 1) % st.batches_per_epoch) + 1;
  st.status.samples_per_s = static_cast<double>(st.epoch_samples) / since(st.epoch_started);
  st.status.elapsed_s = since(st.started);
  // the recent rate: the last 20 commits (the epoch's average hides a
  // slow-down or a recovery)
  st.recent.emplace_back(clock::now(), samples);
  while (st.recent.size() > 20) {
    st.recent.pop_front();
  }
  if (st.recent.size() >= 2) {
    int64_t n = 0;
    for (size_t i = 1; i < st.recent.size(); ++i) {
      n += st.recent[i].second;
    }
    auto span = std::chrono::duration<double>(st.recent.back().first - st.recent.front().first);
    st.status.recent_samples_per_s = span.count() > 0 ? static_cast<double>(n) / span.count() : 0;
  }
  if (st.metrics) {
    auto stages = nlohmann::json::array();
    for (auto& r : st.last_reports) {
      stages.push_back({{"stage", r.stage},
                        {"node", st.nodes[st.stage_nodes[r.stage]].name},
                        {"compute_s", r.compute_s},
                        {"wait_s", r.wait_s},
                        {"send_s", r.send_s}});
    }
    log_event(self, "batch",
              {{"batch", g},
               {"epoch", st.status.epoch},
               {"samples_per_s", st.status.recent_samples_per_s},
               {"loss", st.status.loss},
               {"plan_version", st.status.plan_version},
               {"stages", stages}});
  }
  if (st.committed % st.batches_per_epoch == 0) {
    st.status.train_s += since(st.epoch_started);
    if (st.cfg.evaluate) {
      evaluate(self);
    } else {
      after_epoch(self);
    }
    return;
  }
  feed(self);
}

std::string describe_plan(const supervisor_state& st) {
  std::string out;
  if (!st.micro_split.empty()) {
    // data parallel: "dp(dev1:5 dev2:2 dev3:1)[0,8)", micro-batches per member
    out = "dp(";
    for (size_t i = 0; i < st.stage_nodes.size(); ++i) {
      out += (i ? " " : "") + st.nodes[st.stage_nodes[i]].name + ":" +
             std::to_string(i < st.micro_split.size() ? st.micro_split[i] : 0);
    }
    return out + ")[" + std::to_string(st.ranges.empty() ? 0 : st.ranges[0].first) + "," +
           std::to_string(st.ranges.empty() ? 0 : st.ranges[0].second) + ")";
  }
  for (size_t i = 0; i < st.ranges.size(); ++i) {
    out += (i ? " " : "") + st.nodes[st.stage_nodes[i]].name + "[" +
           std::to_string(st.ranges[i].first) + "," + std::to_string(st.ranges[i].second) + ")";
  }
  return out;
}

// Which stages (by handle) hold layers [b, e) under the current plan.
void add_sources(const supervisor_state& st, stage_spec& spec) {
  for (size_t j = 0; j < st.ranges.size(); ++j) {
    if (!st.micro_split.empty() && j > 0) {
      break; // data parallel: the members hold the same layers; the first serves
    }
    auto lo = std::max<uint64_t>(spec.begin, st.ranges[j].first);
    auto hi = std::min<uint64_t>(spec.end, st.ranges[j].second);
    if (lo < hi) {
      spec.sources.push_back(caf::actor_cast<caf::actor>(st.stages[j]));
      spec.source_begin.push_back(lo);
      spec.source_end.push_back(hi);
    }
  }
}

// After a re-plan or a recovery: carry on where the committed counter is.
void continue_training(self_ptr self) {
  auto& st = self->state;
  st.status.phase = running_phase(st);
  st.recent.clear();
  st.last_progress = clock::now();
  bool at_epoch_end = st.committed > 0 && st.committed % st.batches_per_epoch == 0;
  if (at_epoch_end &&
      st.evaluated_epochs < static_cast<int64_t>(st.committed / st.batches_per_epoch)) {
    if (st.cfg.evaluate) {
      evaluate(self);
    } else {
      after_epoch(self);
    }
  } else if (st.committed >= total_batches(st)) {
    finish(self);
  } else if (st.committed % st.batches_per_epoch == 0) {
    start_epoch(self);
  } else {
    feed(self);
  }
}

void resume_after_replan(self_ptr self) {
  auto& st = self->state;
  for (auto& old : st.old_stages) {
    self->demonitor(old.address());
    self->send_exit(old, caf::exit_reason::user_shutdown);
  }
  st.old_stages.clear();
  if (st.recovering) {
    st.recovering = false;
    st.status.recoveries++;
    st.status.last_recovery_s = since(st.failure_at);
    st.status.health = "ok";
    log_event(self, "recovered",
              {{"recovery_s", st.status.last_recovery_s},
               {"transfer_s", since(st.recovery_planned_at)},
               {"rollback_version", st.status.rollback_version},
               {"redone_batches", st.rollback_from - static_cast<uint64_t>(
                                                         st.status.rollback_version)},
               {"plan", st.status.plan}});
  } else {
    st.status.replans++;
    st.status.last_replan_s = since(st.replan_started);
    log_event(self, "replan",
              {{"reason", st.replan_reason},
               {"pause_s", st.status.last_replan_s},
               {"moved_bytes", st.status.last_replan_moved_bytes},
               {"plan", st.status.plan},
               {"plan_version", st.status.plan_version}});
  }
  st.replanning = false;
  continue_training(self);
}

void launch_now(self_ptr self, algorithms::layer_ranges ranges, std::vector<size_t> on_nodes,
                std::vector<int> split, std::function<void(stage_spec&)> sources);

// Spawns one stage per range on the given nodes, wires the chain and starts
// (or, when re-planning, resumes) training. A re-planned stage pulls its
// layers from the stages of the old plan, which run until all are ready.
// `sources`, when given, fills each spec's sources (recovery: the replica
// holders); otherwise a re-plan pulls from the current stages.
//
// First, neighbouring nodes connect to each other (the one listed first
// dials), so that tensors between their stages go node to node rather than
// through this process; a pair that cannot connect still works, relayed.
void launch(self_ptr self, algorithms::layer_ranges ranges, std::vector<size_t> on_nodes,
            std::vector<int> split, std::function<void(stage_spec&)> sources = {}) {
  auto& st = self->state;
  std::vector<std::pair<size_t, size_t>> dial;
  // data parallel members exchange nothing with each other
  for (size_t i = 0; split.empty() && i + 1 < on_nodes.size(); ++i) {
    auto a = std::min(on_nodes[i], on_nodes[i + 1]);
    auto b = std::max(on_nodes[i], on_nodes[i + 1]);
    if (a != b && !st.peered.count({a, b}) && st.nodes[b].port != 0 &&
        !st.nodes[b].host.empty() && st.nodes[a].port != 0 &&
        std::find(dial.begin(), dial.end(), std::make_pair(a, b)) == dial.end()) {
      dial.emplace_back(a, b);
    }
  }
  if (dial.empty()) {
    launch_now(self, std::move(ranges), std::move(on_nodes), std::move(split), std::move(sources));
    return;
  }
  auto gen = st.recovery_gen;
  auto pending = std::make_shared<size_t>(dial.size());
  auto go = [=]() mutable {
    if (--*pending > 0 || gen != self->state.recovery_gen || self->state.status.finished()) {
      return;
    }
    launch_now(self, ranges, on_nodes, split, sources);
  };
  for (auto [a, b] : dial) {
    self->request(st.nodes[a].handle, std::chrono::seconds(6), peer_atom_v, st.nodes[b].host,
                  st.nodes[b].port)
        .then(
            [=](bool ok) mutable {
              if (ok) {
                self->state.peered.insert({a, b});
              }
              log_event(self, "peer",
                        {{"from", self->state.nodes[a].name},
                         {"to", self->state.nodes[b].name},
                         {"direct", ok}});
              go();
            },
            [=](caf::error&) mutable { go(); });
  }
}

void launch_now(self_ptr self, algorithms::layer_ranges ranges, std::vector<size_t> on_nodes,
                std::vector<int> split, std::function<void(stage_spec&)> sources) {
  auto& st = self->state;
  if (!split.empty() && split.size() != ranges.size()) {
    fail(self, "internal: a data-parallel split for " + std::to_string(split.size()) +
                   " members and " + std::to_string(ranges.size()) + " stages");
    return;
  }
  auto desc = models::describe(models::model_spec::parse(st.cfg.model));
  bool replan = !st.stages.empty() && !sources;
  auto n = ranges.size();
  std::vector<stage_spec> specs(n);
  for (size_t i = 0; i < n; ++i) {
    auto& spec = specs[i];
    spec.model = desc.spec.canonical();
    spec.fingerprint = desc.fingerprint;
    spec.seed = st.cfg.seed;
    spec.index = static_cast<uint32_t>(i);
    spec.stages = static_cast<uint32_t>(n);
    spec.begin = ranges[i].first;
    spec.end = ranges[i].second;
    spec.micro_batches = static_cast<uint32_t>(st.cfg.micro_batches);
    spec.schedule = st.cfg.schedule;
    spec.optimizer = st.cfg.optimizer;
    spec.lr = st.cfg.lr;
    spec.momentum = st.cfg.momentum;
    spec.threads = st.cfg.threads;
    spec.start_batch = st.committed;
    spec.micro_batch_size = static_cast<uint32_t>(
        (st.cfg.batch_size + st.cfg.micro_batches - 1) / st.cfg.micro_batches);
    spec.replicate_every = st.cfg.replicate_every;
    spec.global_every = st.cfg.global_every;
    if (!split.empty()) {
      spec.members = static_cast<uint32_t>(n);
      spec.member = static_cast<uint32_t>(i);
      int begin = 0;
      for (size_t k = 0; k < i; ++k) {
        begin += split[k];
      }
      spec.micro_begin = static_cast<uint32_t>(begin);
      spec.micro_end = static_cast<uint32_t>(begin + split[i]);
      // the members' weights are the same: the first replicates them
      if (i > 0) {
        spec.replicate_every = 0;
      }
    }
    // the chain replica goes to the next stage's node (data parallel: the
    // second member's), the last stage's to the central holder
    size_t next_node = !split.empty() ? (n > 1 ? on_nodes[1] : st.nodes.size())
                       : i + 1 < n    ? on_nodes[i + 1]
                                      : st.nodes.size();
    spec.chain_holder = caf::actor_cast<caf::actor>(
        next_node < st.holders.size() && st.holders[next_node] ? st.holders[next_node]
                                                               : st.central_holder);
    spec.global_holder = caf::actor_cast<caf::actor>(st.central_holder);
    if (replan) {
      add_sources(st, spec);
    } else if (sources) {
      sources(spec);
    }
  }
  if (replan) {
    // bytes of weights and optimizer state whose node changes
    int64_t moved = 0;
    for (size_t l = 0; l < desc.layers.size(); ++l) {
      size_t before = 0, after = 0;
      for (size_t j = 0; j < st.ranges.size(); ++j) {
        if (l >= st.ranges[j].first && l < st.ranges[j].second) {
          before = st.stage_nodes[j];
        }
      }
      for (size_t j = 0; j < n; ++j) {
        if (l >= ranges[j].first && l < ranges[j].second) {
          after = on_nodes[j];
        }
      }
      if (before != after) {
        moved += desc.layers[l].param_bytes * (st.cfg.optimizer == "adam" ? 3 : 2);
      }
    }
    st.status.last_replan_moved_bytes = moved;
    st.old_stages = st.stages;
  }
  st.ranges = std::move(ranges);
  st.stage_nodes = std::move(on_nodes);
  st.micro_split = std::move(split);
  st.reduce_parts.clear();
  auto fresh = std::make_shared<std::vector<stage_actor>>(n);
  auto pending = std::make_shared<size_t>(n);
  bool pulls = !specs.empty() && !specs[0].sources.empty();
  auto gen = st.recovery_gen;
  for (size_t i = 0; i < n; ++i) {
    auto& node = st.nodes[st.stage_nodes[i]];
    auto node_name = node.name;
    self->request(node.handle, st.cfg.request_timeout, spawn_atom_v, specs[i])
        .then(
            [=](caf::actor handle) {
              auto& st = self->state;
              if (st.status.finished() || gen != st.recovery_gen) {
                // the job ended, or a newer failure superseded this attempt
                self->send_exit(handle, caf::exit_reason::user_shutdown);
                return;
              }
              (*fresh)[i] = caf::actor_cast<stage_actor>(handle);
              self->monitor(handle);
              if (--*pending > 0) {
                return;
              }
              st.stages = *fresh;
              bool dp = !st.micro_split.empty();
              for (size_t k = 0; k < st.stages.size(); ++k) {
                auto prev = k > 0 && !dp ? caf::actor_cast<caf::actor>(st.stages[k - 1])
                                         : caf::actor{};
                auto next = k + 1 < st.stages.size() && !dp
                                ? caf::actor_cast<caf::actor>(st.stages[k + 1])
                                : caf::actor{};
                self->send(st.stages[k], wire_atom_v, prev, next, caf::actor_cast<caf::actor>(self));
              }
              st.status.plan_version++;
              st.status.plan = describe_plan(st);
              st.status.plan_batches = 0;
              st.status.stage_compute_s.assign(st.stages.size(), 0.0);
              st.status.stage_wait_s.assign(st.stages.size(), 0.0);
              st.status.stage_send_s.assign(st.stages.size(), 0.0);
              log_event(self, "plan",
                        {{"plan_version", st.status.plan_version},
                         {"plan", st.status.plan},
                         {"at_batch", st.committed}});
              if (pulls) {
                st.ready_pending = st.stages.size(); // resume when all have pulled state
                return;
              }
              if (st.recovering) {
                resume_after_replan(self); // rolled back to the seed: nothing to pull
                return;
              }
              st.started = clock::now();
              st.last_progress = clock::now();
              start_epoch(self);
            },
            [=](caf::error& err) {
              if (gen != self->state.recovery_gen) {
                return;
              }
              if (self->state.recovering) {
                // a node that is gone is recovered from by its down message;
                // one that refuses (memory) means too little capacity
                auto& st = self->state;
                auto n = st.stage_nodes.size() > i ? st.stage_nodes[i] : 0;
                if (n < st.node_dead.size() && !st.node_dead[n]) {
                  for (auto& s : *fresh) {
                    if (s) {
                      self->demonitor(s.address());
                      self->send_exit(s, caf::exit_reason::user_shutdown);
                    }
                  }
                  pause_job(self, "node " + node_name + " refused a stage: " +
                                  self->system().render(err));
                }
                return;
              }
              fail(self, "node " + node_name + " could not start stage " + std::to_string(i) +
                             ": " + self->system().render(err));
            });
  }
}

int64_t micro_batch_size(const job_config& cfg) {
  return (cfg.batch_size + cfg.micro_batches - 1) / cfg.micro_batches;
}

std::vector<size_t> live_nodes(const supervisor_state& st) {
  std::vector<size_t> out;
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    if (st.node_dead.empty() || !st.node_dead[i]) {
      out.push_back(i);
    }
  }
  return out;
}

// A node's outgoing links to live peers as the probes measured them: the
// median rate and latency (0, 0: not measured). The planner gives each
// device one link rate; the median keeps one odd pair from dominating.
std::pair<double, double> measured_link(const supervisor_state& st, size_t n) {
  std::vector<double> rates, latencies;
  for (auto& [pair, r] : st.links) {
    if (pair.first == n && pair.second < st.node_dead.size() && !st.node_dead[pair.second]) {
      rates.push_back(r.bytes_per_s);
      latencies.push_back(r.latency_s);
    }
  }
  if (rates.empty()) {
    return {0, 0};
  }
  std::sort(rates.begin(), rates.end());
  std::sort(latencies.begin(), latencies.end());
  return {rates[rates.size() / 2], latencies[latencies.size() / 2]};
}

// The planner's view of the job: profiles of the live nodes, scaled by what
// the stages measure. Device d of the request is node live_nodes(st)[d].
algorithms::plan_request planner_request(const supervisor_state& st) {
  auto desc = models::describe(models::model_spec::parse(st.cfg.model));
  algorithms::plan_request req;
  req.mode = algorithms::plan_mode::training;
  req.schedule = st.cfg.schedule == "gpipe" ? algorithms::plan_schedule::gpipe
                                            : algorithms::plan_schedule::one_f_one_b;
  req.micro_batch_size = micro_batch_size(st.cfg);
  req.micro_batches = static_cast<int>(st.cfg.micro_batches);
  req.optimizer_state_factor = st.cfg.optimizer == "adam" ? 2.0 : 1.0;
  req.allow_data_parallel = st.cfg.allow_data_parallel;
  for (auto& l : desc.layers) {
    req.layers.push_back({l.name, static_cast<double>(l.param_bytes),
                          static_cast<double>(l.activation_bytes),
                          static_cast<double>(l.output_bytes)});
  }
  for (size_t n : live_nodes(st)) {
    if (n >= st.profiles.size()) {
      break; // no profiles (an even-split job): the caller adds devices
    }
    auto& p = st.profiles[n];
    algorithms::device_profile d;
    d.name = st.nodes[n].name;
    double scale = st.node_scale.empty() ? 1.0 : st.node_scale[n];
    for (size_t l = 0; l < p.forward_s.size(); ++l) {
      d.forward_s.push_back(p.forward_s[l] * scale);
      d.backward_s.push_back(p.backward_s[l] * scale);
    }
    d.memory_bytes = p.memory_bytes;
    auto [rate, latency] = measured_link(st, n);
    d.link_bytes_per_s = rate > 0                    ? rate
                         : p.link_bytes_per_s > 0 ? p.link_bytes_per_s
                                                  : st.cfg.default_link_bytes_per_s;
    d.link_latency_s = latency > 0 ? latency : 1e-4;
    req.devices.push_back(std::move(d));
  }
  return req;
}

// The plan's stages as layer ranges and node indices (device d of the
// planner's request is node live[d]).
void plan_to_stages(const algorithms::partition_plan& plan, const std::vector<size_t>& live,
                    algorithms::layer_ranges& ranges, std::vector<size_t>& on_nodes,
                    std::vector<int>& split) {
  ranges.clear();
  on_nodes.clear();
  split = plan.micro_split;
  for (auto& s : plan.stages) {
    ranges.emplace_back(s.begin, s.end);
    on_nodes.push_back(live[s.device]);
  }
}

void launch(self_ptr self, algorithms::layer_ranges ranges, std::vector<size_t> on_nodes,
            std::vector<int> split, std::function<void(stage_spec&)> sources);

void launch_planned(self_ptr self) {
  auto& st = self->state;
  try {
    auto req = planner_request(st);
    auto plan = algorithms::plan_partition(req);
    algorithms::layer_ranges ranges;
    std::vector<size_t> on_nodes;
    std::vector<int> split;
    plan_to_stages(plan, live_nodes(st), ranges, on_nodes, split);
    st.predicted_bottleneck_s = plan.bottleneck_s;
    // what the planner predicted, and the best plan of the other kind
    nlohmann::json choice = {{"predicted_samples_per_s", plan.samples_per_s},
                             {"data_parallel", plan.data_parallel()}};
    if (req.allow_data_parallel) {
      try {
        auto other = req;
        other.allow_data_parallel = false;
        auto pipe = algorithms::plan_partition(other);
        choice["best_pipeline_samples_per_s"] = pipe.samples_per_s;
        choice["best_pipeline_stages"] = pipe.stages.size();
      } catch (const std::exception&) {
      }
    }
    log_event(self, "planned", choice);
    launch(self, std::move(ranges), std::move(on_nodes), std::move(split), {});
  } catch (const std::exception& e) {
    fail(self, std::string("cannot plan the job: ") + e.what());
  }
}

// Every live node measures its link to every other (one probe at a time, so
// that they do not share the wire), then `then` runs. A probe that fails
// leaves that link unmeasured; the planner then uses the emulated or the
// default rate.
void probe_links(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  auto live = live_nodes(st);
  auto pairs = std::make_shared<std::vector<std::pair<size_t, size_t>>>();
  for (auto a : live) {
    for (auto b : live) {
      if (a != b && st.infos[b].profiler) {
        pairs->emplace_back(a, b);
      }
    }
  }
  auto next = std::make_shared<std::function<void(size_t)>>();
  *next = [=](size_t k) {
    auto& st = self->state;
    if (st.status.finished()) {
      *next = nullptr;
      return;
    }
    if (k == pairs->size()) {
      *next = nullptr;
      then();
      return;
    }
    auto [a, b] = (*pairs)[k];
    self->request(st.nodes[a].handle, std::chrono::seconds(30), probe_atom_v,
                  st.infos[b].profiler, st.nodes[b].name)
        .then(
            [=](link_report& r) {
              log_event(self, "link", {{"from", r.from}, {"to", r.to}, {"latency_s", r.latency_s},
                                       {"bytes_per_s", r.bytes_per_s}, {"method", r.method}});
              self->state.links[{a, b}] = std::move(r);
              (*next)(k + 1);
            },
            [=](caf::error&) { (*next)(k + 1); });
  };
  (*next)(0);
}

void profile_all(self_ptr self) {
  auto& st = self->state;
  st.status.phase = "profiling";
  st.profiles.assign(st.nodes.size(), device_report{});
  st.node_scale.assign(st.nodes.size(), 1.0);
  auto live = live_nodes(st); // refused nodes are not asked
  auto pending = std::make_shared<size_t>(live.size());
  auto mbs = static_cast<uint32_t>(micro_batch_size(st.cfg));
  for (size_t i : live) {
    auto node_name = st.nodes[i].name;
    self->request(st.nodes[i].handle, st.cfg.profile_timeout, profile_atom_v, st.cfg.model, mbs)
        .then(
            [=](device_report& r) {
              double per_micro = 0;
              for (size_t l = 0; l < r.forward_s.size(); ++l) {
                per_micro += r.forward_s[l] + r.backward_s[l];
              }
              log_event(self, "profile",
                        {{"node", r.node},
                         {"model_s_per_micro_batch", per_micro},
                         {"cpu_share", r.cpu_share},
                         {"slowdown", r.slowdown},
                         {"memory_bytes", r.memory_bytes},
                         {"emulation", r.emulation}});
              self->state.profiles[i] = std::move(r);
              if (--*pending == 0 && !self->state.status.finished()) {
                probe_links(self, [=] { launch_planned(self); });
              }
            },
            [=](caf::error& err) {
              fail(self, "node " + node_name + " could not profile the model: " +
                             self->system().render(err));
            });
  }
}

// Corrects each node's profile by what its stage measured, and asks for a
// re-plan when the planner then predicts enough gain.
void track_capacity(self_ptr self) {
  auto& st = self->state;
  if (st.profiles.empty() || st.replanning || st.replan_requested) {
    return;
  }
  auto M = static_cast<double>(st.cfg.micro_batches);
  for (auto& r : st.last_reports) {
    if (r.stage >= st.ranges.size()) {
      continue;
    }
    size_t n = st.stage_nodes[r.stage];
    double predicted = 0;
    double runs = st.micro_split.empty() ? M : st.micro_split.at(r.stage);
    for (size_t l = st.ranges[r.stage].first; l < st.ranges[r.stage].second; ++l) {
      predicted += (st.profiles[n].forward_s[l] + st.profiles[n].backward_s[l]) * runs;
    }
    if (predicted > 0 && r.compute_s > 0) {
      st.node_scale[n] = 0.7 * st.node_scale[n] + 0.3 * (r.compute_s / predicted);
    }
  }
  if (st.cfg.replan_gain <= 0) {
    return;
  }
  try {
    auto req = planner_request(st);
    auto live = live_nodes(st);
    std::vector<algorithms::stage_assignment> now;
    std::vector<size_t> devices;
    for (size_t i = 0; i < st.ranges.size(); ++i) {
      auto d = std::find(live.begin(), live.end(), st.stage_nodes[i]) - live.begin();
      now.push_back({static_cast<size_t>(d), st.ranges[i].first, st.ranges[i].second, 0, 0, 0});
      devices.push_back(static_cast<size_t>(d));
    }
    int kind = st.micro_split.empty() ? 0 : 1;
    auto current = kind == 0 ? algorithms::evaluate_plan(req, now)
                             : algorithms::evaluate_data_parallel(req, devices, st.micro_split);
    // how far the whole batch runs behind the model, for this kind of plan
    if (st.recent.size() >= 6 && current.objective_s > 0) {
      auto span = std::chrono::duration<double>(st.recent.back().first - st.recent.front().first);
      double period = span.count() / static_cast<double>(st.recent.size() - 1);
      st.plan_kind_ratio[kind] = std::clamp(period / current.objective_s, 0.5, 4.0);
    }
    if (st.committed < st.last_replan_batch + static_cast<uint64_t>(st.cfg.replan_min_batches) ||
        st.committed % 5 != 0) {
      return;
    }
    // the best of each kind, each corrected by what its kind measured
    double now_cost = current.objective_s * st.plan_kind_ratio[kind];
    std::optional<algorithms::partition_plan> best;
    double best_cost = now_cost;
    auto consider = [&](algorithms::partition_plan p) {
      double cost = p.objective_s * st.plan_kind_ratio[p.data_parallel() ? 1 : 0];
      if (cost < best_cost) {
        best_cost = cost;
        best = std::move(p);
      }
    };
    auto pipelines = req;
    pipelines.allow_data_parallel = false;
    try {
      consider(algorithms::plan_partition(pipelines));
    } catch (const algorithms::plan_error&) {
    }
    if (req.allow_data_parallel) {
      try {
        consider(algorithms::plan_data_parallel(req));
      } catch (const algorithms::plan_error&) {
      }
    }
    if (best && best_cost < now_cost * (1.0 - st.cfg.replan_gain)) {
      plan_to_stages(*best, live, st.pending_ranges, st.pending_nodes, st.pending_split);
      st.has_pending_plan = true;
      st.predicted_bottleneck_s = best->bottleneck_s;
      st.replan_requested = true;
      st.replan_balance.clear();
      char why[160];
      std::snprintf(why, sizeof why,
                    "capacity: %d%% faster predicted (measured/modelled batch time: "
                    "pipelines x%.2f, data parallel x%.2f)",
                    static_cast<int>(100 * (1 - best_cost / now_cost)), st.plan_kind_ratio[0],
                    st.plan_kind_ratio[1]);
      st.replan_reason = why;
    }
  } catch (const std::exception&) {
    // no better plan fits; keep the current one
  }
}

// The plan to use now: the forced balance, the user's balance, or an even
// split, stage i on node i.
bool choose_plan(self_ptr self, const std::vector<size_t>& balance,
                 algorithms::layer_ranges& ranges, std::vector<size_t>& on_nodes,
                 std::vector<int>& split, bool strict = true) {
  auto& st = self->state;
  auto layers = models::describe(models::model_spec::parse(st.cfg.model)).layers.size();
  auto live = live_nodes(st);
  split.clear();
  if (st.cfg.data_parallel && balance.empty()) {
    // every node holds the model and runs an even share of the micro-batches
    auto members = std::min<size_t>(live.size(), static_cast<size_t>(st.cfg.micro_batches));
    if (members == 0) {
      fail(self, "no node to run on");
      return false;
    }
    split = algorithms::split_micro_batches(std::vector<double>(members, 1.0),
                                            static_cast<int>(st.cfg.micro_batches));
    ranges.assign(members, {0, layers});
    on_nodes.assign(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(members));
    if (members == 1) {
      split.clear(); // one member: a plain single stage
    }
    return true;
  }
  try {
    // strict: the user asked for these nodes; after a failure, use what fits
    auto stages = strict ? live.size() : std::min(live.size(), layers);
    ranges = balance.empty() ? algorithms::even_split(layers, static_cast<int>(stages))
                             : algorithms::ranges_from_balance(balance, layers);
  } catch (const std::exception& e) {
    fail(self, e.what());
    return false;
  }
  if (ranges.size() > live.size()) {
    fail(self, "the balance names " + std::to_string(ranges.size()) + " stages but only " +
                   std::to_string(live.size()) + " nodes are available");
    return false;
  }
  on_nodes.assign(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(ranges.size()));
  return true;
}

void spawn_stages(self_ptr self) {
  auto& st = self->state;
  st.fingerprint = models::describe(models::model_spec::parse(st.cfg.model)).fingerprint;
  if (st.cfg.auto_plan) {
    profile_all(self);
    return;
  }
  algorithms::layer_ranges ranges;
  std::vector<size_t> on_nodes;
  std::vector<int> split;
  if (!choose_plan(self, st.cfg.balance, ranges, on_nodes, split)) {
    return;
  }
  if (st.cfg.balance.size() > 0 && ranges.size() != st.nodes.size()) {
    fail(self, "the balance names " + std::to_string(ranges.size()) + " stages but " +
                   std::to_string(st.nodes.size()) + " nodes are given");
    return;
  }
  launch(self, std::move(ranges), std::move(on_nodes), std::move(split), {});
}

// Called at a flush (nothing in flight) when a re-plan was asked for.
void begin_replan(self_ptr self) {
  auto& st = self->state;
  st.replan_requested = false;
  algorithms::layer_ranges ranges;
  std::vector<size_t> on_nodes;
  std::vector<int> split;
  std::vector<size_t> balance;
  try {
    balance = parse_balance(st.replan_balance);
  } catch (const std::exception& e) {
    fail(self, e.what());
    return;
  }
  if (st.has_pending_plan) {
    ranges = st.pending_ranges;
    on_nodes = st.pending_nodes;
    split = st.pending_split;
    st.has_pending_plan = false;
  } else if (balance.empty() && !st.profiles.empty()) {
    try {
      plan_to_stages(algorithms::plan_partition(planner_request(st)), live_nodes(st), ranges,
                     on_nodes, split);
    } catch (const std::exception& e) {
      fail(self, std::string("cannot re-plan: ") + e.what());
      return;
    }
  } else if (!choose_plan(self, balance, ranges, on_nodes, split)) {
    return;
  }
  st.last_replan_batch = st.committed;
  if (ranges == st.ranges && on_nodes == st.stage_nodes && split == st.micro_split) {
    feed(self); // nothing would change
    return;
  }
  st.replanning = true;
  st.replan_started = clock::now();
  st.status.phase = "replanning";
  launch(self, std::move(ranges), std::move(on_nodes), std::move(split), {});
}

// Too little capacity is left: keep every replica and wait for a node to
// join (the job is not failed, nothing is discarded).
void pause_job(self_ptr self, const std::string& why) {
  auto& st = self->state;
  st.status.phase = "paused";
  st.status.error = "paused: " + why + "; waiting for a node to join";
  st.status.health = "paused: too little capacity";
  st.recovering = true; // a join resumes through recovery
  st.waiting_for_capacity = true;
  log_event(self, "paused", {{"why", why}});
}

// A stage or node was lost while the job ran: freeze, and recover after the
// failure window (so that a node's stages and the node itself, or two
// neighbours killed together, are handled as one failure).
void on_failure(self_ptr self, const std::string& what) {
  auto& st = self->state;
  if (st.status.finished()) {
    return;
  }
  if (!st.recovering) {
    st.recovering = true;
    st.failure_at = clock::now();
  }
  st.status.phase = "recovering";
  st.status.error = what; // the last failure, for status displays
  st.status.health = "recovering: " + what;
  log_event(self, "failure", {{"what", what}, {"committed", st.committed}});
  ++st.recovery_gen;
  self->delayed_send(self, st.cfg.failure_window, recover_atom_v, st.recovery_gen);
}

// Where recovery can pull layers from: a replica holder (on a node, or the
// central one), or a surviving stage (the snapshot it last replicated, or,
// under the fast policy, its weights as they are now).
struct replica_source {
  caf::actor handle;
  size_t node = 0; ///< node index; nodes.size() for the central holder
  replica_inventory inv;
  bool stage = false;
  uint64_t begin = 0, end = 0; ///< a stage of the failed plan: its layers
};
using source_list = std::shared_ptr<std::vector<replica_source>>;

// Step 2 of recovery, once every live holder and surviving stage said what
// it holds.
void recover_with(self_ptr self, source_list found) {
  auto& st = self->state;
  auto desc = models::describe(models::model_spec::parse(st.cfg.model));
  size_t layers = desc.layers.size();
  // (layer, version) -> sources (index into `found`) that have it
  std::map<std::pair<uint64_t, uint64_t>, std::vector<size_t>> have;
  std::set<uint64_t> versions;
  for (size_t h = 0; h < found->size(); ++h) {
    auto& inv = (*found)[h].inv;
    for (size_t i = 0; i < inv.layers.size(); ++i) {
      have[{inv.layers[i], inv.versions[i]}].push_back(h);
      versions.insert(inv.versions[i]);
    }
  }
  // exact: the newest version every layer has somewhere alive; 0 is the seed
  uint64_t v = 0;
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    if (*it > st.committed) {
      continue;
    }
    bool complete = true;
    for (uint64_t l = 0; l < layers && complete; ++l) {
      complete = have.count({l, *it}) > 0;
    }
    if (complete) {
      v = *it;
      break;
    }
  }
  // fast (FTPipeHD-like): a layer a surviving stage holds keeps its current
  // weights; a lost one comes back at its newest replica; nothing replays
  std::vector<std::pair<size_t, uint64_t>> fast_source(layers, {SIZE_MAX, 0});
  bool fast = st.cfg.recovery_policy == "fast" && st.committed > 0;
  if (fast) {
    for (uint64_t l = 0; l < layers; ++l) {
      for (size_t h = 0; h < found->size(); ++h) {
        auto& src = (*found)[h];
        if (src.stage && src.end > src.begin && l >= src.begin && l < src.end) {
          fast_source[l] = {h, current_version};
        }
      }
      if (fast_source[l].first != SIZE_MAX) {
        continue;
      }
      for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
        if (auto w = have.find({l, *it}); w != have.end()) {
          fast_source[l] = {w->second.front(), *it};
          break;
        }
      }
      if (fast_source[l].first == SIZE_MAX) {
        fast = false; // a lost layer with no replica at all: only exact recovery helps
        log_event(self, "policy_fallback",
                  {{"why", "layer " + std::to_string(l) + " has no replica; recovering exactly"}});
        break;
      }
    }
  }
  algorithms::layer_ranges ranges;
  std::vector<size_t> on_nodes;
  std::vector<int> split;
  if (!st.profiles.empty()) {
    try {
      plan_to_stages(algorithms::plan_partition(planner_request(st)), live_nodes(st), ranges,
                     on_nodes, split);
    } catch (const std::exception& e) {
      pause_job(self, std::string("the surviving nodes cannot hold the model: ") + e.what());
      return;
    }
  } else if (st.cfg.data_parallel) {
    // a data-parallel job without profiles: even shares over the survivors
    if (!choose_plan(self, {}, ranges, on_nodes, split, false)) {
      return;
    }
  } else {
    // No profiles (an even-split job): plan over the survivors with costs
    // from the model's FLOPs and each node's memory, so that what is left is
    // used as well as it can be and memory is respected.
    auto req = planner_request(st);
    req.allow_data_parallel = false; // the job is a pipeline; it stays one
    auto live = live_nodes(st);
    req.devices.clear();
    for (auto n : live) {
      algorithms::device_profile d;
      d.name = st.nodes[n].name;
      for (auto& l : desc.layers) {
        d.forward_s.push_back(l.flops * 1e-9);
        d.backward_s.push_back(2 * l.flops * 1e-9);
      }
      d.memory_bytes = st.infos[n].memory_bytes > 0 ? st.infos[n].memory_bytes : 1e18;
      d.link_bytes_per_s = st.cfg.default_link_bytes_per_s;
      d.link_latency_s = 1e-4;
      req.devices.push_back(std::move(d));
    }
    try {
      plan_to_stages(algorithms::plan_partition(req), live, ranges, on_nodes, split);
    } catch (const std::exception& e) {
      pause_job(self, std::string("the surviving nodes cannot hold the model: ") + e.what());
      return;
    }
  }
  st.rollback_from = st.committed;
  st.recovery_planned_at = clock::now();
  if (fast) {
    // no rollback: training resumes where it was; the lost layers miss the
    // updates since their replica (not exact, and the audit says so)
    auto stale = nlohmann::json::array();
    int64_t missed = 0;
    for (uint64_t l = 0; l < layers; ++l) {
      if (fast_source[l].second != current_version) {
        stale.push_back({{"layer", l}, {"version", fast_source[l].second}});
        // a replica can be newer than `committed` (its stage ran ahead)
        if (fast_source[l].second < st.committed) {
          missed += static_cast<int64_t>(st.committed - fast_source[l].second);
        }
      }
    }
    st.status.exact = false;
    st.status.missed_layer_updates += missed;
    st.status.rollback_version = static_cast<int64_t>(st.committed);
    log_event(self, "recovery_plan",
              {{"policy", "fast"},
               {"rollback_version", st.committed},
               {"redone_batches", 0},
               {"stale_layers", stale},
               {"missed_layer_updates", missed},
               {"detect_to_plan_s", since(st.failure_at)},
               {"live_nodes", live_nodes(st).size()}});
  } else {
    // exact: roll back to v; batches after it are replayed
    log_event(self, "recovery_plan",
              {{"policy", "exact"},
               {"rollback_version", v},
               {"redone_batches", st.committed - v},
               {"detect_to_plan_s", since(st.failure_at)},
               {"live_nodes", live_nodes(st).size()}});
    st.status.redone_batches += static_cast<int64_t>(st.committed - v);
    st.status.rollback_version = static_cast<int64_t>(v);
    st.status.lineage.resize(v);
    st.committed = v;
  }
  auto resume_at = st.committed;
  st.fed = resume_at;
  st.reports.clear();
  st.status.committed = static_cast<int64_t>(resume_at);
  st.evaluated_epochs = std::min<int64_t>(st.evaluated_epochs,
                                          static_cast<int64_t>(resume_at / st.batches_per_epoch));
  st.stages.clear();
  st.ranges.clear();
  st.stage_nodes.clear();
  // sources: for each layer the source on the stage's own node if it has the
  // layer at v, else any live one (the central holder has them all)
  auto sources = [=](stage_spec& spec) {
    if (!fast && v == 0) {
      return; // the seed: nothing to pull
    }
    auto& st = self->state;
    for (uint64_t l = spec.begin; l < spec.end; ++l) {
      size_t pick = 0;
      uint64_t version = v;
      if (fast) {
        std::tie(pick, version) = fast_source[l];
      } else {
        auto& who = have.at({l, v});
        pick = who.front();
        for (auto h : who) {
          if (st.stage_nodes.size() > spec.index && (*found)[h].node == st.stage_nodes[spec.index]) {
            pick = h;
          }
        }
      }
      auto& from = (*found)[pick].handle;
      if (!spec.sources.empty() && spec.sources.back() == from && spec.source_end.back() == l &&
          spec.source_version.back() == version) {
        spec.source_end.back() = l + 1;
      } else {
        spec.sources.push_back(from);
        spec.source_begin.push_back(l);
        spec.source_end.push_back(l + 1);
        spec.source_version.push_back(version);
      }
    }
  };
  launch(self, std::move(ranges), std::move(on_nodes), std::move(split), sources);
}

// Step 1 of recovery: ask every live replica holder what it has, and every
// surviving stage what it kept from its last replication (the freshest copy
// of its layers when the holder of its chain replica died). Surviving stages
// stay up until the new ones have pulled from them; the rest stop now.
void recover(self_ptr self, uint64_t gen) {
  auto& st = self->state;
  if (gen != st.recovery_gen || st.status.finished()) {
    return;
  }
  st.waiting_for_capacity = false;
  auto found = std::make_shared<std::vector<replica_source>>();
  std::vector<replica_source> ask;
  ask.push_back({caf::actor_cast<caf::actor>(st.central_holder), st.nodes.size(), {}, false});
  for (auto n : live_nodes(st)) {
    if (st.holders[n]) {
      ask.push_back({caf::actor_cast<caf::actor>(st.holders[n]), n, {}, false});
    }
  }
  std::vector<stage_actor> keep;
  auto consider = [&](const stage_actor& s, size_t node, uint64_t b, uint64_t e) {
    if (!s) {
      return;
    }
    if (st.dead_stages.count(s.address()) > 0) {
      self->demonitor(s.address());
      return;
    }
    self->demonitor(s.address());
    if (node < st.node_dead.size() && !st.node_dead[node]) {
      self->send(s, pause_atom_v); // before get: what it reports stays true
      keep.push_back(s);
      ask.push_back({caf::actor_cast<caf::actor>(s), node, {}, true, b, e});
    } else {
      self->send_exit(s, caf::exit_reason::user_shutdown);
    }
  };
  for (size_t i = 0; i < st.stages.size(); ++i) {
    bool planned = i < st.stage_nodes.size() && i < st.ranges.size();
    consider(st.stages[i], planned ? st.stage_nodes[i] : st.nodes.size(),
             planned ? st.ranges[i].first : 0, planned ? st.ranges[i].second : 0);
  }
  for (auto& s : st.old_stages) {
    // a previous plan's stages (an interrupted re-plan or recovery): their
    // kept snapshots only; their node is unknown here, so any live one
    if (s && st.dead_stages.count(s.address()) == 0) {
      self->demonitor(s.address());
      self->send(s, pause_atom_v);
      keep.push_back(s);
      ask.push_back({caf::actor_cast<caf::actor>(s), st.nodes.size(), {}, true, 0, 0});
    }
  }
  st.old_stages = keep; // stopped once the new stages are ready
  st.stages.clear();
  st.replanning = false;
  st.replan_requested = false;
  st.has_pending_plan = false;
  st.ready_pending = 0;
  st.eval_round++; // results of an interrupted evaluation are ignored
  if (live_nodes(st).empty()) {
    pause_job(self, "no nodes are left");
    return;
  }
  auto pending = std::make_shared<size_t>(ask.size());
  for (auto& a : ask) {
    auto src = a;
    auto finish = [=] {
      if (--*pending == 0 && gen == self->state.recovery_gen) {
        recover_with(self, found);
      }
    };
    // the same question to a stage or a holder; no answer: nothing to use
    auto ask_one = [&](auto handle, std::chrono::seconds timeout) {
      self->request(handle, timeout, caf::get_atom_v)
          .then(
              [=](replica_inventory& inv) {
                auto copy = src;
                copy.inv = std::move(inv);
                found->push_back(std::move(copy));
                finish();
              },
              [=](caf::error&) { finish(); });
    };
    if (src.stage) {
      ask_one(caf::actor_cast<stage_actor>(src.handle), std::chrono::seconds(2));
    } else {
      ask_one(caf::actor_cast<replica_holder_actor>(src.handle), std::chrono::seconds(5));
    }
  }
}

// Commands that change the job (kill, slow, repartition, pause, resume,
// replicate, checkpoint) come only from consoles that proved the cluster
// secret, when there is one; looking (status and the rest) is open.
std::optional<caf::error> console_refused(self_ptr self) {
  auto& st = self->state;
  if (st.cfg.secret.empty()) {
    return std::nullopt;
  }
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (sender && st.consoles.count(sender) > 0) {
    return std::nullopt;
  }
  return caf::make_error(errc::unauthorized,
                         "this job has a cluster secret: prove it first (salamander console "
                         "with --secret-file or SALAMANDER_SECRET)");
}

// Checks a node's answer to hello: its protocol and its proof of the cluster
// secret. Sends the node the supervisor's proof, or why it is refused. ""
// when the node is in; otherwise why not (logged on both sides).
std::string admit(self_ptr self, const node_actor& handle, const std::string& name,
                  const std::string& challenge, const node_info& info) {
  auto& st = self->state;
  if (info.protocol != protocol_version) {
    return "node " + name + " speaks protocol " + std::to_string(info.protocol) +
           ", this supervisor " + std::to_string(protocol_version) +
           " (run the same salamander version everywhere)";
  }
  if (!verify(st.cfg.secret, "node", name, challenge, info.proof)) {
    auto why = "node " + name + " did not prove the cluster secret (wrong or missing secret "
                                "on that node); it is refused and gets no stage";
    spdlog::error("REFUSED {}", why);
    self->send(handle, auth_atom_v, std::string{},
               std::string("this node did not prove the cluster secret (wrong or missing "
                           "--secret-file / SALAMANDER_SECRET)"));
    log_event(self, "refused", {{"node", name}, {"why", "cluster secret"}});
    return why;
  }
  self->send(handle, auth_atom_v, prove(st.cfg.secret, "supervisor", name, info.challenge),
             std::string{});
  return "";
}

void hello_all(self_ptr self) {
  auto& st = self->state;
  auto pending = std::make_shared<size_t>(st.nodes.size());
  st.infos.assign(st.nodes.size(), node_info{});
  st.holders.assign(st.nodes.size(), replica_holder_actor{});
  st.node_dead.assign(st.nodes.size(), false);
  st.node_refused.assign(st.nodes.size(), false);
  st.last_seen.assign(st.nodes.size(), clock::time_point{});
  for (auto& n : st.nodes) {
    self->monitor(n.handle); // a node lost during start-up fails it at once
  }
  auto all_answered = [=] {
    auto& st = self->state;
    if (st.status.finished()) {
      return;
    }
    if (live_nodes(st).empty()) {
      fail(self, "no node proved the cluster secret; check --secret-file / SALAMANDER_SECRET "
                 "on the nodes and here");
      return;
    }
    spawn_stages(self);
  };
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    auto node_name = st.nodes[i].name;
    auto challenge = make_challenge();
    auto handle = st.nodes[i].handle;
    self->request(handle, st.cfg.request_timeout, hello_atom_v, protocol_version, challenge)
        .then(
            [=](node_info info) {
              auto& st = self->state;
              auto why = admit(self, handle, node_name, challenge, info);
              if (!why.empty() && info.protocol != protocol_version) {
                fail(self, why);
                return;
              }
              if (!why.empty()) {
                st.node_refused[i] = true;
                st.node_dead[i] = true;
                self->demonitor(handle.address());
              } else {
                st.holders[i] = caf::actor_cast<replica_holder_actor>(info.replica_holder);
                st.infos[i] = std::move(info);
                st.last_seen[i] = clock::now();
              }
              if (--*pending == 0) {
                all_answered();
              }
            },
            [=](caf::error& err) {
              fail(self, "node " + node_name + " did not answer hello: " +
                             self->system().render(err));
            });
  }
}

// Every tick: ask each live node how it is (a hello without a challenge).
// The console's `nodes` shows when each last answered; detection itself is
// CAF's (connection loss, heartbeat timeout), not this.
void probe_nodes(self_ptr self) {
  auto& st = self->state;
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    if (st.node_dead[n]) {
      continue;
    }
    self->request(st.nodes[n].handle, std::chrono::milliseconds(900), hello_atom_v,
                  protocol_version, std::string{})
        .then(
            [=](node_info& info) {
              auto& st = self->state;
              if (n < st.last_seen.size()) {
                st.last_seen[n] = clock::now();
                st.infos[n].memory_bytes = info.memory_bytes;
                st.infos[n].cpu_share = info.cpu_share;
                st.infos[n].link_bytes_per_s = info.link_bytes_per_s;
              }
            },
            [](caf::error&) {});
  }
}

// Fills the console's views of the job: nodes and stages.
void refresh_rows(self_ptr self) {
  auto& st = self->state;
  auto& s = st.status;
  auto now = clock::now();
  s.nodes.clear();
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    node_row r;
    r.name = st.nodes[n].name;
    bool refused = n < st.node_refused.size() && st.node_refused[n];
    bool dead = n < st.node_dead.size() && st.node_dead[n];
    double ago = n < st.last_seen.size() && st.last_seen[n] != clock::time_point{}
                     ? std::chrono::duration<double>(now - st.last_seen[n]).count()
                     : -1;
    r.last_heartbeat_s = ago;
    r.health = refused ? "refused" : dead ? "dead" : ago > 2.5 ? "late" : "ok";
    r.role = "spare";
    for (size_t i = 0; i < st.stage_nodes.size() && i < st.stages.size(); ++i) {
      if (st.stage_nodes[i] == n) {
        r.role = "stage " + std::to_string(i);
      }
    }
    if (n < st.infos.size()) {
      r.emulation = st.infos[n].emulation;
      r.cpu_share = st.infos[n].cpu_share;
      r.memory_bytes = st.infos[n].memory_bytes;
      auto [rate, latency] = measured_link(st, n);
      r.link_bytes_per_s = rate > 0 ? rate : st.infos[n].link_bytes_per_s;
      r.link_latency_s = latency;
    }
    if (n < st.node_scale.size() && st.node_scale[n] > 0) {
      r.speed = 1.0 / st.node_scale[n];
    }
    if (n < st.capacity.size()) {
      r.capacity = st.capacity[n];
    }
    s.nodes.push_back(std::move(r));
  }
  s.stages.clear();
  auto M = static_cast<double>(st.cfg.micro_batches);
  for (size_t i = 0; i < st.ranges.size() && i < st.stage_nodes.size(); ++i) {
    stage_row r;
    r.index = static_cast<uint32_t>(i);
    size_t n = st.stage_nodes[i];
    r.node = st.nodes[n].name;
    r.begin = st.ranges[i].first;
    r.end = st.ranges[i].second;
    if (n < st.profiles.size() && !st.profiles[n].forward_s.empty()) {
      for (size_t l = r.begin; l < r.end && l < st.profiles[n].forward_s.size(); ++l) {
        r.predicted_s += (st.profiles[n].forward_s[l] + st.profiles[n].backward_s[l]) * M;
      }
    }
    for (auto& b : st.last_reports) {
      if (b.stage == i) {
        r.measured_s = b.compute_s;
        r.wait_s = b.wait_s;
        r.send_s = b.send_s;
      }
    }
    s.stages.push_back(std::move(r));
  }
  if (!st.recovering && !st.status.finished()) {
    std::string health = "ok";
    for (auto& r : s.nodes) {
      if (r.health == "late") {
        health = "node " + r.name + " late (" + std::to_string(static_cast<int>(r.last_heartbeat_s)) +
                 " s)";
      }
    }
    s.health = health;
  }
  s.paused_by_user = st.user_paused;
  s.elapsed_s = since(st.started);
}

// Every stage's weights and optimizer state, merged into one snapshot (its
// version the lowest of theirs); `done` gets it, or the first stage (index)
// that did not hand its part over and why.
using weights_done =
    std::function<void(caf::expected<models::weight_snapshot>, size_t failed_stage)>;

void collect_weights(self_ptr self, weights_done done) {
  auto& st = self->state;
  // data parallel: the members hold the same weights; the first answers
  size_t asked = st.micro_split.empty() ? st.stages.size() : std::min<size_t>(1, st.stages.size());
  auto parts = std::make_shared<std::vector<models::weight_snapshot>>(asked);
  auto pending = std::make_shared<size_t>(asked);
  auto failed = std::make_shared<bool>(false);
  for (size_t i = 0; i < asked; ++i) {
    self->request(st.stages[i], st.cfg.request_timeout, snapshot_atom_v)
        .then(
            [=](snapshot_payload& part) {
              (*parts)[i] = std::move(part.snapshot);
              if (--*pending > 0 || *failed) {
                return;
              }
              auto all = (*parts)[0];
              all.layers.clear();
              for (auto& p : *parts) {
                all.version = std::min(all.version, p.version);
                for (auto& l : p.layers) {
                  all.layers.push_back(std::move(l));
                }
              }
              done(std::move(all), 0);
            },
            [=](caf::error& err) {
              if (!*failed) {
                *failed = true;
                done(std::move(err), i);
              }
            });
  }
}

// At a flush: every stage's weights into one checkpoint per request.
void take_checkpoints(self_ptr self) {
  self->state.checkpointing = true;
  collect_weights(self, [=](caf::expected<models::weight_snapshot> all, size_t failed_stage) {
    auto& st = self->state;
    auto requests = std::move(st.checkpoints);
    st.checkpoints.clear();
    st.checkpointing = false;
    for (auto& r : requests) {
      if (!all) {
        r.promise.deliver(caf::make_error(
            errc::stage_failed, "stage " + std::to_string(failed_stage) +
                                    " did not hand over its weights: " +
                                    self->system().render(all.error())));
        continue;
      }
      try {
        messages::checkpoint ckpt;
        ckpt.snapshot = *all;
        ckpt.seed = st.cfg.seed;
        ckpt.epoch = st.committed / static_cast<uint64_t>(st.batches_per_epoch);
        ckpt.batches_in_epoch = st.committed % static_cast<uint64_t>(st.batches_per_epoch);
        ckpt.note = "console checkpoint at batch " + std::to_string(st.committed) + ", plan " +
                    st.status.plan;
        messages::save_checkpoint(r.path, ckpt);
        log_event(self, "checkpoint", {{"path", r.path}, {"version", all->version}});
        r.promise.deliver("saved checkpoint " + r.path + " (version " +
                          std::to_string(all->version) + ", " +
                          std::to_string(all->layers.size()) + " layers)");
      } catch (const std::exception& e) {
        r.promise.deliver(caf::make_error(errc::bad_config, e.what()));
      }
    }
    if (!st.status.finished()) {
      feed(self);
    }
  });
}

} // namespace

std::vector<size_t> parse_balance(const std::string& text) {
  std::vector<size_t> out;
  if (text.empty()) {
    return out;
  }
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0) {
        throw std::invalid_argument(item);
      }
      out.push_back(static_cast<size_t>(v));
    } catch (const std::exception&) {
      throw std::invalid_argument("balance '" + text + "' is not a list of layer counts like 1,1,2");
    }
  }
  return out;
}

supervisor_actor::behavior_type supervisor(supervisor_actor::stateful_pointer<supervisor_state> self,
                                           job_config cfg, std::vector<remote_node> nodes,
                                           std::shared_ptr<const models::dataset> train,
                                           std::shared_ptr<const models::dataset> test) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.nodes = std::move(nodes);
  st.train = std::move(train);
  st.test = std::move(test);
  st.status.phase = "starting";
  st.status.epochs = st.cfg.epochs;
  st.started = clock::now();
  st.last_progress = clock::now();
  st.batches_per_epoch =
      algorithms::batches_per_epoch(st.train->size(), st.cfg.batch_size, false);
  if (st.cfg.max_batches > 0) {
    st.batches_per_epoch = std::min(st.batches_per_epoch, st.cfg.max_batches);
  }
  st.status.batches = st.batches_per_epoch;
  st.central_holder = self->spawn(replica_holder, std::string("central"));
  if (!st.cfg.metrics_path.empty()) {
    try {
      st.metrics = std::make_shared<metrics_log>(st.cfg.metrics_path);
      st.status.metrics_path = st.cfg.metrics_path;
      nlohmann::json names = nlohmann::json::array();
      for (auto& n : st.nodes) {
        names.push_back(n.name);
      }
      log_event(self, "start",
                {{"model", st.cfg.model},
                 {"nodes", names},
                 {"epochs", st.cfg.epochs},
                 {"batches_per_epoch", st.batches_per_epoch},
                 {"batch_size", st.cfg.batch_size},
                 {"micro_batches", st.cfg.micro_batches},
                 {"schedule", st.cfg.schedule},
                 {"replicate_every", st.cfg.replicate_every},
                 {"unix_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count()}});
    } catch (const std::exception& e) {
      fail(self, e.what());
    }
  }
  if (st.cfg.secret.empty()) {
    spdlog::warn("no cluster secret set (--secret-file or SALAMANDER_SECRET): any node that "
                 "can reach this supervisor can take part");
  }
  if (st.status.finished()) {
    // the metrics log could not be opened
  } else if (st.nodes.empty()) {
    fail(self, "no nodes to run the job on");
  } else {
    hello_all(self);
  }
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    bool running = st.status.phase != "starting" && st.status.phase != "profiling";
    for (size_t n = 0; n < st.nodes.size(); ++n) {
      if (st.nodes[n].handle.address() == dm.source) {
        if (n < st.node_refused.size() && st.node_refused[n]) {
          return; // never part of the job
        }
        auto what = "node " + st.nodes[n].name + " went away" +
                    (running ? ": " : " during start-up: ") + self->system().render(dm.reason);
        if (!running) {
          fail(self, what);
          return;
        }
        if (!st.node_dead[n]) {
          st.node_dead[n] = true;
          st.status.dead_nodes.push_back(st.nodes[n].name);
        }
        for (auto it = st.peered.begin(); it != st.peered.end();) {
          it = it->first == n || it->second == n ? st.peered.erase(it) : std::next(it);
        }
        on_failure(self, what);
        return;
      }
    }
    for (size_t i = 0; i < st.stages.size(); ++i) {
      if (st.stages[i] && st.stages[i].address() == dm.source) {
        st.dead_stages.insert(dm.source); // recovery does not ask it (a request would hang)
        auto what = "stage " + std::to_string(i) + " on node " +
                    st.nodes[st.stage_nodes[i]].name + " went down: " +
                    self->system().render(dm.reason);
        if (!running) {
          fail(self, what);
          return;
        }
        on_failure(self, what);
        return;
      }
    }
  });
  self->delayed_send(self, std::chrono::seconds(1), tick_atom_v);
  return {
      [=](done_atom, batch_stats& s) {
        auto& st = self->state;
        if (st.status.finished() || st.recovering) {
          return;
        }
        auto sender = self->current_sender();
        bool current = std::any_of(st.stages.begin(), st.stages.end(), [&](const stage_actor& a) {
          return caf::actor_cast<caf::strong_actor_ptr>(a) == sender;
        });
        if (!current) {
          return; // a stage of a plan that was replaced
        }
        auto& r = st.reports[s.batch];
        r.push_back(s);
        if (r.size() == st.stages.size() && s.batch == st.committed) {
          commit(self, s.batch);
        }
      },
      [=](reduce_atom, uint64_t batch, uint32_t member, uint64_t grad_values,
          tensor_payload& part) {
        // data parallelism: sum the members' gradients, chain their
        // BatchNorm statistics, and send every member the result
        auto& st = self->state;
        if (st.status.finished() || st.recovering || st.micro_split.empty() ||
            member >= st.stages.size() ||
            caf::actor_cast<caf::strong_actor_ptr>(st.stages[member]) != self->current_sender()) {
          return; // a stage of a plan that was replaced
        }
        auto& parts = st.reduce_parts[batch];
        parts.resize(st.stages.size());
        parts[member] = std::move(part.tensor);
        for (auto& p : parts) {
          if (!p.defined()) {
            return;
          }
        }
        try {
          auto merged = models::dp_merge(parts, static_cast<int64_t>(grad_values));
          st.reduce_parts.erase(batch);
          for (auto& s : st.stages) {
            self->send(s, reduce_atom_v, batch, tensor_payload{merged});
          }
        } catch (const std::exception& e) {
          fail(self, std::string("data-parallel sum failed: ") + e.what());
        }
      },
      [=](failed_atom, uint32_t stage, std::string& what) {
        auto& st = self->state;
        fail(self, "stage " + std::to_string(stage) +
                       (stage < st.nodes.size() ? " on node " + st.nodes[stage].name : "") +
                       " failed: " + what);
      },
      [=](eval_atom, uint64_t round, uint32_t chunk, tensor_payload& logits) {
        auto& st = self->state;
        if (round != st.eval_round || st.status.finished()) {
          return;
        }
        int64_t begin = static_cast<int64_t>(chunk) * st.eval_chunk;
        auto b = models::get_range(*st.test, begin, begin + logits.tensor.size(0));
        st.eval_correct += models::count_correct(logits.tensor, b.y);
        if (--st.eval_pending == 0) {
          st.status.test_accuracy =
              static_cast<double>(st.eval_correct) / static_cast<double>(st.test->size());
          after_epoch(self);
        }
      },
      [=](tick_atom) {
        auto& st = self->state;
        if (st.status.finished()) {
          return;
        }
        if (st.status.phase == "training" &&
            clock::now() - st.last_progress > st.cfg.progress_timeout) {
          fail(self, "no batch committed for " +
                         std::to_string(st.cfg.progress_timeout.count() / 1000) +
                         " s (batch " + std::to_string(st.committed) + ")");
          return;
        }
        if (st.status.phase != "starting") {
          probe_nodes(self);
        }
        if (st.metrics) {
          st.metrics->flush();
        }
        self->delayed_send(self, std::chrono::seconds(1), tick_atom_v);
      },
      [=](ready_atom, uint32_t) {
        auto& st = self->state;
        if ((st.replanning || st.recovering) && st.ready_pending > 0 &&
            --st.ready_pending == 0) {
          resume_after_replan(self);
        }
      },
      [=](recover_atom, uint64_t gen) { recover(self, gen); },
      [=](kill_atom, std::string& name) -> caf::result<std::string> {
        if (auto refused = console_refused(self)) {
          return *refused;
        }
        auto& st = self->state;
        for (size_t n = 0; n < st.nodes.size(); ++n) {
          if (st.nodes[n].name == name && !st.node_dead[n]) {
            return self->delegate(st.nodes[n].handle, kill_atom_v);
          }
        }
        return caf::make_error(errc::bad_config, "no live node named " + name);
      },
      [=](slow_atom, std::string& name, double factor) -> caf::result<std::string> {
        if (auto refused = console_refused(self)) {
          return *refused;
        }
        auto& st = self->state;
        for (size_t n = 0; n < st.nodes.size(); ++n) {
          if (st.nodes[n].name == name && !st.node_dead[n]) {
            return self->delegate(st.nodes[n].handle, slow_atom_v, factor);
          }
        }
        return caf::make_error(errc::bad_config, "no live node named " + name);
      },
      [=](join_atom, caf::actor node, std::string& name) -> caf::result<std::string> {
        auto& st = self->state;
        if (st.status.finished()) {
          return caf::make_error(errc::bad_config, "the job has ended");
        }
        auto handle = caf::actor_cast<node_actor>(node);
        auto rp = self->make_response_promise<std::string>();
        auto challenge = make_challenge();
        self->request(handle, st.cfg.request_timeout, hello_atom_v, protocol_version, challenge)
            .then(
                [=](node_info info) mutable {
                  auto& st = self->state;
                  if (auto why = admit(self, handle, name, challenge, info); !why.empty()) {
                    rp.deliver(caf::make_error(errc::unauthorized, why));
                    return;
                  }
                  size_t n = st.nodes.size();
                  for (size_t i = 0; i < st.nodes.size(); ++i) {
                    if (st.nodes[i].name == name) {
                      n = i;
                    }
                  }
                  if (n < st.nodes.size() && !st.node_dead[n]) {
                    rp.deliver(caf::make_error(errc::bad_config,
                                               "a node named " + name + " is already running"));
                    return;
                  }
                  // its neighbours dial it where it says it listens
                  std::string host = info.host == "0.0.0.0" ? "" : info.host;
                  if (n == st.nodes.size()) {
                    st.nodes.push_back({name, handle, host, info.port});
                    st.infos.emplace_back();
                    st.holders.emplace_back();
                    st.node_dead.push_back(false);
                    st.node_refused.push_back(false);
                    st.last_seen.push_back(clock::now());
                    if (!st.profiles.empty()) {
                      // plan it with the profile of its peers' median until measured
                      st.profiles.push_back(st.profiles.front());
                      st.node_scale.push_back(1.0);
                    }
                  } else {
                    st.nodes[n].handle = handle;
                    st.nodes[n].host = host;
                    st.nodes[n].port = info.port;
                    st.node_dead[n] = false;
                    auto& dead = st.status.dead_nodes;
                    dead.erase(std::remove(dead.begin(), dead.end(), name), dead.end());
                  }
                  st.holders[n] = caf::actor_cast<replica_holder_actor>(info.replica_holder);
                  st.infos[n] = std::move(info);
                  st.last_seen[n] = clock::now();
                  self->monitor(handle);
                  log_event(self, "join", {{"node", name}});
                  if (st.waiting_for_capacity) {
                    ++st.recovery_gen;
                    recover(self, st.recovery_gen);
                    rp.deliver("node " + name + " joined; the paused job resumes");
                  } else {
                    st.replan_requested = true;
                    st.replan_balance.clear();
                    st.replan_reason = "join of " + name;
                    if (st.status.phase == "training") {
                      feed(self);
                    }
                    rp.deliver("node " + name + " joined; planned in at the next flush");
                  }
                },
                [=](caf::error& err) mutable {
                  rp.deliver(caf::make_error(errc::unreachable,
                                             "node " + name + " did not answer hello: " +
                                                 self->system().render(err)));
                });
        return rp;
      },
      [=](kill_atom, uint32_t stage) -> caf::result<std::string> {
        if (auto refused = console_refused(self)) {
          return *refused;
        }
        auto& st = self->state;
        if (stage >= st.stages.size() || !st.stages[stage]) {
          return caf::make_error(errc::bad_config, "there is no stage " + std::to_string(stage) +
                                                       " (the plan has " +
                                                       std::to_string(st.stages.size()) + ")");
        }
        self->send_exit(st.stages[stage], caf::exit_reason::kill);
        return "stage " + std::to_string(stage) + " on node " +
               st.nodes[st.stage_nodes[stage]].name + " killed";
      },
      [=](replan_atom, std::string& balance) -> caf::result<std::string> {
        if (auto refused = console_refused(self)) {
          return *refused;
        }
        auto& st = self->state;
        if (st.status.finished()) {
          return caf::make_error(errc::bad_config, "the job has ended");
        }
        try {
          parse_balance(balance);
        } catch (const std::exception& e) {
          return caf::make_error(errc::bad_config, e.what());
        }
        st.replan_requested = true;
        st.replan_balance = balance;
        st.replan_reason = balance.empty() ? "console" : "console, balance " + balance;
        if (st.status.phase == "training") {
          feed(self); // starts it now if nothing is in flight
        }
        return std::string("re-plan scheduled at the next flush") +
               (st.user_paused ? " (the job is paused: it happens after resume)" : "");
      },
      [=](pause_atom) -> caf::result<std::string> {
        if (auto refused = console_refused(self)) {
          return *refused;
        }
        auto& st = self->state;
        if (st.status.finished()) {
          return caf::make_error(errc::bad_config, "the job has ended");
        }
        if (st.user_paused) {
          return std::string("already paused; resume carries on");
        }
        st.user_paused = true;
        st.status.paused_by_user = true;
        if (st.status.phase == "training") {
          st.status.phase = "paused";
        }
        log_event(self, "pause", {{"committed", st.committed}});
        auto in_flight = st.fed - st.committed;
        return "paused at batch " + std::to_string(st.committed) + ": " +
               std::to_string(in_flight) +
               " batch(es) in flight finish, no new ones start; resume carries on";
      },
      [=](resume_atom) -> caf::result<std::string> {
        if (auto refused = console_refused(self)) {
          return *refused;
        }
        auto& st = self->state;
        if (st.status.finished()) {
          return caf::make_error(errc::bad_config, "the job has ended");
        }
        if (!st.user_paused) {
          return std::string(st.waiting_for_capacity
                                 ? "not paused by the console; the job waits for a node to join"
                                 : "not paused");
        }
        st.user_paused = false;
        st.status.paused_by_user = false;
        log_event(self, "resume", {{"committed", st.committed}});
        if (st.status.phase == "paused" && !st.recovering) {
          st.status.phase = "training";
          st.last_progress = clock::now();
          st.recent.clear();
          feed(self);
        }
        return "resumed at batch " + std::to_string(st.committed);
      },
      [=](replicate_atom) -> caf::result<std::string> {
        if (auto refused = console_refused(self)) {
          return *refused;
        }
        auto& st = self->state;
        if (st.status.finished()) {
          return caf::make_error(errc::bad_config, "the job has ended");
        }
        if (st.recovering || st.replanning || st.stages.empty()) {
          return caf::make_error(errc::bad_config, "the job is " + st.status.phase +
                                                       "; replicate once it trains again");
        }
        // every stage reaches version `fed` once the batches in flight are
        // stepped (at a flush it is there already)
        auto version = st.fed;
        if (version == 0) {
          return caf::make_error(errc::bad_config,
                                 "nothing trained yet; the seed needs no replica");
        }
        for (auto& s : st.stages) {
          self->send(s, replicate_atom_v, version);
        }
        st.status.replicated_version = static_cast<int64_t>(version);
        log_event(self, "replicate", {{"version", version}});
        return "replicating version " + std::to_string(version) + " of all " +
               std::to_string(st.stages.size()) + " stages to their chain and global holders";
      },
      [=](checkpoint_atom, std::string& path) -> caf::result<std::string> {
        if (auto refused = console_refused(self)) {
          return *refused;
        }
        auto& st = self->state;
        if (st.status.finished()) {
          return caf::make_error(errc::bad_config,
                                 "the job has ended; use --save for the final weights");
        }
        if (path.empty()) {
          return caf::make_error(errc::bad_config, "checkpoint save needs a PATH");
        }
        auto rp = self->make_response_promise<std::string>();
        st.checkpoints.push_back({path, rp});
        if (st.status.phase == "training" || st.status.phase == "paused") {
          feed(self); // at a flush already: now
        }
        return rp;
      },
      [=](auth_atom) -> std::string {
        // a console asks for a challenge to prove the cluster secret against
        auto c = make_challenge();
        self->state.console_challenges[self->current_sender()] = c;
        return c;
      },
      [=](auth_atom, const std::string& proof) -> caf::result<std::string> {
        auto& st = self->state;
        auto sender = self->current_sender();
        auto it = st.console_challenges.find(sender);
        if (it == st.console_challenges.end()) {
          return caf::make_error(errc::unauthorized, "ask for a challenge first");
        }
        auto challenge = it->second;
        st.console_challenges.erase(it);
        if (!verify(st.cfg.secret, "console", "console", challenge, proof)) {
          spdlog::error("REFUSED a console that did not prove the cluster secret");
          return caf::make_error(errc::unauthorized,
                                 "the cluster secret does not match (--secret-file or "
                                 "SALAMANDER_SECRET)");
        }
        st.consoles.insert(caf::actor_cast<caf::actor_addr>(sender));
        return std::string("authenticated");
      },
      [=](capacity_atom, const std::string& name, double factor) {
        auto& st = self->state;
        for (size_t n = 0; n < st.nodes.size(); ++n) {
          if (st.nodes[n].name != name || st.node_dead[n] || !(factor > 0)) {
            continue;
          }
          st.capacity.resize(st.nodes.size(), 1.0);
          st.capacity[n] = factor;
          log_event(self, "capacity", {{"node", name}, {"factor", factor}});
          bool staged = std::find(st.stage_nodes.begin(), st.stage_nodes.end(), n) !=
                        st.stage_nodes.end();
          // a node with a stage is corrected by its measured stage times;
          // a spare one only by its reports (it may now be worth planning in)
          if (!staged && n < st.node_scale.size()) {
            st.node_scale[n] = 1.0 / factor;
          }
        }
      },
      [=](caf::get_atom) {
        refresh_rows(self);
        return self->state.status;
      },
      [=](snapshot_atom) -> caf::result<snapshot_payload> {
        auto& st = self->state;
        if (st.stages.empty()) {
          return caf::make_error(errc::bad_config, "the job has no stages");
        }
        auto rp = self->make_response_promise<snapshot_payload>();
        collect_weights(self, [=](caf::expected<models::weight_snapshot> all, size_t) mutable {
          if (all) {
            rp.deliver(snapshot_payload{std::move(*all)});
          } else {
            rp.deliver(std::move(all.error()));
          }
        });
        return rp;
      },
      [=](leave_atom) {
        if (self->state.metrics) {
          self->state.metrics->flush();
        }
        stop_stages(self);
        self->send_exit(self->state.central_holder, caf::exit_reason::user_shutdown);
        self->quit();
      },
  };
}

} // namespace salamander::actors
