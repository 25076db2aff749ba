#include "actors/cluster/cluster_supervisor.hpp"

#include "actors/cluster/auth.hpp"
#include "actors/exit_text.hpp"
#include "actors/logging.hpp"
#include "actors/node/network.hpp"
#include "actors/node/port_probe.hpp"
#include "messages/errors.hpp"

#include <caf/io/middleman.hpp>
#include <nlohmann/json.hpp>

#include <functional>

#include <cerrno>
#include <memory>
#include <optional>
#include <unistd.h>

namespace salamander::actors {

namespace {

using self_ptr = cluster_actor::stateful_pointer<cluster_state>;
using clock = std::chrono::steady_clock;

auto log() {
  return subsystem_log("cluster");
}

bool live(const cluster_entry& e) {
  return e.answered && !e.refused && !e.lost;
}

cluster_member member_of(const cluster_state& st, size_t n);

// The job consoles talk to: the first attached (null: none).
caf::actor main_job(const cluster_state& st) {
  return st.jobs.empty() ? caf::actor{} : st.jobs.front();
}

// The cluster's own events go to every job's metrics log.
void tell_job(self_ptr self, const std::string& kind, const nlohmann::json& fields) {
  auto text = fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (auto& job : self->state.jobs) {
    self->send(caf::actor_cast<job_actor>(job), event_atom_v, kind, text);
  }
}

// A node joined or came back: every job is told; `answer` gets the main
// job's reply (the others' are logged).
void tell_joined(self_ptr self, size_t n,
                 caf::typed_response_promise<std::string>* answer) {
  auto& st = self->state;
  auto member = member_of(st, n);
  auto name = member.name;
  for (size_t j = 0; j < st.jobs.size(); ++j) {
    auto job = caf::actor_cast<job_actor>(st.jobs[j]);
    if (j == 0 && answer != nullptr) {
      answer->delegate(job, join_atom_v, static_cast<uint32_t>(n), member);
      continue;
    }
    self->request(job, st.cfg.hello_timeout, join_atom_v, static_cast<uint32_t>(n),
                  member)
        .then([=](const std::string& said) { log()->info("{}", said); },
              [=](caf::error& err) {
                log()->warn("a job did not take node {} in: {}", name,
                            self->system().render(err));
              });
  }
}

cluster_member member_of(const cluster_state& st, size_t n) {
  auto& e = st.nodes[n];
  cluster_member m;
  m.index = static_cast<uint32_t>(n);
  m.name = e.name;
  m.node = caf::actor_cast<caf::actor>(e.handle);
  m.host = e.host;
  m.port = e.port;
  m.info = e.info;
  m.refused = e.refused;
  m.lost = e.lost;
  m.why = e.why;
  return m;
}

// Admission, the one path for the nodes of the cluster file and for nodes
// that join later: hello with a fresh challenge; the node must speak our
// protocol and prove the cluster secret, and gets our proof in turn (or why
// it is refused; both sides log REFUSED). `done` gets the node's answer, or
// why it is out and whether that is fatal for a job that counts on it (no
// answer, another protocol) rather than a refusal.
struct admission {
  std::optional<node_info> info;
  errc code = errc::none;
  std::string why;
  bool fatal = false;
  caf::error error() const { return caf::make_error(code, why); }
};

void admit(self_ptr self, node_actor handle, const std::string& name,
           std::function<void(admission)> done) {
  auto challenge = make_challenge();
  self->request(handle, self->state.cfg.hello_timeout, hello_atom_v, protocol_version,
                challenge)
      .then(
          [=](node_info info) {
            auto& st = self->state;
            if (info.protocol != protocol_version) {
              done({std::nullopt, errc::protocol_mismatch,
                    "node " + name + " speaks protocol " + std::to_string(info.protocol) +
                        ", this supervisor " + std::to_string(protocol_version) +
                        " (run the same salamander version everywhere)",
                    true});
              return;
            }
            if (info.name != name) {
              // (the proof covers the node's own name: checked against the
              // listed one it would fail, and read as a wrong secret)
              auto why = "the cluster file lists node '" + name +
                         "' but the node there calls itself '" + info.name +
                         "' (its --name); start it with --name " + name +
                         " or rename it in the cluster file";
              log()->error("REFUSED {}", why);
              self->send(handle, auth_atom_v, std::string{},
                         "the cluster file names this node '" + name + "', not '" +
                             info.name + "'");
              done({std::nullopt, errc::bad_config, why, true});
              return;
            }
            if (!verify(st.cfg.secret, "node", name, challenge, info.proof)) {
              auto why = "node " + name +
                         " did not prove the cluster secret (wrong or missing "
                         "secret on that node); it is refused and gets no work";
              log()->error("REFUSED {}", why);
              self->send(
                  handle, auth_atom_v, std::string{},
                  std::string("this node did not prove the cluster secret (wrong or "
                              "missing --secret-file / SALAMANDER_SECRET)"));
              done({std::nullopt, errc::unauthorized, why, false});
              return;
            }
            self->send(handle, auth_atom_v,
                       prove(st.cfg.secret, "supervisor", name, info.challenge),
                       std::string{});
            done({std::move(info), errc::none, "", false});
          },
          [=](caf::error& err) {
            done({std::nullopt, errc::unreachable,
                  "node " + name + " did not answer hello: " + self->system().render(err),
                  true});
          });
}

// The members a job gets, or why no job can run here.
caf::expected<std::vector<cluster_member>> members(const cluster_state& st) {
  if (!st.fatal.empty()) {
    return caf::make_error(errc::bad_config, st.fatal);
  }
  std::vector<cluster_member> out;
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    out.push_back(member_of(st, n));
  }
  return out;
}

// Once every node of the cluster file answered: jobs that waited get the
// members, or the reason no job can run.
void admission_done(self_ptr self) {
  auto& st = self->state;
  st.admitted = true;
  bool any = std::any_of(st.nodes.begin(), st.nodes.end(), live);
  if (st.fatal.empty() && !any) {
    st.fatal = st.nodes.empty()
                   ? "no nodes to run the job on"
                   : "no node proved the cluster secret; check --secret-file / "
                     "SALAMANDER_SECRET on the nodes and here";
  }
  auto answer = members(st);
  for (auto& rp : st.submits) {
    if (answer) {
      rp.deliver(*answer);
    } else {
      rp.deliver(answer.error());
    }
  }
  st.submits.clear();
  self->delayed_send(self, st.cfg.heartbeat_period, tick_atom_v);
}

void hello_all(self_ptr self) {
  auto& st = self->state;
  st.hello_pending = 0;
  for (auto& e : st.nodes) {
    if (e.handle) {
      self->monitor(e.handle); // a node lost during start-up is reported to the job
      ++st.hello_pending;
    }
  }
  if (st.hello_pending == 0) {
    admission_done(self);
    return;
  }
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    if (!st.nodes[n].handle) {
      continue; // unreachable at start (a resumed job's): lost, dialled again
    }
    admit(self, st.nodes[n].handle, st.nodes[n].name, [=](admission a) {
      auto& st = self->state;
      auto& e = st.nodes[n];
      if (e.answered) {
        return; // it went away first
      }
      e.answered = true;
      if (a.info) {
        e.info = std::move(*a.info);
        e.last_seen = clock::now();
      } else {
        e.refused = true;
        e.why = a.why;
        self->demonitor(e.handle.address());
        if (a.fatal && st.fatal.empty()) {
          st.fatal = a.why;
        }
      }
      if (--st.hello_pending == 0) {
        admission_done(self);
      }
    });
  }
}

