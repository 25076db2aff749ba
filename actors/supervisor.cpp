#include "actors/supervisor.hpp"

#include "messages/errors.hpp"
#include "algorithms/sampling.hpp"
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

void feed(self_ptr self) {
  auto& st = self->state;
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

void spawn_stages(self_ptr self) {
  auto& st = self->state;
  auto desc = models::describe(models::model_spec::parse(st.cfg.model));
  st.fingerprint = desc.fingerprint;
  try {
    st.ranges = st.cfg.balance.empty()
                    ? algorithms::even_split(desc.layers.size(), static_cast<int>(st.nodes.size()))
                    : algorithms::ranges_from_balance(st.cfg.balance, desc.layers.size());
  } catch (const std::exception& e) {
    fail(self, e.what());
    return;
  }
  if (st.ranges.size() != st.nodes.size()) {
    fail(self, "the balance names " + std::to_string(st.ranges.size()) + " stages but " +
                   std::to_string(st.nodes.size()) + " nodes are given");
    return;
  }
  auto n = st.nodes.size();
  st.stages.assign(n, stage_actor{});
  auto pending = std::make_shared<size_t>(n);
  for (size_t i = 0; i < n; ++i) {
    stage_spec spec;
    spec.model = desc.spec.canonical();
    spec.fingerprint = desc.fingerprint;
    spec.seed = st.cfg.seed;
    spec.index = static_cast<uint32_t>(i);
    spec.stages = static_cast<uint32_t>(n);
    spec.begin = st.ranges[i].first;
    spec.end = st.ranges[i].second;
    spec.micro_batches = static_cast<uint32_t>(st.cfg.micro_batches);
    spec.schedule = st.cfg.schedule;
    spec.optimizer = st.cfg.optimizer;
    spec.lr = st.cfg.lr;
    spec.momentum = st.cfg.momentum;
    spec.threads = st.cfg.threads;
    auto node_name = st.nodes[i].name;
    self->request(st.nodes[i].handle, st.cfg.request_timeout, spawn_atom_v, spec)
        .then(
            [=](caf::actor handle) {
              auto& st = self->state;
              if (st.status.finished()) {
                self->send_exit(handle, caf::exit_reason::user_shutdown);
                return;
              }
              st.stages[i] = caf::actor_cast<stage_actor>(handle);
              self->monitor(handle);
              if (--*pending > 0) {
                return;
              }
              for (size_t k = 0; k < st.stages.size(); ++k) {
                auto prev = k > 0 ? caf::actor_cast<caf::actor>(st.stages[k - 1]) : caf::actor{};
                auto next = k + 1 < st.stages.size() ? caf::actor_cast<caf::actor>(st.stages[k + 1])
                                                     : caf::actor{};
                self->send(st.stages[k], wire_atom_v, prev, next, caf::actor_cast<caf::actor>(self));
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
