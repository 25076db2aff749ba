#include "actors/split/split_client.hpp"
#include "actors/elapsed.hpp"
#include "actors/clients/client_work.hpp"
#include "actors/logging.hpp"

#include "algorithms/sampling.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>

#include <cmath>

namespace salamander::actors {

// ---- tagged snapshots

void add_tagged(models::weight_snapshot& into, const std::string& tag,
                const models::weight_snapshot& part) {
  for (auto lw : part.layers) {
    lw.name = tag + "/" + std::to_string(lw.index) + "/" + lw.name;
    lw.index = tagged_base + static_cast<uint32_t>(into.layers.size());
    into.layers.push_back(std::move(lw));
  }
}

models::weight_snapshot take_tagged(const models::weight_snapshot& from,
                                    const std::string& tag) {
  models::weight_snapshot out;
  out.fingerprint = from.fingerprint;
  out.model = from.model;
  out.version = from.version;
  out.optimizer = from.optimizer;
  auto prefix = tag + "/";
  for (auto& lw : from.layers) {
    if (lw.index < tagged_base || lw.name.compare(0, prefix.size(), prefix) != 0) {
      continue;
    }
    auto rest = lw.name.substr(prefix.size());
    auto slash = rest.find('/');
    if (slash == std::string::npos) {
      throw std::invalid_argument("snapshot entry '" + lw.name + "' is malformed");
    }
    auto copy = lw;
    copy.index = static_cast<uint32_t>(std::stoul(rest.substr(0, slash)));
    copy.name = rest.substr(slash + 1);
    out.layers.push_back(std::move(copy));
  }
  return out;
}

models::weight_snapshot untagged(const models::weight_snapshot& from) {
  auto out = from;
  out.layers.clear();
  for (auto& lw : from.layers) {
    if (lw.index < tagged_base) {
      out.layers.push_back(lw);
    }
  }
  return out;
}

split::cut_costs costs_of(const models::model_desc& desc, size_t cut) {
  std::vector<double> flops;
  std::vector<int64_t> out_bytes, param_bytes;
  for (auto& l : desc.layers) {
    flops.push_back(l.flops);
    out_bytes.push_back(l.output_bytes);
    param_bytes.push_back(l.param_bytes);
  }
  return split::costs_at_cut(flops, out_bytes, param_bytes, cut);
}

void check_cut(const models::model_desc& desc, int64_t cut) {
  auto n = static_cast<int64_t>(desc.layers.size());
  if (cut >= 1 && cut < n) {
    return;
  }
  std::string cuts;
  for (int64_t k = 1; k < n; ++k) {
    cuts += fmt::format(
        "\n  --cut {}: client {}..{}, server {}..{} ({} per sample across)", k,
        desc.layers[0].name, desc.layers[k - 1].name, desc.layers[k].name,
        desc.layers[n - 1].name,
        models::format_bytes(static_cast<double>(desc.layers[k - 1].output_bytes)));
  }
  throw std::invalid_argument(fmt::format(
      "--cut {} does not split {} ({} layers); a cut leaves at least one layer on each "
      "side:{}",
      cut, desc.spec.canonical(), n, cuts.empty() ? " (it has too few layers)" : cuts));
}

namespace {

// Without a sparsity target, a mask keeps a server parameter for a client
// while its score is above this.
constexpr double mask_threshold = 0.5;

using clock = std::chrono::steady_clock;
using client_ptr = split_client_actor::stateful_pointer<split_client_state>;
using server_ptr = split_server_actor::stateful_pointer<split_server_state>;

// How long a client waits for the server's answer to one batch.
constexpr auto server_timeout = std::chrono::seconds(60);
// How often a client tells the job how far it is.
constexpr auto progress_period = std::chrono::milliseconds(500);

auto log() {
  return subsystem_log("split");
}

int64_t samples(const split_client_state& st) {
  return st.shard.defined() ? st.shard.size(0) : 0;
}

// The client-side weights, with the auxiliary head (adasplit).
models::weight_snapshot client_snapshot(const split_client_state& st, uint64_t version) {
  auto snap = models::capture(*st.model, nullptr, "", version);
  if (st.aux) {
    models::weight_snapshot head;
    models::layer_weights lw;
    lw.index = 0;
    lw.name = "aux";
    for (auto& p : st.aux->named_parameters()) {
      lw.params.push_back({p.key(), p.value().detach().clone()});
    }
    head.layers.push_back(std::move(lw));
    add_tagged(snap, "aux", head);
  }
  return snap;
}

void new_optimizer(split_client_state& st) {
  auto params = st.net->parameters();
  if (st.aux) {
    for (auto& p : st.aux->parameters()) {
      params.push_back(p);
    }
  }
  models::optimizer_config ocfg{st.spec.optimizer, st.spec.lr, st.spec.momentum, 0.0};
  st.opt = models::make_optimizer(ocfg, std::move(params));
}

void load_weights(split_client_state& st, const models::weight_snapshot& snap) {
  models::restore(*st.model, nullptr, untagged(snap));
  if (st.aux) {
    auto head = take_tagged(snap, "aux");
    if (head.layers.empty()) {
      throw std::invalid_argument("the task's weights have no auxiliary head");
    }
    torch::NoGradGuard no_grad;
    auto params = st.aux->named_parameters();
    for (auto& nt : head.layers[0].params) {
      auto* p = params.find(nt.name);
      if (!p || !p->sizes().equals(nt.tensor.sizes())) {
        throw std::invalid_argument("auxiliary head parameter " + nt.name +
                                    " does not fit");
      }
      p->copy_(nt.tensor);
    }
  }
  new_optimizer(st);
}

void schedule_tick(client_ptr self, std::chrono::microseconds pause) {
  // through the clock, never a plain send to itself (see fed_client.cpp)
  self->delayed_send(self, std::max(pause, std::chrono::microseconds(1)), tick_atom_v,
                     self->state.work->id);
}

void fail_work(client_ptr self, const std::string& what) {
  auto& st = self->state;
  log()->debug("client {} on {}: {}", st.spec.client, st.node, what);
  if (st.work) {
    split_result r;
    r.round = st.work->task.round;
    r.client = st.spec.client;
    r.error = "client " + std::to_string(st.spec.client) + " on " + st.node + ": " + what;
    self->send(st.work->reply, update_atom_v, std::move(r));
  }
  st.work.reset();
}

void finish_round(client_ptr self) {
  auto& st = self->state;
  auto& w = *st.work;
  auto& r = w.result;
  r.round = w.task.round;
  r.client = st.spec.client;
  r.samples = samples(st);
  r.batches = w.batches;
  r.loss = w.batches ? w.loss_sum / static_cast<double>(w.batches) : 0.0;
  r.server_loss = r.sent ? w.server_loss_sum / static_cast<double>(r.sent) : 0.0;
  r.weights.snapshot = client_snapshot(st, w.task.round);
  send_with_weights(self, w.reply, update_atom_v, std::move(r), &split_result::weights,
                    st.transfers);
  st.work.reset();
}

// A batch's client-side work is done: account for it, and pace the next.
void batch_done(client_ptr self, double loss) {
  auto& st = self->state;
  auto& w = *st.work;
  w.loss_sum += loss;
  ++w.batch;
  auto [device, pause] = device_time(st.emulation, w.batch_wall, w.batch_cpu, st.spec.speed);
  w.result.device_s += device;
  w.batch_cpu = 0;
  w.batch_wall = 0;
  if (clock::now() - w.last_progress >= progress_period) {
    w.last_progress = clock::now();
    self->send(w.reply, progress_atom_v, st.spec.client, w.task.round, w.batch);
  }
  schedule_tick(self, pause);
}

int64_t bytes_of(const torch::Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0;
}

// Sends a batch's activations and labels `y` (`rows` examples) across the
// cut and waits; `then(reply)` continues the batch once the server answers,
// unless the work was replaced meanwhile. No answer fails the work.
template <class Then>
void send_to_server(client_ptr self, const torch::Tensor& act, const torch::Tensor& y,
                    int64_t rows, bool gradient, Then then) {
  auto& st = self->state;
  auto& w = *st.work;
  split_smash smash;
  smash.client = st.spec.client;
  smash.round = w.task.round;
  smash.want_gradient = gradient;
  smash.activations.tensor = act.detach();
  smash.labels.tensor = y;
  w.result.bytes_up += bytes_of(smash.activations.tensor) + bytes_of(y);
  w.result.sent++;
  w.result.sent_samples += rows;
  w.waiting = true;
  auto id = w.id;
  self->request(w.server, server_timeout, forward_atom_v, std::move(smash))
      .then(
          [=](split_reply& r) mutable {
            auto& st = self->state;
            if (!st.work || st.work->id != id) {
              return; // replaced or stopped meanwhile
            }
            st.work->waiting = false;
            st.work->server_loss_sum += r.loss;
            then(r);
          },
          [=](caf::error& err) {
            auto& st = self->state;
            if (st.work && st.work->id == id) {
              fail_work(self, "the server did not answer: " + self->system().render(err));
            }
          });
}

// One batch of the round: see the header for what each method does.
void run_batch(client_ptr self) {
  auto& st = self->state;
  auto& w = *st.work;
  if (w.batch >= w.batches) {
    finish_round(self);
    return;
  }
  auto n = static_cast<int64_t>(w.order.size());
  auto b0 = w.batch * st.spec.batch_size;
  auto b1 = std::min(n, b0 + st.spec.batch_size);
  auto pos = torch::tensor(
      std::vector<int64_t>(w.order.begin() + b0, w.order.begin() + b1), torch::kInt64);
  auto idx = st.shard.index_select(0, pos);
  auto x = st.data->images.index_select(0, idx);
  auto y = st.data->labels.index_select(0, idx);
  auto rows = static_cast<double>(b1 - b0);
  auto t0 = clock::now();
  double c0 = thread_cpu();
  st.opt->zero_grad();
  auto act = st.net->forward(x);
  if (w.task.local_loss) {
    auto logits = st.aux->forward(act.flatten(1));
    auto loss = torch::nn::functional::cross_entropy(logits, y);
    loss.backward();
    st.opt->step();
    w.result.client_flops += 3 * (st.costs.client_forward_flops + st.aux_flops) * rows;
    w.batch_cpu += thread_cpu() - c0;
    w.batch_wall += since(t0);
    auto local = loss.item<double>();
    bool send = static_cast<size_t>(w.batch) < w.task.send.size() && w.task.send[w.batch];
    if (!send) {
      batch_done(self, local);
      return;
    }
    send_to_server(self, act, y, b1 - b0, false,
                   [=](split_reply&) { batch_done(self, local); });
    return;
  }
  w.act = act;
  w.batch_cpu += thread_cpu() - c0;
  w.batch_wall += since(t0);
  send_to_server(self, act, y, b1 - b0, true, [=](split_reply& r) {
    auto& st = self->state;
    auto& w = *st.work;
    w.result.bytes_down += bytes_of(r.gradient.tensor);
    try {
      use_intra_op_threads(st.spec.threads);
      auto t1 = clock::now();
      double c1 = thread_cpu();
      if (!r.gradient.tensor.defined() ||
          !r.gradient.tensor.sizes().equals(w.act.sizes())) {
        throw std::runtime_error("the server's gradient does not fit the activations");
      }
      w.act.backward(r.gradient.tensor);
      st.opt->step();
      w.act = torch::Tensor();
      w.result.client_flops += 3 * st.costs.client_forward_flops * rows;
      w.batch_cpu += thread_cpu() - c1;
      w.batch_wall += since(t1);
      batch_done(self, r.loss);
    } catch (const std::exception& e) {
      fail_work(self, e.what());
    }
  });
}

void init_client(client_ptr self, const std::string& data_dir) {
  auto& st = self->state;
  auto& spec = st.spec;
  st.method = split::parse_method(spec.method);
  st.desc = models::describe(models::model_spec::parse(spec.model));
  check_cut(st.desc, spec.cut);
  st.costs = costs_of(st.desc, spec.cut);
  auto shard = load_shard(spec.dataset, st.desc, spec.data_dir, data_dir, spec.client,
                          spec.clients, spec.alpha, spec.classes_apart, spec.seed,
                          spec.max_samples);
  st.data = std::move(shard.data);
  st.shard = std::move(shard.shard);
  st.data_note = std::move(shard.note);
  st.model = std::make_unique<models::layered_model>(st.desc, spec.seed, 0, spec.cut);
  st.net = st.model->all();
  if (st.method == split::method::adasplit) {
    auto in = st.costs.activation_bytes / 4;
    st.aux = torch::nn::Linear(in, st.desc.classes);
    torch::NoGradGuard no_grad;
    // zero: deterministic, and a linear head trains from there
    for (auto& p : st.aux->parameters()) {
      p.zero_();
    }
    st.aux_flops = split::aux_head_flops(st.costs.activation_bytes, st.desc.classes);
  }
  new_optimizer(st);
}

} // namespace

split_client_actor::behavior_type
split_client(split_client_actor::stateful_pointer<split_client_state> self,
             split_client_spec spec, node_emulation emulation, std::string node,
             std::string data_dir) {
  auto& st = self->state;
  st.spec = std::move(spec);
  st.emulation = std::move(emulation);
  st.node = std::move(node);
  try {
    init_client(self, data_dir);
    if (samples(st) == 0) {
      st.error = "no examples (" + st.data_note + ")";
    }
  } catch (const std::exception& e) {
    st.error = e.what();
  }
  if (st.error.empty()) {
    log()->debug("client {} on {}: {}", st.spec.client, st.node, st.data_note);
  }
  return {
      [=](caf::get_atom) -> caf::result<int64_t, std::vector<int64_t>> {
        auto& st = self->state;
        if (!st.error.empty()) {
          return caf::make_error(errc::bad_config,
                                 "client on " + st.node + ": " + st.error);
        }
        auto labels = st.data ? label_counts(*st.data, st.shard) : std::vector<int64_t>{};
        return {samples(st), std::move(labels)};
      },
      [=](round_atom, split_task& task) {
        auto& st = self->state;
        auto reply = caf::actor_cast<split_job_actor>(self->current_sender());
        st.work.emplace();
        auto& w = *st.work;
        w.id = st.next_work++;
        w.reply = reply;
        w.started = clock::now();
        w.last_progress = w.started;
        w.task.round = task.round; // what a failure below answers about
        if (!st.error.empty()) {
          fail_work(self, st.error);
          return;
        }
        try {
          if (!take_weights(st.inbox, self->current_sender(), task, &split_task::weights)) {
            throw std::runtime_error("the task's weights did not arrive whole");
          }
          if (!task.weights.snapshot.layers.empty()) {
            load_weights(st, task.weights.snapshot);
          }
          task.weights.snapshot = {};
          w.task = std::move(task);
          w.server = caf::actor_cast<split_server_actor>(w.task.server);
          w.order = algorithms::epoch_permutation(
              algorithms::mix_seed(st.spec.seed, st.spec.client, w.task.round), 0,
              samples(st));
          w.batches =
              algorithms::batches_per_epoch(samples(st), st.spec.batch_size, false);
          w.result.samples = samples(st);
        } catch (const std::exception& e) {
          fail_work(self, e.what());
          return;
        }
        schedule_tick(self, std::chrono::microseconds(0));
      },
      [=](stop_atom) { self->state.work.reset(); },
      part_handler(self, self->state.inbox, "split"),
      [=](tick_atom, uint64_t id) {
        auto& st = self->state;
        if (!st.work || st.work->id != id || st.work->waiting) {
          return; // replaced, stopped, or waiting for the server
        }
        use_intra_op_threads(st.spec.threads);
        try {
          run_batch(self);
        } catch (const std::exception& e) {
          fail_work(self, e.what());
        }
      },
  };
}

// ---- the server

namespace {

// Client c's batch through W where its mask keeps it (m_c > 1/2, the
// Piggyback rule: a real-valued score per parameter, thresholded, trained
// straight through). The loss's gradient and an L1 pull towards 0 train
// the scores; W is updated only where the mask keeps it.
double masked_step(server_ptr self, uint32_t client, const torch::Tensor& x,
                   const torch::Tensor& y, int64_t& correct) {
  auto& st = self->state;
  auto& m = st.masks.at(client);
  auto params = st.net->parameters();
  std::vector<torch::Tensor> saved, kept;
  {
    torch::NoGradGuard no_grad;
    for (size_t k = 0; k < params.size(); ++k) {
      saved.push_back(params[k].detach().clone());
      kept.push_back(mask_kept(m[k], st.cfg.mask_keep));
      params[k].mul_(kept[k]);
    }
  }
  st.opt->zero_grad();
  auto out = st.net->forward(x);
  auto loss = torch::nn::functional::cross_entropy(out, y);
  loss.backward();
  correct = out.argmax(1).eq(y).sum().item<int64_t>();
  {
    torch::NoGradGuard no_grad;
    auto lr = st.cfg.mask_lr;
    for (size_t k = 0; k < params.size(); ++k) {
      params[k].copy_(saved[k]);
      auto g = params[k].grad();
      if (!g.defined()) {
        continue;
      }
      // straight through: d loss / d m = g * W (g: at the effective weight);
      // under a sparsity target only the scores' order counts: no pull, no clamp
      if (st.cfg.mask_keep < 1.0) {
        m[k] -= lr * (g * saved[k]);
      } else {
        m[k] = (m[k] - lr * (g * saved[k]) - lr * st.cfg.mask_l1).clamp_(0, 1);
      }
      g.mul_(kept[k]); // d loss / d W, where the mask keeps W
    }
  }
  st.opt->step();
  {
    torch::NoGradGuard no_grad;
    for (size_t k = 0; k < params.size(); ++k) {
      params[k].copy_(torch::where(kept[k], params[k], saved[k]));
    }
  }
  return loss.item<double>();
}

split_reply server_step(server_ptr self, split_smash& s) {
  auto& st = self->state;
  use_intra_op_threads(st.cfg.threads);
  auto& act = s.activations.tensor;
  auto& y = s.labels.tensor;
  auto& first = st.desc.layers[st.cfg.cut].input;
  if (!act.defined() || act.dim() != static_cast<int64_t>(first.size()) + 1 ||
      act.scalar_type() != torch::kFloat32 || !y.defined() || y.dim() != 1 ||
      y.size(0) != act.size(0) || y.scalar_type() != torch::kInt64) {
    throw std::invalid_argument("activations or labels of the wrong shape or type");
  }
  for (size_t d = 0; d < first.size(); ++d) {
    if (act.size(static_cast<int64_t>(d) + 1) != first[d]) {
      throw std::invalid_argument(
          "activations of shape " +
          models::to_string(models::shape(act.sizes().begin() + 1, act.sizes().end())) +
          ", the server's layers take " + models::to_string(first));
    }
  }
  if (y.numel() > 0 &&
      (y.min().item<int64_t>() < 0 || y.max().item<int64_t>() >= st.desc.classes)) {
    throw std::invalid_argument("labels outside [0, " + std::to_string(st.desc.classes) +
                                ")");
  }
  split_reply r;
  ++st.steps;
  if (st.method == split::method::adasplit) {
    if (s.client >= st.masks.size()) {
      throw std::invalid_argument("client " + std::to_string(s.client) +
                                  " is not one of " + std::to_string(st.masks.size()));
    }
    r.loss = masked_step(self, s.client, act, y, r.correct);
    r.gradient.tensor = torch::zeros({0});
    return r;
  }
  auto x = act.detach().requires_grad_(s.want_gradient);
  st.opt->zero_grad();
  auto out = st.net->forward(x);
  auto loss = torch::nn::functional::cross_entropy(out, y);
  loss.backward();
  st.opt->step();
  r.loss = loss.item<double>();
  r.correct = out.argmax(1).eq(y).sum().item<int64_t>();
  r.gradient.tensor = s.want_gradient ? x.grad().detach() : torch::zeros({0});
  return r;
}

models::weight_snapshot server_snapshot(const split_server_state& st) {
  auto snap = models::capture(*st.model, nullptr, "", st.steps);
  auto layers = snap;
  for (size_t c = 0; c < st.masks.size(); ++c) {
    auto part = layers;
    size_t k = 0;
    for (auto& lw : part.layers) {
      lw.buffers.clear();
      for (auto& p : lw.params) {
        p.tensor = st.masks[c][k++].clone();
      }
    }
    add_tagged(snap, "mask" + std::to_string(c), part);
  }
  return snap;
}

} // namespace

split_server_actor::behavior_type
split_server(split_server_actor::stateful_pointer<split_server_state> self,
             split_server_config cfg, models::weight_snapshot start) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  // what cannot start (a checkpoint that does not fit) is every answer's error
  std::string error;
  try {
    st.method = split::parse_method(st.cfg.method);
    st.desc = models::describe(models::model_spec::parse(st.cfg.model));
    check_cut(st.desc, st.cfg.cut);
    st.model = std::make_unique<models::layered_model>(st.desc, st.cfg.seed, st.cfg.cut);
    if (!start.layers.empty()) {
      models::restore(*st.model, nullptr, untagged(start));
      st.steps = start.version;
    }
    st.net = st.model->all();
    models::optimizer_config ocfg{st.cfg.optimizer, st.cfg.lr, st.cfg.momentum, 0.0};
    st.opt = models::make_optimizer(ocfg, st.net->parameters());
    if (st.method == split::method::adasplit) {
      auto params = st.net->parameters();
      for (uint32_t c = 0; c < st.cfg.clients; ++c) {
        std::vector<torch::Tensor> m;
        auto saved = take_tagged(start, "mask" + std::to_string(c));
        std::vector<torch::Tensor> from;
        for (auto& lw : saved.layers) {
          for (auto& p : lw.params) {
            from.push_back(p.tensor);
          }
        }
        for (size_t k = 0; k < params.size(); ++k) {
          bool fits =
              from.size() == params.size() && from[k].sizes().equals(params[k].sizes());
          m.push_back(fits ? from[k].clone().to(torch::kFloat32)
                           : torch::ones_like(params[k]));
        }
        st.masks.push_back(std::move(m));
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  return {
      [=](forward_atom, split_smash& s) -> caf::result<split_reply> {
        if (!error.empty()) {
          return caf::make_error(errc::bad_config, "split server: " + error);
        }
        try {
          return server_step(self, s);
        } catch (const std::exception& e) {
          return caf::make_error(errc::stage_failed,
                                 std::string("split server: ") + e.what());
        }
      },
      [=](snapshot_atom) -> caf::result<snapshot_payload> {
        if (!error.empty()) {
          return caf::make_error(errc::bad_config, "split server: " + error);
        }
        return snapshot_payload{server_snapshot(self->state)};
      },
  };
}

torch::Tensor mask_kept(const torch::Tensor& scores, double keep) {
  if (keep >= 1.0) {
    return scores > mask_threshold;
  }
  auto flat = scores.reshape({-1});
  auto n = flat.numel();
  auto k = std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(keep * static_cast<double>(n) - 1e-9)), 1, n);
  // the k-th highest score: the (n - k + 1)-th lowest
  auto cut = std::get<0>(torch::kthvalue(flat, n - k + 1));
  return scores >= cut;
}

models::weight_snapshot server_view(const models::weight_snapshot& server,
                                    uint32_t client, double keep) {
  auto out = untagged(server);
  auto mask = take_tagged(server, "mask" + std::to_string(client));
  if (mask.layers.empty()) {
    return out;
  }
  for (auto& lw : out.layers) {
    for (auto& m : mask.layers) {
      if (m.index != lw.index) {
        continue; // a checkpoint's client-side layers have no mask
      }
      for (size_t p = 0; p < lw.params.size() && p < m.params.size(); ++p) {
        lw.params[p].tensor =
            lw.params[p].tensor * mask_kept(m.params[p].tensor.to(torch::kFloat32), keep);
      }
    }
  }
  return out;
}

double mask_density(const models::weight_snapshot& server, uint32_t client, double keep) {
  auto mask = take_tagged(server, "mask" + std::to_string(client));
  double nonzero = 0, total = 0;
  for (auto& lw : mask.layers) {
    for (auto& p : lw.params) {
      nonzero += static_cast<double>(
          mask_kept(p.tensor.to(torch::kFloat32), keep).sum().item<int64_t>());
      total += static_cast<double>(p.tensor.numel());
    }
  }
  return total > 0 ? nonzero / total : 1.0;
}

} // namespace salamander::actors
