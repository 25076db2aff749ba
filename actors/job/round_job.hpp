// The job core of the modes that run rounds over clients (federated, split
// learning): written once, driven by a mode's hooks, the way Flower's
// server drives a strategy.
//
//   round_job (the core)                      round_mode (the hooks)
//   ------------------------------------      ----------------------------------
//   nodes, the roster of client slots         spawn_message(c): what to spawn
//   the phase (algorithms/round_phase.hpp)    spawned(c): make it ready, then
//   pause / resume / stop / kill / join /       ready(c) or start_failed(c, why)
//     node lost / down / tick                 client_out(c, why): drop it from
//   the time budget (resumed runs go on         the round in hand
//     from where they stopped)                next_work(): start a round or tasks
//   status, metrics log, end and failure      status, checkpoint, stop and end texts
//
// The core owns every client slot: where the client runs (its node), its
// handle, how its start went and when it is spawned again. Slots are not
// tied to "client i runs on node i": a slot names its node, so a node may
// host many clients (virtual clients) and a lost node takes all of its
// clients out. A mode keeps its own per-client data beside the slots,
// indexed the same.
//
// What the core does as an actor (spawn, kill, monitor, its tick) goes
// through a job_port: the core is plain code, written once for both job
// actors' types; `round_job_handlers` lists the job interface's handlers
// once for both behaviours.
#pragma once

#include "actors/clients/weights_parts.hpp"
#include "actors/job/ended.hpp"
#include "actors/job/running.hpp"
#include "actors/job/job_core.hpp"
#include "actors/job/job_nodes.hpp"
#include "actors/job/metrics.hpp"
#include "actors/tuning.hpp"
#include "algorithms/round_phase.hpp"
#include "messages/errors.hpp"
#include "messages/interfaces.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/logger.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace salamander::models {
struct dataset;
struct model_desc;
} // namespace salamander::models