// Every heartbeat period: ask each live node how it is (a hello without a
// challenge). The console's `nodes` shows when each last answered.
void heartbeat(self_ptr self) {
  auto& st = self->state;
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    if (!live(st.nodes[n])) {
      continue;
    }
    self->request(st.nodes[n].handle, st.cfg.heartbeat_timeout, hello_atom_v,
                  protocol_version, std::string{})
        .then(
            [=](node_info& info) {
              auto& e = self->state.nodes[n];
              e.last_seen = clock::now();
              e.info.memory_bytes = info.memory_bytes;
              e.info.cpu_share = info.cpu_share;
              e.info.link_bytes_per_s = info.link_bytes_per_s;
            },
            [](caf::error&) {});
  }
}

// Every ordered pair of `asked` measures its link, one probe at a time so
// that they do not share the wire, into `result->links`; then `done()`. A
// probe that fails leaves that link unmeasured. With `until`, no probe
// starts after it, and each gets at most the time left.
void probe_pairs(self_ptr self, const std::vector<size_t>& asked,
                 std::shared_ptr<cluster_profile> result,
                 std::optional<clock::time_point> until, std::function<void()> done) {
  auto pairs = std::make_shared<std::vector<std::pair<size_t, size_t>>>();
  for (auto a : asked) {
    for (auto b : asked) {
      if (a != b && self->state.nodes[b].info.profiler) {
        pairs->emplace_back(a, b);
      }
    }
  }
  auto next = std::make_shared<std::function<void(size_t)>>();
  *next = [=](size_t k) mutable {
    auto& st = self->state;
    auto timeout = st.cfg.probe_timeout;
    if (until) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*until - clock::now());
      timeout = std::min(timeout, left);
    }
    if (k == pairs->size() || timeout.count() <= 0) {
      // break the cycle (the function holds itself) without destroying
      // the closure that is running: `hold` owns it until we return
      auto hold = std::move(*next);
      done();
      return;
    }
    auto [a, b] = (*pairs)[k];
    if (!live(st.nodes[a]) || !live(st.nodes[b])) {
      (*next)(k + 1);
      return;
    }
    self->request(st.nodes[a].handle, timeout, probe_atom_v, st.nodes[b].info.profiler,
                  st.nodes[b].name)
        .then(
            [=](link_report& r) {
              result->links.push_back(
                  {static_cast<uint32_t>(a), static_cast<uint32_t>(b), std::move(r)});
              (*next)(k + 1);
            },
            [=](caf::error&) { (*next)(k + 1); });
  };
  (*next)(0);
}

