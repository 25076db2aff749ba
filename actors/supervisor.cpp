#include "actors/supervisor.hpp"

#include "messages/errors.hpp"
#include "algorithms/sampling.hpp"

#include <numeric>
#include <sstream>
#include "models/trainer.hpp"

namespace salamander::actors {

namespace {

using self_ptr = supervisor_actor::stateful_pointer<supervisor_state>;
using clock = std::chrono::steady_clock;

double since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
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
}

uint64_t total_batches(const supervisor_state& st) {
  return static_cast<uint64_t>(st.batches_per_epoch * st.cfg.epochs);
}

void begin_replan(self_ptr self);
void track_capacity(self_ptr self);

void feed(self_ptr self) {
  auto& st = self->state;
  if (st.replanning) {
    return;
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
    for (int64_t i = 0; i < m; ++i) {
      double weight = static_cast<double>(xs[static_cast<size_t>(i)].size(0)) /
                      static_cast<double>(b.x.size(0));
      self->send(st.stages.front(), forward_atom_v, g, static_cast<uint32_t>(i),
                 tensor_payload{xs[static_cast<size_t>(i)].contiguous()});
      self->send(st.stages.back(), labels_atom_v, g, static_cast<uint32_t>(i), weight,
                 tensor_payload{ys[static_cast<size_t>(i)].contiguous()});
    }
  }
}

void start_epoch(self_ptr self) {
  auto& st = self->state;
  st.status.phase = "training";
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
  st.committed++;
  st.last_progress = clock::now();
  st.status.stage_compute_s.resize(st.stages.size());
  st.status.stage_wait_s.resize(st.stages.size());
  st.status.stage_send_s.resize(st.stages.size());
  for (auto& r : st.last_reports) {
    st.status.stage_compute_s[r.stage] += r.compute_s;
    st.status.stage_wait_s[r.stage] += r.wait_s;
    st.status.stage_send_s[r.stage] += r.send_s;
    if (r.stage + 1 == st.stages.size()) {
      st.status.loss = r.loss;
      st.epoch_samples += r.samples;
    }
  }
  st.status.committed = static_cast<int64_t>(st.committed);
  track_capacity(self);
  if (auto it = st.cfg.replan_at.find(st.committed); it != st.cfg.replan_at.end()) {
    st.replan_requested = true;
    st.replan_balance = it->second;
  }
  st.status.batch = static_cast<int64_t>((st.committed - 1) % st.batches_per_epoch) + 1;
  st.status.samples_per_s = static_cast<double>(st.epoch_samples) / since(st.epoch_started);
  st.status.elapsed_s = since(st.started);
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
  for (size_t i = 0; i < st.ranges.size(); ++i) {
    out += (i ? " " : "") + st.nodes[st.stage_nodes[i]].name + "[" +
           std::to_string(st.ranges[i].first) + "," + std::to_string(st.ranges[i].second) + ")";
  }
  return out;
}

// Which stages (by handle) hold layers [b, e) under the current plan.
void add_sources(const supervisor_state& st, stage_spec& spec) {
  for (size_t j = 0; j < st.ranges.size(); ++j) {
    auto lo = std::max<uint64_t>(spec.begin, st.ranges[j].first);
    auto hi = std::min<uint64_t>(spec.end, st.ranges[j].second);
    if (lo < hi) {
      spec.sources.push_back(caf::actor_cast<caf::actor>(st.stages[j]));
      spec.source_begin.push_back(lo);
      spec.source_end.push_back(hi);
    }
  }
}

void resume_after_replan(self_ptr self) {
  auto& st = self->state;
  for (auto& old : st.old_stages) {
    self->demonitor(old.address());
    self->send_exit(old, caf::exit_reason::user_shutdown);
  }
  st.old_stages.clear();
  st.replanning = false;
  st.status.replans++;
  st.status.last_replan_s = since(st.replan_started);
  st.status.phase = "training";
  st.last_progress = clock::now();
  feed(self);
}

// Spawns one stage per range on the given nodes, wires the chain and starts
// (or, when re-planning, resumes) training. A re-planned stage pulls its
// layers from the stages of the old plan, which run until all are ready.
void launch(self_ptr self, algorithms::layer_ranges ranges, std::vector<size_t> on_nodes) {
  auto& st = self->state;
  auto desc = models::describe(models::model_spec::parse(st.cfg.model));
  bool replan = !st.stages.empty();
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
    if (replan) {
      add_sources(st, spec);
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
  auto fresh = std::make_shared<std::vector<stage_actor>>(n);
  auto pending = std::make_shared<size_t>(n);
  for (size_t i = 0; i < n; ++i) {
    auto& node = st.nodes[st.stage_nodes[i]];
    auto node_name = node.name;
    self->request(node.handle, st.cfg.request_timeout, spawn_atom_v, specs[i])
        .then(
            [=](caf::actor handle) {
              auto& st = self->state;
              if (st.status.finished()) {
                self->send_exit(handle, caf::exit_reason::user_shutdown);
                return;
              }
              (*fresh)[i] = caf::actor_cast<stage_actor>(handle);
              self->monitor(handle);
              if (--*pending > 0) {
                return;
              }
              st.stages = *fresh;
              for (size_t k = 0; k < st.stages.size(); ++k) {
                auto prev = k > 0 ? caf::actor_cast<caf::actor>(st.stages[k - 1]) : caf::actor{};
                auto next = k + 1 < st.stages.size() ? caf::actor_cast<caf::actor>(st.stages[k + 1])
                                                     : caf::actor{};
                self->send(st.stages[k], wire_atom_v, prev, next, caf::actor_cast<caf::actor>(self));
              }
              st.status.plan_version++;
              st.status.plan = describe_plan(st);
              if (st.replanning) {
                st.ready_pending = st.stages.size(); // resume when all have pulled state
                return;
              }
              st.started = clock::now();
              st.last_progress = clock::now();
              start_epoch(self);
            },
            [=](caf::error& err) {
              fail(self, "node " + node_name + " could not start stage " + std::to_string(i) +
                             ": " + self->system().render(err));
            });
  }
}

int64_t micro_batch_size(const job_config& cfg) {
  return (cfg.batch_size + cfg.micro_batches - 1) / cfg.micro_batches;
}

// The planner's view of the job: profiles scaled by what the stages measure.
algorithms::plan_request planner_request(const supervisor_state& st) {
  auto desc = models::describe(models::model_spec::parse(st.cfg.model));
  algorithms::plan_request req;
  req.mode = algorithms::plan_mode::training;
  req.schedule = st.cfg.schedule == "gpipe" ? algorithms::plan_schedule::gpipe
                                            : algorithms::plan_schedule::one_f_one_b;
  req.micro_batch_size = micro_batch_size(st.cfg);
  req.micro_batches = static_cast<int>(st.cfg.micro_batches);
  req.optimizer_state_factor = st.cfg.optimizer == "adam" ? 2.0 : 1.0;
  for (auto& l : desc.layers) {
    req.layers.push_back({l.name, static_cast<double>(l.param_bytes),
                          static_cast<double>(l.activation_bytes),
                          static_cast<double>(l.output_bytes)});
  }
  for (size_t n = 0; n < st.profiles.size(); ++n) {
    auto& p = st.profiles[n];
    algorithms::device_profile d;
    d.name = st.nodes[n].name;
    double scale = st.node_scale.empty() ? 1.0 : st.node_scale[n];
    for (size_t l = 0; l < p.forward_s.size(); ++l) {
      d.forward_s.push_back(p.forward_s[l] * scale);
      d.backward_s.push_back(p.backward_s[l] * scale);
    }
    d.memory_bytes = p.memory_bytes;
    d.link_bytes_per_s =
        p.link_bytes_per_s > 0 ? p.link_bytes_per_s : st.cfg.default_link_bytes_per_s;
    d.link_latency_s = 1e-4;
    req.devices.push_back(std::move(d));
  }
  return req;
}

void launch(self_ptr self, algorithms::layer_ranges ranges, std::vector<size_t> on_nodes);

void launch_planned(self_ptr self) {
  auto& st = self->state;
  try {
    auto req = planner_request(st);
    auto plan = algorithms::plan_partition(req);
    algorithms::layer_ranges ranges;
    std::vector<size_t> on_nodes;
    for (auto& s : plan.stages) {
      ranges.emplace_back(s.begin, s.end);
      on_nodes.push_back(s.device);
    }
    st.predicted_bottleneck_s = plan.bottleneck_s;
    launch(self, std::move(ranges), std::move(on_nodes));
  } catch (const std::exception& e) {
    fail(self, std::string("cannot plan the job: ") + e.what());
  }
}

void profile_all(self_ptr self) {
  auto& st = self->state;
  st.status.phase = "profiling";
  st.profiles.assign(st.nodes.size(), device_report{});
  st.node_scale.assign(st.nodes.size(), 1.0);
  auto pending = std::make_shared<size_t>(st.nodes.size());
  auto mbs = static_cast<uint32_t>(micro_batch_size(st.cfg));
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    auto node_name = st.nodes[i].name;
    self->request(st.nodes[i].handle, st.cfg.profile_timeout, profile_atom_v, st.cfg.model, mbs)
        .then(
            [=](device_report& r) {
              self->state.profiles[i] = std::move(r);
              if (--*pending == 0 && !self->state.status.finished()) {
                launch_planned(self);
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
    for (size_t l = st.ranges[r.stage].first; l < st.ranges[r.stage].second; ++l) {
      predicted += (st.profiles[n].forward_s[l] + st.profiles[n].backward_s[l]) * M;
    }
    if (predicted > 0 && r.compute_s > 0) {
      st.node_scale[n] = 0.7 * st.node_scale[n] + 0.3 * (r.compute_s / predicted);
    }
  }
  if (st.cfg.replan_gain <= 0 ||
      st.committed < st.last_replan_batch + static_cast<uint64_t>(st.cfg.replan_min_batches) ||
      st.committed % 5 != 0) {
    return;
  }
  try {
    auto req = planner_request(st);
    std::vector<algorithms::stage_assignment> now;
    for (size_t i = 0; i < st.ranges.size(); ++i) {
      now.push_back({st.stage_nodes[i], st.ranges[i].first, st.ranges[i].second, 0, 0, 0});
    }
    auto current = algorithms::evaluate_plan(req, now);
    auto better = algorithms::plan_partition(req);
    if (better.objective_s < current.objective_s * (1.0 - st.cfg.replan_gain)) {
      st.pending_ranges.clear();
      st.pending_nodes.clear();
      for (auto& s : better.stages) {
        st.pending_ranges.emplace_back(s.begin, s.end);
        st.pending_nodes.push_back(s.device);
      }
      st.has_pending_plan = true;
      st.predicted_bottleneck_s = better.bottleneck_s;
      st.replan_requested = true;
      st.replan_balance.clear();
    }
  } catch (const std::exception&) {
    // no better plan fits; keep the current one
  }
}

// The plan to use now: the forced balance, the user's balance, or an even
// split, stage i on node i.
bool choose_plan(self_ptr self, const std::vector<size_t>& balance,
                 algorithms::layer_ranges& ranges, std::vector<size_t>& on_nodes) {
  auto& st = self->state;
  auto layers = models::describe(models::model_spec::parse(st.cfg.model)).layers.size();
  try {
    ranges = balance.empty() ? algorithms::even_split(layers, static_cast<int>(st.nodes.size()))
                             : algorithms::ranges_from_balance(balance, layers);
  } catch (const std::exception& e) {
    fail(self, e.what());
    return false;
  }
  if (ranges.size() > st.nodes.size()) {
    fail(self, "the balance names " + std::to_string(ranges.size()) + " stages but only " +
                   std::to_string(st.nodes.size()) + " nodes are given");
    return false;
  }
  on_nodes.resize(ranges.size());
  std::iota(on_nodes.begin(), on_nodes.end(), size_t{0});
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
  if (!choose_plan(self, st.cfg.balance, ranges, on_nodes)) {
    return;
  }
  if (st.cfg.balance.size() > 0 && ranges.size() != st.nodes.size()) {
    fail(self, "the balance names " + std::to_string(ranges.size()) + " stages but " +
                   std::to_string(st.nodes.size()) + " nodes are given");
    return;
  }
  launch(self, std::move(ranges), std::move(on_nodes));
}

// Called at a flush (nothing in flight) when a re-plan was asked for.
void begin_replan(self_ptr self) {
  auto& st = self->state;
  st.replan_requested = false;
  algorithms::layer_ranges ranges;
  std::vector<size_t> on_nodes;
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
    st.has_pending_plan = false;
  } else if (balance.empty() && !st.profiles.empty()) {
    try {
      auto plan = algorithms::plan_partition(planner_request(st));
      for (auto& s : plan.stages) {
        ranges.emplace_back(s.begin, s.end);
        on_nodes.push_back(s.device);
      }
    } catch (const std::exception& e) {
      fail(self, std::string("cannot re-plan: ") + e.what());
      return;
    }
  } else if (!choose_plan(self, balance, ranges, on_nodes)) {
    return;
  }
  st.last_replan_batch = st.committed;
  if (ranges == st.ranges && on_nodes == st.stage_nodes) {
    feed(self); // nothing would change
    return;
  }
  st.replanning = true;
  st.replan_started = clock::now();
  st.status.phase = "replanning";
  launch(self, std::move(ranges), std::move(on_nodes));
}

void hello_all(self_ptr self) {
  auto& st = self->state;
  auto pending = std::make_shared<size_t>(st.nodes.size());
  st.infos.assign(st.nodes.size(), node_info{});
  for (auto& n : st.nodes) {
    self->monitor(n.handle); // a node lost during start-up fails it at once
  }
  for (size_t i = 0; i < st.nodes.size(); ++i) {
    auto node_name = st.nodes[i].name;
    self->request(st.nodes[i].handle, st.cfg.request_timeout, hello_atom_v, protocol_version)
        .then(
            [=](node_info info) {
              if (info.protocol != protocol_version) {
                fail(self, "node " + node_name + " speaks protocol " +
                               std::to_string(info.protocol) + ", this supervisor " +
                               std::to_string(protocol_version) +
                               " (run the same salamander version everywhere)");
                return;
              }
              self->state.infos[i] = std::move(info);
              if (--*pending == 0 && !self->state.status.finished()) {
                spawn_stages(self);
              }
            },
            [=](caf::error& err) {
              fail(self, "node " + node_name + " did not answer hello: " +
                             self->system().render(err));
            });
  }
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
  if (st.nodes.empty()) {
    fail(self, "no nodes to run the job on");
  } else {
    hello_all(self);
  }
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& st = self->state;
    for (size_t i = 0; i < st.stages.size(); ++i) {
      if (st.stages[i] && st.stages[i].address() == dm.source) {
        fail(self, "stage " + std::to_string(i) + " on node " + st.nodes[i].name +
                       " went down: " + self->system().render(dm.reason));
        return;
      }
    }
    for (auto& n : st.nodes) {
      if (n.handle.address() == dm.source) {
        fail(self, "node " + n.name + " went away" +
                       (st.status.phase == "starting" ? " during start-up: " : ": ") +
                       self->system().render(dm.reason));
        return;
      }
    }
  });
  self->delayed_send(self, std::chrono::seconds(1), tick_atom_v);
  return {
      [=](done_atom, batch_stats& s) {
        auto& st = self->state;
        if (st.status.finished()) {
          return;
        }
        auto& r = st.reports[s.batch];
        r.push_back(s);
        if (r.size() == st.stages.size() && s.batch == st.committed) {
          commit(self, s.batch);
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
        self->delayed_send(self, std::chrono::seconds(1), tick_atom_v);
      },
      [=](ready_atom, uint32_t) {
        auto& st = self->state;
        if (st.replanning && st.ready_pending > 0 && --st.ready_pending == 0) {
          resume_after_replan(self);
        }
      },
      [=](replan_atom, std::string& balance) -> caf::result<std::string> {
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
        if (st.status.phase == "training") {
          feed(self); // starts it now if nothing is in flight
        }
        return std::string("re-plan scheduled at the next flush");
      },
      [=](caf::get_atom) { return self->state.status; },
      [=](snapshot_atom) -> caf::result<snapshot_payload> {
        auto& st = self->state;
        if (st.stages.empty()) {
          return caf::make_error(errc::bad_config, "the job has no stages");
        }
        auto rp = self->make_response_promise<snapshot_payload>();
        auto merged = std::make_shared<snapshot_payload>();
        auto parts = std::make_shared<std::vector<models::weight_snapshot>>(st.stages.size());
        auto pending = std::make_shared<size_t>(st.stages.size());
        for (size_t i = 0; i < st.stages.size(); ++i) {
          self->request(st.stages[i], st.cfg.request_timeout, snapshot_atom_v)
              .then(
                  [=](snapshot_payload& part) mutable {
                    (*parts)[i] = std::move(part.snapshot);
                    if (--*pending > 0) {
                      return;
                    }
                    auto& all = merged->snapshot;
                    all = (*parts)[0];
                    all.layers.clear();
                    for (auto& p : *parts) {
                      all.version = std::min(all.version, p.version);
                      for (auto& l : p.layers) {
                        all.layers.push_back(std::move(l));
                      }
                    }
                    rp.deliver(std::move(*merged));
                  },
                  [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
        }
        return rp;
      },
      [=](leave_atom) {
        stop_stages(self);
        self->quit();
      },
  };
}

} // namespace salamander::actors