namespace salamander::actors {

/// What the configurations of federated and split jobs share: the model,
/// the data and how it is split over the clients, the optimiser, the
/// rounds and the budget, checkpoints, and the cluster's settings. The
/// defaults are the ones the README documents.
struct round_job_config {
  std::string model = "cnn";
  int64_t rounds = 10;      ///< rounds (fedbuff: server steps) at most
  double time_budget_s = 0; ///< stop after this much training time (0: none)
  std::string dataset = "fashion-mnist";
  /// Where the supervisor reads the test split, and embedded clients the
  /// training split (a node started with --data uses its own instead).
  std::string data_dir;
  double alpha = 0.5; ///< Dirichlet label skew; <= 0: IID
  /// Not 0: the last this many clients hold classes no other client holds
  /// (algorithms::partition_apart), each group split by `alpha`.
  int64_t classes_apart = 0;
  uint64_t seed = 1;
  int64_t batch_size = 64;
  std::string optimizer = "sgd";
  double lr = 0.01;
  double momentum = 0.9;
  int64_t max_samples = 0;     ///< per client, at most (0: its whole shard)
  /// The fraction of the available clients sampled for each round (FedAvg's
  /// C, Flower's fraction_fit): at least one; 1: every client.
  double fraction_fit = 1;
  /// Clients on each node (virtual clients): each has its own shard, so the
  /// data is split over nodes x this many clients.
  int64_t clients_per_node = 1;
  /// Stragglers among the clients (EMULATED): this fraction of them, drawn
  /// with the seed, runs at `straggler_speed` of its node's speed.
  double straggler_fraction = 0;
  double straggler_speed = 1;
  int64_t test_samples = 0;    ///< evaluate on this many test examples (0: all)
  std::string checkpoint_path; ///< written after every round ("": none)
  bool resume = false;         ///< start from checkpoint_path
  std::string metrics_path;
  std::string secret;
  int32_t threads = 1;
  std::chrono::milliseconds node_timeout = tuning::request_timeout;
  std::chrono::milliseconds profile_timeout = tuning::profile_timeout;
};

/// Checks what every round job needs of its configuration; throws
/// std::invalid_argument naming the option.
void check_round_config(const round_job_config& c);

/// Client `client`'s speed as a part of its node's (1 unless it is one of the
/// stragglers the configuration asks for).
double client_speed(const round_job_config& cfg, uint32_t client, uint32_t clients);

/// The fields every client's spawn spec (fed_client_spec, split_client_spec)
/// takes from the job's configuration.
template <class Spec>
void fill_client_spec(Spec& s, const round_job_config& cfg, uint32_t client,
                      uint32_t clients, const std::string& model,
                      const std::string& fingerprint) {
  s.client = client;
  s.clients = clients;
  s.model = model;
  s.fingerprint = fingerprint;
  s.dataset = cfg.dataset;
  s.data_dir = cfg.data_dir;
  s.alpha = cfg.alpha;
  s.classes_apart = static_cast<uint32_t>(cfg.classes_apart);
  s.seed = cfg.seed;
  s.batch_size = cfg.batch_size;
  s.optimizer = cfg.optimizer;
  s.lr = cfg.lr;
  s.momentum = cfg.momentum;
  s.threads = cfg.threads;
  s.max_samples = cfg.max_samples;
  s.speed = client_speed(cfg, client, clients);
}

/// The test split the supervisor evaluates on (`test_samples` of it, when
/// set); throws what is wrong (no data, a model that does not fit it).
std::shared_ptr<const models::dataset> load_test_split(const round_job_config& cfg,
                                                       const models::model_desc& desc);

/// One client's place in the roster: where it runs and how its start went.
struct client_slot {
  caf::actor handle; ///< null while it is not running
  uint32_t node = 0; ///< index into the job's nodes
  bool spawning = false;
  bool ready = false; ///< spawned and answered (federated: profiled)
  int failures = 0;   ///< spawns or readiness checks that failed in a row
  std::string last_error;
  uint64_t attempt = 0;       ///< of the spawn in hand: older answers are stale
  bool first_pending = false; ///< counted until the first clients settle
  std::chrono::steady_clock::time_point retry_at{};
};

/// What a mode decides and does for the core.
class round_mode {
public:
  virtual ~round_mode() = default;
  /// "federated", "split": in texts and logs.
  virtual const char* name() const = 0;
  /// The word the status uses for enlisting ("profiling", "spawning").
  virtual const char* enlisting() const = 0;
  /// The message a node spawns client `c` from: (spawn_atom, spec).
  virtual caf::message spawn_message(uint32_t c) = 0;
  /// Client `c` was spawned (its slot has the handle): make it ready, then
  /// tell the core ready(c) or start_failed(c, ...).
  virtual void spawned(uint32_t c) = 0;
  /// Client `c` is out (its node, itself, hung): drop it from the round in
  /// hand. Its slot is reset already.
  virtual void client_out(uint32_t c, const std::string& why) = 0;
  /// Start what comes next (a round, tasks) unless it runs already.
  virtual void next_work() = 0;
  /// Every tick before clients are spawned again (split: finds hung ones).
  virtual void on_tick() {}
  /// A down message about the mode's own workers; true when it was one.
  virtual bool on_down(const caf::down_msg&) { return false; }
  /// The job ends: stop the mode's own workers (the core stops the clients).
  virtual void stop_workers() {}
  /// Rounds aggregated (fedbuff: server steps).
  virtual uint64_t rounds_done() const = 0;
  /// The mode's figures in the status.
  virtual void fill_status(job_status&) const {}
  /// The mode's fields of the "end" event.
  virtual nlohmann::json end_fields() const { return nlohmann::json::object(); }
  /// What a stop leaves: "(the round in hand is dropped; ...)".
  virtual std::string stop_note() const = 0;
  /// Client `c` (running on a live node) in the console's node table.
  virtual std::string role(uint32_t c) const = 0;
  /// Client `c` (running) in the status's plan line.
  virtual std::string contribution(uint32_t c) const = 0;
  /// Client `c`'s speed measured over profiled (1: as profiled; 0: unknown).
  virtual double speed(uint32_t) const { return 0; }
  /// The console's `checkpoint save PATH`: what was written, or why not.
  virtual caf::expected<std::string> checkpoint(const std::string& path) = 0;
  /// Why the console's `repartition` and `replicate` do not apply.
  virtual std::string why_no_replan() const = 0;
  virtual std::string why_no_replicate() const = 0;
};

/// What the core does as its actor, type-erased.
class job_port {
public:
  using on_actor = std::function<void(caf::actor&)>;
  using on_error = std::function<void(caf::error&)>;
  using on_members = std::function<void(std::vector<cluster_member>&)>;
  virtual ~job_port() = default;
  /// Submits the job to `cluster`: the nodes it admitted, or why not.
  virtual void submit(const cluster_actor& cluster, caf::timespan timeout, on_members ok,
                      on_error failed) = 0;
  /// Asks `node` to spawn from `msg`; one of the two handlers runs.
  virtual void spawn(const caf::actor& node, caf::timespan timeout, caf::message msg,
                     on_actor ok, on_error failed) = 0;
  virtual void exit(const caf::actor& a, caf::exit_reason why) = 0;
  virtual void monitor(const caf::actor& a) = 0;
  virtual void tick_after(caf::timespan after) = 0;
  virtual std::string render(const caf::error& e) const = 0;
  /// The actor clock's now: the steady clock, or the test coordinator's
  /// virtual time in deterministic tests.
  virtual std::chrono::steady_clock::time_point now() const = 0;
  /// The job has ended: the actor switches to its ended behaviour.
  virtual void ended() = 0;
};

template <class Self> class port_of final : public job_port {
public:
  /// `ended` is the actor's ended behaviour (round_job_ended).
  port_of(Self* self, std::function<typename Self::behavior_type()> ended)
      : self_(self), ended_(std::move(ended)) {}
  void submit(const cluster_actor& cluster, caf::timespan timeout, on_members ok,
              on_error failed) override {
    self_->request(cluster, timeout, submit_atom_v, caf::actor_cast<caf::actor>(self_))
        .then([ok](std::vector<cluster_member>& m) { ok(m); },
              [failed](caf::error& e) { failed(e); });
  }
  void spawn(const caf::actor& node, caf::timespan timeout, caf::message msg, on_actor ok,
             on_error failed) override {
    self_->request(node, timeout, std::move(msg))
        .then([ok](caf::actor& a) { ok(a); }, [failed](caf::error& e) { failed(e); });
  }
  void exit(const caf::actor& a, caf::exit_reason why) override { self_->send_exit(a, why); }
  void monitor(const caf::actor& a) override { self_->monitor(a); }
  void tick_after(caf::timespan after) override {
    self_->delayed_send(self_, after, tick_atom_v);
  }
  std::string render(const caf::error& e) const override {
    return self_->system().render(e);
  }
  std::chrono::steady_clock::time_point now() const override {
    return self_->clock().now();
  }
  void ended() override { self_->become(ended_()); }

private:
  Self* self_;
  std::function<typename Self::behavior_type()> ended_;
};

/// The core itself: the lifecycle every round job has, on the job core
/// every job has (actors/job/job_core.hpp: cluster, nodes, pause and stop,
/// status, metrics log).
class round_job : public job_core {
public:
  using clock = std::chrono::steady_clock;
  static constexpr auto tick_period = std::chrono::milliseconds(500);
  static constexpr auto respawn_wait = std::chrono::seconds(2);