// Every live node profiles the model; then every ordered pair of live nodes
// measures its link (probe_pairs).
void profile_round(self_ptr self, const std::string& model, uint32_t mbs,
                   caf::typed_response_promise<cluster_profile> rp) {
  auto& st = self->state;
  auto result = std::make_shared<cluster_profile>();
  result->devices.assign(st.nodes.size(), device_report{});
  std::vector<size_t> asked;
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    if (live(st.nodes[n])) {
      asked.push_back(n);
    }
  }
  auto probe_links = [=]() mutable {
    probe_pairs(self, asked, result, std::nullopt,
                [=]() mutable { rp.deliver(*result); });
  };
  if (asked.empty()) {
    rp.deliver(caf::make_error(errc::node_lost, "no live node to profile on"));
    return;
  }
  auto pending = std::make_shared<size_t>(asked.size());
  auto failed = std::make_shared<bool>(false);
  for (auto n : asked) {
    auto name = st.nodes[n].name;
    self->request(st.nodes[n].handle, st.cfg.profile_timeout, profile_atom_v, model, mbs)
        .then(
            [=](device_report& r) mutable {
              result->devices[n] = std::move(r);
              if (--*pending == 0 && !*failed) {
                probe_links();
              }
            },
            [=](caf::error& err) mutable {
              if (!*failed) {
                *failed = true;
                rp.deliver(caf::make_error(
                    errc::stage_failed,
                    "node " + name +
                        " could not profile the model: " + self->system().render(err)));
              }
            });
  }
}

// Commands that change something (kill, slow, repartition, pause, resume,
// replicate, checkpoint) come only from consoles that proved the cluster
// secret, when there is one; looking (status) is open.
std::optional<caf::error> console_refused(self_ptr self) {
  auto& st = self->state;
  if (st.cfg.secret.empty()) {
    return std::nullopt;
  }
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  // an admitted console, or an actor of this very process (the CLI's
  // signal handler, tests)
  if (sender && (st.consoles.count(sender) > 0 || sender.node() == self->node())) {
    return std::nullopt;
  }
  return caf::make_error(
      errc::unauthorized,
      "this job has a cluster secret: prove it first (salamander console "
      "with --secret-file or SALAMANDER_SECRET)");
}

caf::error no_job() {
  return caf::make_error(errc::not_ready, "no job is running on this cluster");
}

train_job_actor job_of(self_ptr self) {
  return caf::actor_cast<train_job_actor>(main_job(self->state));
}

