#include "actors/node/node.hpp"
#include "actors/exit_text.hpp"
#include "actors/logging.hpp"
#include "actors/node/network.hpp"
#include "actors/tuning.hpp"

#include "actors/planning/capacity.hpp"

#include "actors/cluster/auth.hpp"

#include "actors/federated/fed_client.hpp"
#include "actors/split/split_client.hpp"

#include "actors/node/profiler.hpp"
#include "actors/replication/replica_holder.hpp"
#include "actors/pipeline/stage.hpp"
#include "algorithms/partitioner.hpp"

#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>

#include "messages/errors.hpp"
#include "messages/frame_pool.hpp"
#include "models/blas_memory.hpp"
#include <atomic>
#include <cmath>
#include <csignal>
#include <malloc.h>
#include <thread>

namespace salamander::actors {

namespace {

// Whether this process's stages or clients compute: a trim scheduled by a
// job's end is left out once the next job's stages are there.
std::atomic<bool> node_computing{false};

} // namespace

void keep_freed_memory(bool computing) {
  // The node's fixed mmap threshold (run_node) also freezes glibc's trim
  // threshold at 128 KB: with glibc's 128 KB pad every free trimmed an
  // arena's top and the next tensor faulted its pages in again. So while a
  // job runs, an arena keeps 64 MB free at its top.
  //
  // The pad alone held only for a node's first job: an arena made while the
  // pad is in force starts with a 64 MB heap, but one trimmed at a job's end
  // grows again only by what each request needs, and glibc serves a request
  // over the mmap threshold that the top cannot hold with a fresh mapping,
  // faulted in and unmapped every time (traced with perf: 67k page faults a
  // job on a node's first job, 84-137k on the later ones; 4-stage ViT
  // pipeline of 4 node processes, 2-core host, EMULATED devices of 0.45
  // core: 107-123 samples/s first, 0.7-0.9 of that after). So a computing
  // node also lifts the mmap threshold to glibc's largest (32 MB, half an
  // arena's heap): tensors come from the arenas, which keep them.
  //
  // When the job's tensors go, the pad is small and the threshold 256 KB
  // again, so their frees trim the arenas and the idle node keeps little
  // (malloc_trim afterwards gives back the whole free pages inside them). An
  // arena other than the main one is trimmed only when a chunk of it is
  // freed, so what is in force when a job's tensors go decides what the idle
  // node keeps.
  constexpr size_t computing_top_pad = size_t{64} << 20;
  constexpr size_t idle_top_pad = size_t{128} << 10;
  constexpr size_t computing_mmap_threshold = size_t{32} << 20;
  constexpr size_t idle_mmap_threshold = size_t{256} << 10;
  mallopt(M_TOP_PAD, static_cast<int>(computing ? computing_top_pad : idle_top_pad));
  mallopt(M_MMAP_THRESHOLD,
          static_cast<int>(computing ? computing_mmap_threshold : idle_mmap_threshold));
}

namespace {

// A job's stages or clients come (true) or go (false).
void set_computing(bool computing) {
  node_computing = computing;
  keep_freed_memory(computing);
}

} // namespace

std::string check_stage_spec(const stage_spec& spec, double memory_cap) {
  try {
    auto desc = models::describe(models::model_spec::parse(spec.model));
    if (desc.fingerprint != spec.fingerprint) {
      return "this node describes model " + spec.model + " with fingerprint " +
             desc.fingerprint + ", the supervisor with " + spec.fingerprint +
             " (different salamander builds?)";
    }
    if (spec.begin >= spec.end || spec.end > desc.layers.size()) {
      return "layer range [" + std::to_string(spec.begin) + ", " +
             std::to_string(spec.end) + ") is not within the " +
             std::to_string(desc.layers.size()) + " layers of " + spec.model;
    }
    if (spec.index >= spec.stages || spec.micro_batches < 1) {
      return "stage " + std::to_string(spec.index) + " of " +
             std::to_string(spec.stages) + " with " + std::to_string(spec.micro_batches) +
             " micro-batches is not valid";
    }
    bool infer = spec.mode == "infer";
    if (!infer && spec.mode != "train") {
      return "stage mode '" + spec.mode + "' is not train or infer";
    }
    if (!infer) {
      algorithms::parse_schedule(spec.schedule); // throws on an unknown schedule
      models::optimizer_config ocfg{spec.optimizer, spec.lr, spec.momentum, 0.0};
      models::make_optimizer(ocfg, {}); // validates kind and rate
    }
    if (memory_cap > 0) {
      // the planner's arithmetic: weights (training: gradients, optimizer
      // state) and the activations kept in flight (serving: the job's bound
      // on micro-batches in flight, with their input and output buffers)
      auto req = make_plan_request(desc, spec.schedule, spec.micro_batch_size,
                                   static_cast<int>(spec.micro_batches), spec.optimizer);
      if (infer) {
        req.mode = algorithms::plan_mode::inference;
        req.inference_in_flight = static_cast<int>(spec.micro_batches);
      }
      req.async_delay = static_cast<int>(spec.async_delay);
      req.async_slack = static_cast<int>(spec.async_slack);
      double need = algorithms::stage_memory(
          req, spec.begin, spec.end, algorithms::in_flight(req, spec.index, spec.stages));
      if (need > memory_cap) {
        return "layers " + std::to_string(spec.begin) + ".." + std::to_string(spec.end) +
               " need " + std::to_string(static_cast<int64_t>(need / 1e6)) +
               " MB but this node has " +
               std::to_string(static_cast<int64_t>(memory_cap / 1e6)) +
               " MB (emulated cap)";
      }
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

namespace {

caf::error unauthorized(const std::string& name) {
  return caf::make_error(errc::unauthorized,
                         "node " + name +
                             " has not authenticated this supervisor (cluster secret)");
}

// long enough for stages told to stop to have gone
constexpr std::chrono::milliseconds trim_delay{500};
// long enough for every connection to have written a heartbeat since
constexpr std::chrono::milliseconds second_shrink_delay{3000};

// A connection's scribe, which CAF's broker keeps to itself (by_id is
// protected; a pointer to it taken through a class derived from the broker
// applies to any broker).
struct servant_access : caf::io::abstract_broker {
  static caf::io::scribe* scribe_of(caf::io::abstract_broker& broker,
                                    caf::io::connection_handle hdl) {
    auto by_id = &servant_access::by_id<caf::io::connection_handle>;
    auto found = (broker.*by_id)(hdl);
    return found ? &*found : nullptr;
  }
};

// `buf` without the capacity beyond its bytes.
size_t shrink_to_size(std::vector<char>& buf) {
  auto spare = buf.capacity() - buf.size();
  if (spare > 0) {
    std::vector<char>(buf.begin(), buf.end()).swap(buf);
  }
  return spare;
}

} // namespace

void release_connection_buffers(caf::actor_system& sys,
                                std::function<void(size_t)> done) {
  if (!sys.has_middleman()) {
    return;
  }
  auto& mm = sys.middleman();
  mm.backend().post([&mm, done = std::move(done)] {
    auto basp = mm.named_broker<caf::io::basp_broker>(caf::atom("BASP"));
    auto* broker = dynamic_cast<caf::io::abstract_broker*>(
        caf::actor_cast<caf::abstract_actor*>(basp));
    if (broker == nullptr) {
      if (done) {
        done(0);
      }
      return;
    }
    size_t freed = 0;
    size_t busy = 0;
    for (auto& hdl : broker->connections()) {
      auto& buf = broker->wr_buf(hdl);
      if (!buf.empty()) {
        ++busy;
      } else {
        freed += buf.capacity();
        std::vector<char>{}.swap(buf);
      }
      // the receive buffer holds the bytes of the read under way (the
      // stream reads into it up to its size; the scribe lends it to the
      // broker's message only while the broker handles it, here on this
      // same thread)
      if (auto* s = servant_access::scribe_of(*broker, hdl)) {
        freed += shrink_to_size(s->rd_buf());
      }
    }
    malloc_trim(0); // (after the buffers above are gone)
    subsystem_log("node")->debug("connection buffers: {:.1f} MB freed, {} writing",
                                 static_cast<double>(freed) / 1e6, busy);
    if (done) {
      done(freed);
    }
  });
}

namespace {

// Gives freed memory back to the system once the stages and holders that
// were told to stop have gone (they stop on their own threads): LibTorch
// frees tensors to glibc, which keeps the pages in its arenas otherwise.
template <class Self> void trim_later(Self self) {
  self->spawn([](caf::event_based_actor* t) -> caf::behavior {
    t->delayed_send(t, trim_delay, caf::atom("trim"));
    t->delayed_send(t, trim_delay + second_shrink_delay, caf::atom("shrink"));
    return {
        [t](caf::atom_value what) {
          // (once a next job's stages came, they use what is kept)
          if (!node_computing) {
            release_connection_buffers(t->home_system());
            if (what == caf::atom("trim")) {
              // the receive buffers kept for reuse are as large as the job's
              // replica snapshots: measured, 366 MB of ViT-Small's stayed
              // resident
              messages::release_frame_pool();
              // OpenBLAS's packing buffers: what the job's products touched
              auto blas = models::release_blas_buffers();
              // oneDNN's primitives made for the job's shapes
              auto primitives = models::release_onednn_primitives();
              malloc_trim(0);
              subsystem_log("node")->debug(
                  "OpenBLAS buffers: {:.1f} MB given back; {} oneDNN primitives dropped",
                  static_cast<double>(blas) / 1e6, primitives);
            }
          }
          if (what == caf::atom("shrink")) {
            t->quit();
          }
        },
    };
  });
}

// Makes a helper the node spawns (profiler, replica holder) end with the
// node however the node ends (leave, or dropped by its process
// unterminated): a helper that answered a request is otherwise kept alive
// by CAF's clock until that request's timeout (30 s for a link probe's
// transfer), and an actor system waits for it before it closes. The node
// keeps only the helper's address, so a replaced one is not held.
template <class Handle>
Handle ends_with_node(node_actor::stateful_pointer<node_state> self, Handle helper) {
  self->attach_functor([addr = caf::actor_cast<caf::actor_addr>(helper)] {
    if (auto h = caf::actor_cast<caf::actor>(addr)) {
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    }
  });
  return helper;
}

// The job is over for this node: the grace ran out with no supervisor
// back (`grace_over`), or the supervisor ended it. The stages stop, the
// replicas go, and the node is idle (or, after a grace, may leave).
void drop_job(node_actor::stateful_pointer<node_state> self, bool grace_over) {
  auto& st = self->state;
  auto& c = st.config;
  st.grace_timer = caf::actor{};
  auto stages = st.stages.size();
  set_computing(false);
  for (auto& s : st.stages) {
    self->send_exit(s, caf::exit_reason::user_shutdown);
  }
  st.stages.clear();
  self->send_exit(st.holder, caf::exit_reason::user_shutdown);
  st.holder = ends_with_node(self, self->spawn(replica_holder, c.name, c.emulation.link));
  if (st.fresh_holder) {
    self->send_exit(st.fresh_holder, caf::exit_reason::user_shutdown);
    st.fresh_holder = replica_holder_actor{};
  }
  st.supervisor = caf::actor_addr{};
  st.authenticated = false;
  trim_later(self);
  if (!grace_over) {
    subsystem_log("node")->info(
        "node {}: the supervisor ended its job: dropped {} stage(s) and the replicas; idle",
        c.name, stages);
    return;
  }
  auto grace_s = std::chrono::duration<double>(c.supervisor_grace).count();
  subsystem_log("node")->warn(
      "node {}: no supervisor came back within {:.0f} s: dropped {} stage(s) and the "
      "replicas; {}",
      c.name, grace_s, stages,
      c.leave ? "leaving" : "idle, a supervisor may admit it again");
  if (c.leave) {
    c.leave();
  }
}

// A monitored actor went down: the supervisor (the grace starts), or the
// grace's timer (it is over).
void on_down(node_actor::stateful_pointer<node_state> self, const caf::down_msg& dm) {
  auto& st = self->state;
  auto& c = st.config;
  if (st.grace_timer && dm.source == st.grace_timer.address()) {
    drop_job(self, true);
    return;
  }
  if (!st.supervisor || dm.source != st.supervisor) {
    return;
  }
  if (dm.reason == caf::exit_reason::normal || dm.reason == caf::exit_reason::user_shutdown) {
    // it ended (the job finished, failed or was stopped) and said so: nobody
    // comes back for what the job left here
    drop_job(self, false);
    return;
  }
  auto grace_s = std::chrono::duration<double>(c.supervisor_grace).count();
  subsystem_log("node")->warn(
      "node {}: the supervisor went away ({}); keeping {} stage(s) and the replicas "
      "for {:.0f} s (--supervisor-grace) for it or a restarted one to come back",
      c.name, exit_text(self->system(), dm.reason), st.stages.size(), grace_s);
  if (c.supervisor_grace.count() <= 0) {
    drop_job(self, true);
    return;
  }
  auto grace = c.supervisor_grace;
  st.grace_timer = self->spawn([grace](caf::event_based_actor* t) -> caf::behavior {
    return {caf::after(grace) >> [t] { t->quit(); }};
  });
  self->monitor(st.grace_timer);
}

caf::result<node_info> on_hello(node_actor::stateful_pointer<node_state> self,
                                uint32_t protocol, const std::string& challenge) {
  auto& c = self->state.config;
  if (protocol != protocol_version) {
    return caf::make_error(errc::protocol_mismatch,
                           "node " + c.name + " speaks protocol " +
                               std::to_string(protocol_version) + ", the supervisor " +
                               std::to_string(protocol));
  }
  node_info info;
  info.name = c.name;
  info.protocol = protocol_version;
  info.host = c.host;
  info.threads = c.threads;
  info.zoo_fingerprint = models::describe(models::model_spec::parse("cnn")).fingerprint;
  info.emulation = c.emulation.config.describe();
  info.replica_holder = caf::actor_cast<caf::actor>(self->state.holder);
  auto& st = self->state;
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (!challenge.empty() && st.supervisor && sender != st.supervisor &&
      c.host != "embedded") {
    // another supervisor than the last (a new job, or a restarted one): it
    // gets an empty holder, switched to once it proves the secret (auth)
    if (!st.fresh_holder) {
      st.fresh_holder =
          ends_with_node(self, self->spawn(replica_holder, c.name, c.emulation.link));
    }
    st.admitting = sender;
    info.replica_holder = caf::actor_cast<caf::actor>(st.fresh_holder);
  }
  info.profiler = caf::actor_cast<caf::actor>(self->state.profiler);
  info.port = c.port ? c.port->load() : 0;
  info.memory_bytes = c.emulation.config.mem_mb > 0
                          ? static_cast<double>(c.emulation.config.mem_mb) * 1024 * 1024
                          : memory_available();
  info.cpu_share = c.emulation.limiter ? c.emulation.limiter->share_now() : 1.0;
  info.link_bytes_per_s = c.emulation.config.link_mbps * 1e6 / 8;
  if (!challenge.empty()) {
    info.proof = prove(c.secret, "node", c.name, challenge);
    self->state.challenge = make_challenge();
    info.challenge = self->state.challenge;
  }
  return info;
}

void on_auth(node_actor::stateful_pointer<node_state> self, const std::string& proof,
             const std::string& why) {
  auto& st = self->state;
  auto& c = st.config;
  if (proof.empty()) {
    subsystem_log("node")->error("node {}: REFUSED by the supervisor: {}", c.name, why);
    return;
  }
  if (st.challenge.empty() ||
      !verify(c.secret, "supervisor", c.name, st.challenge, proof)) {
    subsystem_log("node")->error(
        "node {}: REFUSED a supervisor that did not prove the cluster secret "
        "(wrong or missing secret there); it gets no work from this node",
        c.name);
    st.authenticated = false;
    return;
  }
  st.challenge.clear();
  auto sender = caf::actor_cast<caf::actor>(self->current_sender());
  bool dropped = false;
  if (st.fresh_holder && sender && sender.address() == st.admitting) {
    subsystem_log("node")->info(
        "node {}: a new supervisor; the replicas of the last one are dropped", c.name);
    self->send_exit(st.holder, caf::exit_reason::user_shutdown);
    st.holder = st.fresh_holder;
    st.fresh_holder = replica_holder_actor{};
    dropped = true;
  }
  // admitted (again): whatever ran here before belongs to a membership that
  // ended (this node was lost, and the job recovered without its stages; or
  // its supervisor died, and a restarted one pulls the job's state from the
  // replicas instead)
  if (!st.stages.empty()) {
    subsystem_log("node")->info("node {}: admitted again; stopping {} stage(s) of before",
                                c.name, st.stages.size());
    set_computing(false); // (a stage spawned next sets it again)
    for (auto& s : st.stages) {
      self->send_exit(s, caf::exit_reason::user_shutdown);
    }
    st.stages.clear();
    dropped = true;
  }
  if (st.grace_timer) {
    subsystem_log("node")->info("node {}: a supervisor is back", c.name);
    self->send_exit(st.grace_timer, caf::exit_reason::user_shutdown);
    st.grace_timer = caf::actor{};
  }
  if (sender && sender.address() != st.supervisor && c.host != "embedded") {
    if (st.supervisor) {
      self->demonitor(st.supervisor);
    }
    self->monitor(sender); // its end starts the grace (on_down)
    st.supervisor = sender.address();
  }
  if (dropped) {
    trim_later(self);
  }
  // capacity reports go to this supervisor from now on
  self->send(st.profiler, capacity_atom_v,
             caf::actor_cast<caf::actor>(self->current_sender()));
  if (!st.authenticated) {
    subsystem_log("node")->info("node {}: supervisor authenticated{}", c.name,
                                c.secret.empty() ? " (open cluster: no secret set)" : "");
  }
  st.authenticated = true;
}

caf::result<device_report> on_profile(node_actor::stateful_pointer<node_state> self,
                                      const std::string& model,
                                      uint32_t micro_batch_size) {
  if (!self->state.authenticated) {
    return unauthorized(self->state.config.name);
  }
  return self->delegate(self->state.profiler, profile_atom_v, model, micro_batch_size);
}

caf::result<bool> on_peer(node_actor::stateful_pointer<node_state> self,
                          const std::string& host, uint16_t port) {
  if (!self->state.authenticated) {
    return unauthorized(self->state.config.name);
  }
  auto rp = self->make_response_promise<bool>();
  auto mm = network(self->system());
  self->request(mm, tuning::connect_timeout, caf::connect_atom_v, host, port)
      .then([=](const caf::node_id&, caf::strong_actor_ptr&,
                std::set<std::string>&) mutable { rp.deliver(true); },
            [=](caf::error&) mutable { rp.deliver(false); });
  return rp;
}

caf::result<link_report> on_probe(node_actor::stateful_pointer<node_state> self,
                                  caf::actor peer, const std::string& name) {
  if (!self->state.authenticated) {
    return unauthorized(self->state.config.name);
  }
  return self->delegate(self->state.profiler, probe_atom_v, std::move(peer), name);
}

caf::result<caf::actor> on_spawn(node_actor::stateful_pointer<node_state> self,
                                 stage_spec spec) {
  if (!self->state.authenticated) {
    return unauthorized(self->state.config.name);
  }
  auto& emu = self->state.config.emulation.config;
  auto why = check_stage_spec(spec, emu.mem_mb > 0 ? emu.mem_mb * 1024.0 * 1024.0 : 0.0);
  if (!why.empty()) {
    return caf::make_error(errc::model_mismatch,
                           "node " + self->state.config.name + ": " + why);
  }
  try {
    set_computing(true);
    auto s = self->spawn(stage, std::move(spec), self->state.config.emulation);
    auto handle = caf::actor_cast<caf::actor>(s);
    self->state.stages.push_back(handle);
    return handle;
  } catch (const std::exception& e) {
    return caf::make_error(errc::stage_failed,
                           "node " + self->state.config.name + ": " + e.what());
  }
}

// A federated or split-learning client: the model must describe the same
// here as at the supervisor.
template <class Spec, class Behavior>
caf::result<caf::actor> on_spawn_client(node_actor::stateful_pointer<node_state> self,
                                        Spec spec, Behavior behavior) {
  auto& c = self->state.config;
  if (!self->state.authenticated) {
    return unauthorized(c.name);
  }
  try {
    auto desc = models::describe(models::model_spec::parse(spec.model));
    if (desc.fingerprint != spec.fingerprint) {
      return caf::make_error(errc::model_mismatch,
                             "node " + c.name + " describes model " + spec.model +
                                 " with fingerprint " + desc.fingerprint +
                                 ", the supervisor with " + spec.fingerprint +
                                 " (different salamander builds?)");
    }
    if (spec.client >= spec.clients) {
      return caf::make_error(errc::bad_config, "node " + c.name + ": client " +
                                                   std::to_string(spec.client) + " of " +
                                                   std::to_string(spec.clients));
    }
    set_computing(true);
    auto s = self->spawn(behavior, std::move(spec), c.emulation, c.name, c.data_dir);
    auto handle = caf::actor_cast<caf::actor>(s);
    self->state.stages.push_back(handle);
    return handle;
  } catch (const std::exception& e) {
    return caf::make_error(errc::stage_failed, "node " + c.name + ": " + e.what());
  }
}

caf::result<std::string> on_slow(node_actor::stateful_pointer<node_state> self,
                                 double factor) {
  auto& c = self->state.config;
  if (!self->state.authenticated) {
    return unauthorized(c.name);
  }
  try {
    c.emulation.limiter->set_factor(factor);
  } catch (const std::exception& e) {
    return caf::make_error(errc::bad_config, "node " + c.name + ": " + e.what());
  }
  return "node " + c.name + " now runs at " +
         std::to_string(c.emulation.limiter->share_now()) + " of a core (EMULATED, via " +
         c.emulation.limiter->method() + ")";
}

// An EMULATED link cut (the console's `cut node NAME SECONDS`): the
// process's network loop, CAF's multiplexer, which reads and writes every
// connection of this node, stalls for `seconds`. Nothing goes in or out, the
// connections stay open and the node's actors go on with what they hold,
// as on a link that drops and comes back; the peers' timeouts decide the
// rest. The answer leaves first: the stall starts kill_delay later.
caf::result<std::string> on_cut(node_actor::stateful_pointer<node_state> self,
                                double seconds) {
  auto& c = self->state.config;
  if (!self->state.authenticated) {
    return unauthorized(c.name);
  }
  if (c.host == "embedded") {
    return caf::make_error(errc::not_applicable,
                           "node " + c.name +
                               " runs inside the supervisor's process and has no link of "
                               "its own to cut");
  }
  auto longest = static_cast<double>(tuning::cut_longest.count());
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > longest) {
    return caf::make_error(errc::bad_config,
                           fmt::format("node {}: a cut lasts more than 0 and at most {:.0f} "
                                       "seconds, not {}",
                                       c.name, longest, seconds));
  }
  auto& loop = self->home_system().middleman().backend();
  self->home_system().spawn([&loop, seconds](caf::event_based_actor* a) -> caf::behavior {
    a->delayed_send(a, tuning::kill_delay, seconds);
    return {[&loop, a](double s) {
      loop.post([s] { std::this_thread::sleep_for(std::chrono::duration<double>(s)); });
      a->quit();
    }};
  });
  log()->warn("node {}: link cut for {:.1f} s (EMULATED)", c.name, seconds);
  return fmt::format("node {} cuts its link for {:.1f} s (EMULATED: its network loop stalls, "
                     "its connections are kept)",
                     c.name, seconds);
}

caf::result<std::string> on_kill(node_actor::stateful_pointer<node_state> self) {
  auto& c = self->state.config;
  if (!self->state.authenticated) {
    return unauthorized(c.name);
  }
  if (c.host == "embedded") {
    return caf::make_error(errc::not_applicable, "node " + c.name +
                                                     " runs inside the supervisor's process "
                                                 "and cannot be killed alone");
  }
  // answer first, then die as kill -9 would
  std::thread([] {
    std::this_thread::sleep_for(tuning::kill_delay);
    std::raise(SIGKILL);
  }).detach();
  return "node " + c.name + " is killing itself (SIGKILL)";
}

void on_leave(node_actor::stateful_pointer<node_state> self) {
  for (auto& s : self->state.stages) {
    self->send_exit(s, caf::exit_reason::user_shutdown);
  }
  self->state.stages.clear();
  // (the profiler and replica holders end with the quit: ends_with_node)
  if (self->state.grace_timer) {
    self->send_exit(self->state.grace_timer, caf::exit_reason::user_shutdown);
  }
  self->quit();
}

} // namespace

node_actor::behavior_type node(node_actor::stateful_pointer<node_state> self,
                               node_config cfg) {
  self->state.config = std::move(cfg);
  // nodes inside the supervisor's process (the embedded mode) trust it
  self->state.authenticated = self->state.config.host == "embedded";
  auto& emu = self->state.config.emulation;
  if (!emu.limiter) {
    // a limiter that does nothing until `slow` asks; never a cgroup here, as
    // other nodes may share this process
    auto c = emu.config;
    c.force_dilation = true;
    emu.limiter = std::make_shared<cpu_limiter>(c);
  }
  if (!emu.link && emu.config.link_mbps > 0) {
    emu.link = std::make_shared<link_shaper>(emu.config.link_mbps); // one for the node
  }
  auto& c = self->state.config;
  self->state.profiler = ends_with_node(
      self, c.detached_profiler
                ? self->spawn<caf::detached>(profiler, c.name, c.emulation, c.device_type)
                : self->spawn(profiler, c.name, c.emulation, c.device_type));
  self->state.holder =
      ends_with_node(self, self->spawn(replica_holder, c.name, c.emulation.link));
  self->set_down_handler([=](caf::down_msg& dm) { on_down(self, dm); });
  return {
      // challenge "": a heartbeat probe, no authentication
      [=](hello_atom, uint32_t protocol, const std::string& challenge) {
        return on_hello(self, protocol, challenge);
      },
      [=](auth_atom, const std::string& proof, const std::string& why) {
        on_auth(self, proof, why);
      },
      [=](profile_atom, const std::string& model, uint32_t micro_batch_size) {
        return on_profile(self, model, micro_batch_size);
      },
      [=](peer_atom, const std::string& host, uint16_t port) {
        return on_peer(self, host, port);
      },
      [=](probe_atom, caf::actor peer, const std::string& name) {
        return on_probe(self, peer, name);
      },
      [=](spawn_atom, stage_spec spec) { return on_spawn(self, spec); },
      [=](spawn_atom, fed_client_spec spec) {
        return on_spawn_client(self, std::move(spec), fed_client);
      },
      [=](spawn_atom, split_client_spec spec) {
        return on_spawn_client(self, std::move(spec), split_client);
      },
      [=](slow_atom, double factor) { return on_slow(self, factor); },
      [=](cut_atom, double seconds) { return on_cut(self, seconds); },
      [=](kill_atom) { return on_kill(self); },
      [=](leave_atom) { on_leave(self); },
  };
}

} // namespace salamander::actors