  /// Binds the core to its configuration, mode and port (in the actor's
  /// initialisation; all three live as long as the actor).
  void attach(const round_job_config& cfg, round_mode& mode, std::unique_ptr<job_port> port);

  // ---- the job's state, as the mode reads it (and the job core's)
  std::vector<client_slot> clients;
  algorithms::round_phase phase = algorithms::round_phase::starting;
  bool training_started = false;
  double train_s_before = 0; ///< resumed: training time of the runs before
  double eval_s = 0;         ///< evaluations by the supervisor (not training)
  /// Clients' weights arriving in parts, and the job's own transfers
  /// numbered (actors/clients/weights_parts.hpp).
  weights_inbox inbox;
  uint64_t transfers = 0;

  // ---- lifecycle
  /// The mode's name, which names its log ("federated", "split").
  const char* subsystem() const { return mode_->name(); }
  bool over() const { return algorithms::is_over(phase); }
  /// Moves the phase on `e`; false (nothing changes) where `e` does not apply.
  bool enter(algorithms::round_event e);
  /// Training time: wall time since the first round (without evaluations),
  /// plus that of the runs this one resumed.
  double train_time() const;
  void training_starts();
  /// Opens the metrics log when the configuration names one.
  void open_metrics() { job_core::open_metrics(cfg_->metrics_path); }
  /// Prepares the job (what `prepare` throws fails it), then submits it to
  /// the cluster; `admitted` gets the nodes unless the job ended meanwhile.
  void begin(const std::function<void()>& prepare,
             std::function<void(std::vector<cluster_member>&)> admitted);
  /// The nodes the cluster admitted; logs "start" with the mode's fields and
  /// spawns the first clients (one per live node).
  void start(const std::vector<cluster_member>& members, nlohmann::json start_fields);
  void end(algorithms::round_event how, const std::string& error);
  void fail(const std::string& what);
  /// Runs `f`; what it throws fails the job with why.
  void guarded(const std::function<void()>& f);
  /// The time budget is spent: the job ends (the round in hand is dropped).
  bool ended_by_budget();
  /// Whether a round may start now; ends the job when the budget is spent
  /// or every round is done. Logs and shows `waiting` when `available` is
  /// false.
  bool may_start_round(bool available);