// A job command from a console: refused unless the console may give it,
// else passed on to the job, which answers the console itself.
template <class R, class... Ts> caf::result<R> pass_on(self_ptr self, Ts... xs) {
  if (auto refused = console_refused(self)) {
    return *refused;
  }
  if (self->state.jobs.empty()) {
    return no_job();
  }
  return self->delegate(job_of(self), std::move(xs)...);
}

std::optional<size_t> live_node_named(const cluster_state& st, const std::string& name) {
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    if (st.nodes[n].name == name && live(st.nodes[n])) {
      return n;
    }
  }
  return std::nullopt;
}

// The node rows of a job's status, with what only the cluster knows:
// health, last heartbeat, emulation, share, memory.
void fill_rows(const cluster_state& st, job_status& s) {
  auto now = clock::now();
  for (auto& r : s.nodes) {
    for (auto& e : st.nodes) {
      if (e.name != r.name) {
        continue;
      }
      double ago = e.last_seen != clock::time_point{}
                       ? std::chrono::duration<double>(now - e.last_seen).count()
                       : -1;
      r.last_heartbeat_s = ago;
      r.health = e.refused                   ? "refused"
                 : e.lost                    ? "dead"
                 : !e.answered               ? "joining"
                 : ago > st.cfg.late_after_s ? "late"
                                             : "ok";
      r.emulation = e.info.emulation;
      r.cpu_share = e.info.cpu_share;
      if (e.port != 0) {
        r.address = (e.host.empty() ? std::string("?") : e.host) + ":" + std::to_string(e.port);
      }
      r.memory_bytes = e.info.memory_bytes;
      if (r.link_bytes_per_s <= 0) {
        r.link_bytes_per_s = e.info.link_bytes_per_s;
      }
      if (s.health == "ok" && r.health == "late") {
        s.health =
            "node " + r.name + " late (" + std::to_string(static_cast<int>(ago)) + " s)";
      }
    }
  }
}

// A node command from a console (kill node, slow node, cut node): to the node itself.
template <class... Ts>
caf::result<std::string> node_command(self_ptr self, const std::string& name, Ts... xs) {
  if (auto refused = console_refused(self)) {
    return *refused;
  }
  auto& st = self->state;
  if (auto n = live_node_named(st, name)) {
    return self->delegate(st.nodes[*n].handle, std::move(xs)...);
  }
  std::string names;
  for (auto& e : st.nodes) {
    if (live(e)) {
      names += (names.empty() ? "" : ", ") + e.name;
    }
  }
  return caf::make_error(errc::no_such_worker,
                         "no live node named " + name +
                             " (live nodes: " + (names.empty() ? "none" : names) + ")");
}

caf::result<std::string> console_proves(self_ptr self, const std::string& proof) {
  auto& st = self->state;
  auto sender = self->current_sender();
  auto it = st.console_challenges.find(sender);
  if (it == st.console_challenges.end()) {
    return caf::make_error(errc::unauthorized, "ask for a challenge first");
  }
  auto challenge = it->second;
  st.console_challenges.erase(it);
  if (!verify(st.cfg.secret, "console", "console", challenge, proof)) {
    log()->error("REFUSED a console that did not prove the cluster secret");
    return caf::make_error(errc::unauthorized,
                           "the cluster secret does not match (--secret-file or "
                           "SALAMANDER_SECRET)");
  }
  st.consoles.insert(caf::actor_cast<caf::actor_addr>(sender));
  return std::string("authenticated");
}

// The job's status, with the node rows only the cluster can fill.
caf::result<job_status> status_with_rows(self_ptr self) {
  if (self->state.jobs.empty()) {
    return no_job();
  }
  auto rp = self->make_response_promise<job_status>();
  self->request(job_of(self), tuning::status_timeout, caf::get_atom_v)
      .then(
          [=](job_status& s) mutable {
            fill_rows(self->state, s);
            rp.deliver(std::move(s));
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

// An admitted node takes (or takes back) its entry.
void welcome(self_ptr self, size_t n, const std::string& name, node_actor handle,
             node_info info, const std::string& host) {
  auto& e = self->state.nodes[n];
  e.name = name;
  e.handle = handle;
  e.host = host;
  e.port = info.port;
  e.info = std::move(info);
  e.answered = true;
  e.refused = false;
  e.lost = false;
  e.redialling = false;
  e.why.clear();
  e.last_seen = clock::now();
  self->monitor(handle);
}

void on_join(self_ptr self, node_actor handle, const std::string& name,
             caf::typed_response_promise<std::string> rp) {
  log()->debug("node {} offers itself; asking it to prove the cluster secret", name);
  admit(self, handle, name, [=](admission a) mutable {
    auto& st = self->state;
    if (!a.info) {
      if (a.code == errc::unauthorized) {
        tell_job(self, "refused", {{"node", name}, {"why", "cluster secret"}});
      }
      rp.deliver(a.error());
      return;
    }
    auto info = std::move(a.info);
    size_t n = st.nodes.size();
    for (size_t i = 0; i < st.nodes.size(); ++i) {
      if (st.nodes[i].name == name) {
        n = i;
      }
    }
    if (n < st.nodes.size() && live(st.nodes[n])) {
      // the very node offering itself again (the supervisor dialled it back
      // first, after a lost link or its own restart) is in: not an error
      auto& held = st.nodes[n].handle;
      if (held.node() == handle.node() && held.id() == handle.id()) {
        rp.deliver("node " + name + " is already in the cluster");
        return;
      }
      rp.deliver(caf::make_error(errc::bad_config,
                                 "a node named " + name + " is already running"));
      return;
    }
    if (n == st.nodes.size()) {
      st.nodes.emplace_back();
    }
    // its neighbours dial it where it says it listens
    auto host = info->host == "0.0.0.0" ? "" : info->host;
    welcome(self, n, name, handle, std::move(*info), host);
    log()->info("node {} joined the cluster", name);
    if (st.jobs.empty()) {
      rp.deliver("node " + name + " joined the cluster");
      return;
    }
    tell_joined(self, n, &rp);
  });
}

// The port accepts: connect through the middleman and admit.
void dial(self_ptr self, size_t n, std::function<void(const std::string&)> retry_later) {
  auto& st = self->state;
  auto& e = st.nodes[n];
  auto name = e.name;
  auto mm = network(self->home_system());
  self->request(mm, st.cfg.redial_timeout, caf::connect_atom_v, e.host, e.port)
      .then(
          [=](const caf::node_id&, caf::strong_actor_ptr& ptr,
              const std::set<std::string>&) {
            auto handle = caf::actor_cast<node_actor>(ptr);
            if (!handle) {
              retry_later("no node is published there");
              return;
            }
            admit(self, handle, name, [=](admission a) {
              auto& st = self->state;
              auto& e = st.nodes[n];
              if (!a.info) {
                if (a.code == errc::unauthorized && e.redials == 0) {
                  tell_job(self, "refused", {{"node", name}, {"why", "cluster secret"}});
                }
                retry_later(a.why);
                return;
              }
              if (!e.lost) {
                e.redialling = false; // (it joined by itself meanwhile)
                return;
              }
              auto host = e.host;
              welcome(self, n, name, handle, std::move(*a.info), host);
              log()->info("node {} is back: admitted again", name);
              tell_job(self, "node_back",
                       {{"node", name}, {"after_attempts", e.redials}});
              e.redials = 0;
              tell_joined(self, n, nullptr);
            });
          },
          [=](caf::error& err) { retry_later(self->system().render(err)); });
}

// A lost node that listens somewhere: dial it again (after a wait that
// doubles with every failed attempt) and admit it when it answers. First a
// non-blocking probe of its port, on a thread of its own: CAF's connect
// blocks the middleman's actor for as long as the kernel retries a SYN (two
// minutes while a link is down), and the actor system's shutdown with it.
// Only a port that accepts is dialled through the middleman.
void redial(self_ptr self, size_t n) {
  auto& st = self->state;
  auto& e = st.nodes[n];
  e.redialling = true;
  auto name = e.name;
  auto retry_later = [=](const std::string& why) {
    auto& e = self->state.nodes[n];
    e.redialling = false;
    auto wait = self->state.cfg.redial_first * (1 << std::min(e.redials, 8));
    e.next_redial = clock::now() + std::min(wait, self->state.cfg.redial_longest);
    if (e.redials++ == 0) {
      log()->info(
          "node {} does not answer yet ({}); dialling it again every {} s at most", name,
          why, self->state.cfg.redial_longest.count() / 1000.0);
    }
  };
  auto host = e.host;
  auto port = e.port;
  auto probe_timeout = std::min(st.cfg.redial_timeout, std::chrono::milliseconds(1000));
  auto prober = self->spawn<caf::detached>(
      [host, port, probe_timeout](caf::event_based_actor* p) -> caf::behavior {
        return {[=](caf::connect_atom) {
          p->quit();
          return port_accepts(host, port, probe_timeout);
        }};
      });
  self->request(prober, st.cfg.redial_timeout, caf::connect_atom_v)
      .then(
          [=](bool accepts) {
            if (!accepts) {
              retry_later("nothing accepts connections at " + host + ":" +
                          std::to_string(port));
              return;
            }
            dial(self, n, retry_later);
          },
          [=](caf::error& err) { retry_later(self->system().render(err)); });
}

// Every heartbeat period: lost nodes that listen somewhere are dialled
// again when their wait is over.
void redial_lost(self_ptr self) {
  auto& st = self->state;
  if (!self->home_system().has_middleman()) {
    return;
  }
  auto now = clock::now();
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    auto& e = st.nodes[n];
    if (e.lost && !e.refused && !e.redialling && e.port != 0 && !e.host.empty() &&
        now >= e.next_redial) {
      redial(self, n);
    }
  }
}

// A node went away (connection lost, heartbeat timeout, killed), or the
// job ended.
void on_down(self_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  auto job = std::find_if(st.jobs.begin(), st.jobs.end(),
                          [&](const caf::actor& j) { return j.address() == dm.source; });
  if (job != st.jobs.end()) {
    st.jobs.erase(job);
    return;
  }
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    auto& e = st.nodes[n];
    if (e.handle.address() != dm.source || e.refused || e.lost) {
      continue;
    }
    e.lost = true;
    e.why = exit_text(self->system(), dm.reason);
    e.redials = 0;
    e.next_redial = clock::now() + st.cfg.redial_first;
    log()->warn("node {} went away: {}", e.name, e.why);
    if (!e.answered) {
      // its hello would wait for its whole timeout (CAF does not fail
      // requests to a peer that died): admission goes on without it
      e.answered = true;
      if (st.fatal.empty()) {
        st.fatal = "node " + e.name + " went away during start-up: " + e.why;
      }
      if (--st.hello_pending == 0) {
        admission_done(self);
      }
      return;
    }
    for (auto& j : st.jobs) {
      self->send(caf::actor_cast<job_actor>(j), lost_atom_v, static_cast<uint32_t>(n),
                 e.why);
    }
    return;
  }
}

// A job attaches: it gets the members once admission is done.
caf::result<std::vector<cluster_member>> on_submit(self_ptr self, caf::actor job) {
  auto& st = self->state;
  if (std::find(st.jobs.begin(), st.jobs.end(), job) == st.jobs.end()) {
    st.jobs.push_back(job);
    self->monitor(job);
  }
  if (st.admitted) {
    auto answer = members(st);
    if (answer) {
      return *answer;
    }
    return answer.error();
  }
  auto rp = self->make_response_promise<std::vector<cluster_member>>();
  st.submits.push_back(rp);
  return rp;
}

// The nodes the supervisor starts with. A resumed job's node that did not
// answer counts as lost (the job recovers without it) and is dialled again
// like any lost node.
void take_nodes(cluster_state& st, std::vector<remote_node>& nodes) {
  for (auto& n : nodes) {
    cluster_entry e;
    e.name = n.name;
    e.handle = n.handle;
    e.host = n.host;
    e.port = n.port;
    if (!e.handle) {
      e.answered = true;
      e.lost = true;
      e.why = "unreachable when this supervisor started";
      e.next_redial = clock::now() + st.cfg.redial_first;
    }
    st.nodes.push_back(std::move(e));
  }
}

// The links among the named live nodes measured again, for at most
// `budget_ms` (a recovery's, before it plans over the survivors).
caf::result<cluster_profile>
probe_among(self_ptr self, const std::vector<std::string>& names, uint32_t budget_ms) {
  auto rp = self->make_response_promise<cluster_profile>();
  std::vector<size_t> asked;
  auto& st = self->state;
  for (size_t n = 0; n < st.nodes.size(); ++n) {
    if (live(st.nodes[n]) &&
        std::find(names.begin(), names.end(), st.nodes[n].name) != names.end()) {
      asked.push_back(n);
    }
  }
  auto result = std::make_shared<cluster_profile>();
  probe_pairs(self, asked, result, clock::now() + std::chrono::milliseconds(budget_ms),
              [=]() mutable { rp.deliver(*result); });
  return rp;
}

} // namespace