  // ---- the roster
  bool available(uint32_t c) const;
  /// The clients that take part in round `round`: a sample of the available
  /// ones (fraction_fit), drawn from the seed and the round, in order.
  std::vector<uint32_t> round_sample(uint64_t round) const;
  /// How many clients `nodes` nodes run (clients_per_node on each).
  size_t clients_for(size_t nodes) const;
  /// The slot an answer about spawn `attempt` of client `c` is for; null
  /// when it is stale (the job ended, the client was replaced or went).
  client_slot* answered(uint32_t c, uint64_t attempt);
  void ready(uint32_t c);
  /// Client `c` could not be made ready: it is out, and tried again later.
  void start_failed(uint32_t c, const std::string& why);
  /// Client `c` is out: its actor stopped, its slot reset, the mode told.
  void client_gone(uint32_t c, const std::string& why);

  // ---- the job interface (round_job_handlers)
  void refresh_status();
  /// The status as it stands (refreshed).
  job_status status_now();
  // (hooks of the running behaviour, actors/job/running.hpp: called after
  // the lifecycle took the console's pause, resume or stop, or a path)
  caf::result<std::string> paused();
  caf::result<std::string> resumed();
  caf::result<std::string> checkpoint(const std::string& path);
  caf::result<std::string> stopping();
  /// The hooks above and the node events, for actors/job/running.hpp.
  job_hooks hooks();
  void node_lost(uint32_t n, const std::string& why);
  caf::result<std::string> node_joined(uint32_t n, const cluster_member& m);
  void down(const caf::down_msg& dm);
  void tick();
  caf::result<std::string> kill(uint32_t c);
  caf::error no_replan() const;
  caf::error no_replicate() const;
  void leave();

private:
  void spawn(uint32_t c);
  void stop_workers();
  void spawn_failed(client_slot& c, const std::string& why);
  void settle(uint32_t c);
  bool hopeless() const;
  /// Past the start and not stopping: clients may be (re)started.
  bool enlisted() const;
  /// Starts again the clients whose wait is over (a node back, a client
  /// that died), their nodes live.
  void restart_clients();
  std::string last_error() const;
  std::shared_ptr<spdlog::logger> log() const;
  double seconds_since(clock::time_point t) const;

  const round_job_config* cfg_ = nullptr;
  round_mode* mode_ = nullptr;
  std::unique_ptr<job_port> port_;
  size_t first_pending_ = 0;
  clock::time_point train_started_{};
};

/// The behaviour of a round job that has ended (actors/job/ended.hpp): the
/// mode's `snapshot`, and drops for its own messages (`extra`).
template <class Self, class... Extra>
typename Self::behavior_type
round_job_ended(Self* self, round_job& core,
                std::function<caf::result<snapshot_payload>()> snapshot, Extra... extra) {
  return ended_behavior(
      self,
      {std::string("the ") + core.subsystem() + " job", "", [&core] { return core.status_now(); },
       std::move(snapshot), [&core] { core.leave(); }, core.events},
      drop<part_atom, uint64_t, uint64_t, uint64_t, tensor_payload>(), std::move(extra)...);
}

/// The job interface's handlers, written once for every round job: the
/// mode adds its own (`extra`), and the actor's behaviour is both.
template <class Self, class... Extra>
typename Self::behavior_type round_job_handlers(Self* self, round_job& core,
                                                Extra... extra) {
  return running_behavior(
      self, core, core.hooks(),
      [&core](tick_atom) { core.tick(); },
      part_handler(self, core.inbox, core.subsystem()),
      [&core](kill_atom, uint32_t c) { return core.kill(c); },
      [&core](replan_atom, std::string&) -> caf::result<std::string> {
        return core.no_replan();
      },
      [&core](replicate_atom) -> caf::result<std::string> { return core.no_replicate(); },
      std::move(extra)...);
}

} // namespace salamander::actors