cluster_actor::behavior_type
cluster_supervisor(cluster_actor::stateful_pointer<cluster_state> self,
                   cluster_config cfg, std::vector<remote_node> nodes) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  take_nodes(st, nodes);
  if (st.cfg.secret.empty()) {
    log()->warn(
        "no cluster secret set (--secret-file or SALAMANDER_SECRET): any node that can "
        "reach this supervisor can take part");
  }
  self->set_down_handler([=](caf::down_msg& dm) { on_down(self, dm); });
  hello_all(self);
  return {
      [=](submit_atom, caf::actor job) { return on_submit(self, std::move(job)); },
      [=](profile_atom, std::string& model,
          uint32_t mbs) -> caf::result<cluster_profile> {
        auto rp = self->make_response_promise<cluster_profile>();
        profile_round(self, model, mbs, rp);
        return rp;
      },
      // a recovery's links, measured again (probe_among)
      [=](probe_atom, const std::vector<std::string>& names, uint32_t budget_ms)
          -> caf::result<cluster_profile> { return probe_among(self, names, budget_ms); },
      [=](join_atom, caf::actor node, std::string& name) -> caf::result<std::string> {
        auto rp = self->make_response_promise<std::string>();
        on_join(self, caf::actor_cast<node_actor>(node), name, rp);
        return rp;
      },
      [=](kill_atom a, std::string& name) { return node_command(self, name, a); },
      [=](slow_atom a, std::string& name, double factor) {
        return node_command(self, name, a, factor);
      },
      [=](cut_atom a, std::string& name, double seconds) {
        return node_command(self, name, a, seconds);
      },
      [=](auth_atom) -> std::string {
        // a console asks for a challenge to prove the cluster secret against
        auto c = make_challenge();
        self->state.console_challenges[self->current_sender()] = c;
        return c;
      },
      [=](auth_atom, const std::string& proof) { return console_proves(self, proof); },
      [=](capacity_atom, std::string& name, double factor) {
        if (!self->state.jobs.empty()) {
          self->send(job_of(self), capacity_atom_v, std::move(name), factor);
        }
      },
      [=](caf::get_atom) { return status_with_rows(self); },
      [=](events_atom a, uint64_t since) -> caf::result<std::vector<std::string>> {
        if (self->state.jobs.empty()) {
          return no_job();
        }
        return self->delegate(job_of(self), a, since);
      },
      // the job's commands, for consoles allowed to give them
      [=](pause_atom a) { return pass_on<std::string>(self, a); },
      [=](stop_atom a, std::string& why) {
        return pass_on<std::string>(self, a, std::move(why));
      },
      [=](resume_atom a) { return pass_on<std::string>(self, a); },
      [=](checkpoint_atom a, std::string& path) {
        return pass_on<std::string>(self, a, std::move(path));
      },
      [=](kill_atom a, uint32_t stage) { return pass_on<std::string>(self, a, stage); },
      [=](replan_atom a, std::string& balance) {
        return pass_on<std::string>(self, a, std::move(balance));
      },
      [=](replicate_atom a) { return pass_on<std::string>(self, a); },
      [=](snapshot_atom a) -> caf::result<snapshot_payload> {
        if (self->state.jobs.empty()) {
          return no_job();
        }
        return self->delegate(job_of(self), a);
      },
      [=](tick_atom) {
        heartbeat(self);
        redial_lost(self);
        self->delayed_send(self, self->state.cfg.heartbeat_period, tick_atom_v);
      },
      [=](leave_atom) {
        for (auto& j : self->state.jobs) {
          self->send(caf::actor_cast<job_actor>(j), leave_atom_v);
        }
        self->quit();
      },
  };
}

} // namespace salamander::actors
