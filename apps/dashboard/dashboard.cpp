// The dashboard's server (see dashboard.hpp): one worker thread talks to the
// cluster supervisor (status and timeline at every poll, and the actions),
// the transport's threads answer from what it last read.
#include "apps/dashboard/dashboard.hpp"

#include "actors/cluster/auth.hpp"
#include "actors/cluster/cluster_toml.hpp"
#include "actors/logging.hpp"
#include "apps/console_verbs.hpp"
#include "apps/dashboard/assets.hpp"
#include "apps/dashboard/state_json.hpp"
#include "apps/http_json.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>

namespace salamander::apps {

namespace {

using json = nlohmann::json;
using clock = std::chrono::steady_clock;

constexpr size_t history_max = 7200;     ///< samples kept (2 h at 1 Hz)
constexpr size_t events_max = 4096;      ///< timeline entries kept
constexpr size_t action_body_max = 4096; ///< bytes of an action's body
constexpr size_t sessions_max = 256;
constexpr int wrong_secrets_per_minute = 5;
constexpr size_t wrong_addresses_max = 1024; ///< addresses whose wrong secrets are counted
constexpr auto session_life = std::chrono::hours(12);
constexpr int streams_max = 16; ///< open pages (each stream holds a handling thread)
constexpr uint64_t requests_per_actor = 1000; ///< then the worker's actor is made anew
constexpr auto ask_timeout = std::chrono::seconds(5);

auto log() {
  return actors::subsystem_log("dashboard");
}

constexpr auto reply = json_reply;
constexpr auto error = json_error;

using actors::same_secret;

std::string bearer_of(const httplib::Request& req) {
  return actors::bearer_token(req.get_header_value("Authorization"));
}

std::string cookie_of(const httplib::Request& req, const std::string& name) {
  auto all = req.get_header_value("Cookie");
  size_t at = 0;
  while (at < all.size()) {
    auto end = all.find(';', at);
    auto part = all.substr(at, end == std::string::npos ? std::string::npos : end - at);
    auto eq = part.find('=');
    if (eq != std::string::npos) {
      auto key = part.substr(0, eq);
      key.erase(0, key.find_first_not_of(' '));
      if (key == name) {
        return part.substr(eq + 1);
      }
    }
    if (end == std::string::npos) {
      break;
    }
    at = end + 1;
  }
  return {};
}

// The actions the page offers: the console's verbs, and stop.
const std::vector<std::string>& action_names() {
  static const std::vector<std::string> names{"pause",      "resume", "repartition",
                                              "replicate",  "checkpoint", "kill",
                                              "slow",       "cut",        "stop"};
  return names;
}

// An action's words as the console would take them; throws
// std::invalid_argument saying what is wrong with the body.
std::vector<std::string> action_args(const std::string& body) {
  if (body.size() > action_body_max) {
    throw std::invalid_argument(
        fmt::format("the body is {} bytes; an action's is at most {}", body.size(),
                    action_body_max));
  }
  std::vector<std::string> out;
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) {
    return out;
  }
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    throw std::invalid_argument(R"(the body must be a JSON object: {"args": ["stage", "1"]})");
  }
  if (!j.contains("args")) {
    return out;
  }
  if (!j["args"].is_array()) {
    throw std::invalid_argument("\"args\" must be an array of words");
  }
  for (auto& a : j["args"]) {
    std::string w;
    if (a.is_string()) {
      w = a.get<std::string>();
    } else if (a.is_number()) {
      w = a.dump();
    } else {
      throw std::invalid_argument("each of \"args\" must be a string or a number");
    }
    for (unsigned char ch : w) {
      if (ch < 0x20 || ch == ';' || ch == '\'' || ch == '"' || ch == 0x7f) {
        throw std::invalid_argument("an argument may not hold ';', quotes or control "
                                    "characters: " + json(w).dump());
      }
    }
    if (w.empty()) {
      throw std::invalid_argument("an argument is empty");
    }
    out.push_back(std::move(w));
  }
  return out;
}

} // namespace

bool is_loopback(const std::string& host) {
  if (host == "localhost") {
    return true;
  }
  auto h = host.size() > 2 && host.front() == '[' && host.back() == ']'
               ? host.substr(1, host.size() - 2)
               : host;
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127; // 127.0.0.0/8
  }
  in6_addr v6{};
  return ::inet_pton(AF_INET6, h.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

void parse_dashboard_address(const std::string& text, dashboard_options& opts) {
  if (text.find(':') == std::string::npos) {
    try {
      size_t used = 0;
      auto port = std::stoul(text, &used);
      if (used != text.size() || port > 65535) {
        throw std::invalid_argument(text);
      }
      opts.port = static_cast<uint16_t>(port);
      return;
    } catch (const std::exception&) {
      throw std::invalid_argument("--dashboard: expected HOST:PORT or PORT, got '" + text +
                                  "'");
    }
  }
  auto [host, port] = actors::parse_address(text);
  opts.host = host;
  opts.port = port;
}

struct dashboard::impl {
  caf::actor_system& sys;
  dashboard_options opts;
  http_server server;
  const std::string csrf = actors::make_challenge();
  const bool reads_need_secret;
  int port = 0;

  std::mutex mutex; ///< guards everything below
  std::condition_variable wake_worker;
  std::condition_variable new_state;
  cluster_actor cluster;
  bool stopping = false;
  uint64_t version = 0;  ///< polls answered so far
  std::string state_text = R"({"job": null, "nodes": [], "waiting": "for the job to start"})";
  std::deque<json> history;
  std::deque<json> events;
  std::vector<std::string> models; ///< what a server holds now (opts.models at first)
  uint64_t events_next = 0; ///< the job's number of the next event to read
  std::deque<std::function<void(caf::scoped_actor&)>> tasks;
  std::map<std::string, clock::time_point> sessions;
  std::map<std::string, std::deque<clock::time_point>> wrong_secrets;
  std::atomic<int> streams{0}; ///< pages reading the stream now
  std::thread worker;

  impl(caf::actor_system& s, dashboard_options o)
      : sys(s), opts(std::move(o)), server(transport_options(opts), refuse),
        reads_need_secret(!is_loopback(opts.host)), models(opts.models) {
    if (reads_need_secret && opts.secret.empty()) {
      throw std::invalid_argument(
          "--dashboard on " + opts.host +
          " (not loopback) needs the cluster secret (--secret-file or SALAMANDER_SECRET): "
          "without it anyone on the network could read the job and act on it");
    }
    if (reads_need_secret && opts.tls_cert.empty()) {
      throw std::invalid_argument(
          "--dashboard on " + opts.host +
          " (not loopback) needs --dashboard-https (the --tls directory's certificate; "
          "deploy/make-certs.sh --host NAME makes one): the cluster secret must not cross "
          "the network in clear. Or keep it on loopback and use an SSH tunnel");
    }
  }

  static http_transport_options transport_options(const dashboard_options& o) {
    http_transport_options t;
    t.host = o.host;
    t.port = o.port;
    t.max_body_bytes = size_t{1} << 20;
    t.threads = o.threads;
    t.tls_cert = o.tls_cert;
    t.tls_key = o.tls_key;
    return t;
  }

  static void refuse(httplib::Response& res, int code, const std::string& why) {
    error(res, code, why);
  }

  // ---- the worker: the one thread that talks to the cluster

  void work() {
    // CAF 0.17 delivers a request's timeout message even after the answer
    // came; a blocking actor keeps it in its mailbox for ever. A fresh actor
    // every `requests_per_actor` polls keeps the mailbox small on long jobs.
    auto self = std::make_unique<caf::scoped_actor>(sys);
    uint64_t used = 0;
    bool authenticated = false;
    auto next_poll = clock::now();
    for (;;) {
      if (++used > requests_per_actor) {
        self = std::make_unique<caf::scoped_actor>(sys);
        used = 0;
        authenticated = false;
      }
      std::deque<std::function<void(caf::scoped_actor&)>> todo;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake_worker.wait_until(lock, next_poll, [&] { return stopping || !tasks.empty(); });
        if (stopping) {
          break;
        }
        todo.swap(tasks);
      }
      for (auto& t : todo) {
        if (!authenticated && !opts.secret.empty()) {
          authenticated = authenticate(*self);
        }
        t(*self);
      }
      if (clock::now() >= next_poll) {
        poll(*self);
        next_poll = clock::now() + opts.poll;
      }
    }
    // answer what still waits, so no handler blocks the server's stop
    std::deque<std::function<void(caf::scoped_actor&)>> left;
    {
      std::lock_guard<std::mutex> lock(mutex);
      left.swap(tasks);
    }
    for (auto& t : left) {
      if (!authenticated && !opts.secret.empty()) {
        authenticated = authenticate(*self);
      }
      t(*self);
    }
  }

  std::vector<std::string> models_now() {
    std::lock_guard<std::mutex> lock(mutex);
    return models;
  }

  /// The job's last status (its command has it when the job ended and its
  /// cluster is gone): the page shows it, and the streams send it before
  /// they close.
  void show_final(const job_status& s) {
    auto state = state_json(s);
    state["models"] = models_now();
    auto text = state.dump(-1, ' ', false, json::error_handler_t::replace);
    std::lock_guard<std::mutex> lock(mutex);
    history.push_back(std::move(state["sample"]));
    state_text = std::move(text);
    ++version;
    new_state.notify_all();
  }

  cluster_actor current_cluster() {
    std::lock_guard<std::mutex> lock(mutex);
    return cluster;
  }

  // Proves the cluster secret for the actions, as a console does.
  bool authenticate(caf::scoped_actor& self) {
    auto c = current_cluster();
    if (!c) {
      return false;
    }
    bool ok = false;
    self->request(c, ask_timeout, auth_atom_v)
        .receive(
            [&](std::string& challenge) {
              self->request(c, ask_timeout, auth_atom_v,
                            actors::prove(opts.secret, "console", "console", challenge))
                  .receive([&](std::string&) { ok = true; },
                           [&](caf::error& e) {
                             log()->error("the dashboard could not prove the secret: {}",
                                          error_text(sys, e));
                           });
            },
            [&](caf::error&) {});
    return ok;
  }

  void poll(caf::scoped_actor& self) {
    auto c = current_cluster();
    if (!c) {
      return;
    }
    std::optional<job_status> status;
    std::string why;
    self->request(c, ask_timeout, caf::get_atom_v)
        .receive([&](job_status& s) { status = std::move(s); },
                 [&](caf::error& e) { why = error_text(sys, e); });
    std::vector<std::string> lines;
    if (status) {
      uint64_t since;
      {
        std::lock_guard<std::mutex> lock(mutex);
        since = events_next;
      }
      self->request(c, ask_timeout, events_atom_v, since)
          .receive([&](std::vector<std::string>& l) { lines = std::move(l); },
                   [&](caf::error&) {});
    }
    // the JSON is made before the lock: readers wait only for the swap
    json state;
    std::string text;
    if (status) {
      state = state_json(*status);
      state["models"] = models_now();
      text = state.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (status) {
      history.push_back(std::move(state["sample"]));
      if (history.size() > history_max) {
        history.pop_front();
      }
      state_text = std::move(text);
    } else if (version > 0) {
      // the job or its supervisor went away: the last state stays, marked
      auto state = json::parse(state_text, nullptr, false);
      if (state.is_object()) {
        state["stale"] = why;
        state_text = state.dump(-1, ' ', false, json::error_handler_t::replace);
      }
    }
    for (auto& l : lines) {
      auto e = json::parse(l, nullptr, false);
      if (!e.is_object()) {
        continue;
      }
      events_next = std::max(events_next, e.value("seq", uint64_t{0}) + 1);
      events.push_back(std::move(e));
      if (events.size() > events_max) {
        events.pop_front();
      }
    }
    ++version;
    new_state.notify_all();
  }

  /// Runs `task` on the worker and waits for it (an action); none once the
  /// dashboard stops (the worker may be gone: nothing would run it).
  template <class R> std::optional<R> on_worker(std::function<R(caf::scoped_actor&)> task) {
    auto done = std::make_shared<std::promise<R>>();
    auto answer = done->get_future();
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping) {
        return std::nullopt;
      }
      tasks.push_back([task = std::move(task), done](caf::scoped_actor& self) {
        done->set_value(task(self));
      });
    }
    wake_worker.notify_one();
    return answer.get();
  }

  // ---- who may do what

  bool rate_limited(const std::string& addr) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = wrong_secrets.find(addr);
    if (it == wrong_secrets.end()) {
      return false;
    }
    auto& q = it->second;
    auto now = clock::now();
    while (!q.empty() && now - q.front() > std::chrono::minutes(1)) {
      q.pop_front();
    }
    if (q.empty()) {
      wrong_secrets.erase(it);
      return false;
    }
    return q.size() >= static_cast<size_t>(wrong_secrets_per_minute);
  }

  /// Whether the request's address is past its wrong secrets for the
  /// minute; then it is answered 429 here.
  bool answered_rate_limit(const httplib::Request& req, httplib::Response& res) {
    if (!rate_limited(req.remote_addr)) {
      return false;
    }
    res.set_header("Retry-After", "60");
    error(res, 429, "too many wrong secrets from this address; wait a minute");
    return true;
  }

  void wrong_secret(const httplib::Request& req, const std::string& route) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      // addresses whose minute has passed go; past the cap, the oldest
      auto now = clock::now();
      for (auto it = wrong_secrets.begin(); it != wrong_secrets.end();) {
        it = it->second.empty() || now - it->second.back() > std::chrono::minutes(1)
                 ? wrong_secrets.erase(it)
                 : std::next(it);
      }
      if (wrong_secrets.size() >= wrong_addresses_max && !wrong_secrets.count(req.remote_addr)) {
        auto oldest = wrong_secrets.begin();
        for (auto it = wrong_secrets.begin(); it != wrong_secrets.end(); ++it) {
          if (it->second.back() < oldest->second.back()) {
            oldest = it;
          }
        }
        wrong_secrets.erase(oldest);
      }
      wrong_secrets[req.remote_addr].push_back(clock::now());
    }
    log()->warn("dashboard: a wrong cluster secret from {} ({})", req.remote_addr, route);
  }

  /// Whether `host` (a request's Host header) names this loopback
  /// dashboard: a loopback name or address with the bound port.
  bool host_allowed(const std::string& host) const {
    auto colon = host.rfind(':');
    if (colon == std::string::npos || host.substr(colon + 1) != std::to_string(port)) {
      return false;
    }
    auto name = host.substr(0, colon);
    return name == "localhost" || name == opts.host || is_loopback(name);
  }

  /// Whether a read may go on; answers 401/429 itself when not.
  bool may_read(const httplib::Request& req, httplib::Response& res) {
    if (!reads_need_secret) {
      return true;
    }
    if (auto token = cookie_of(req, "salamander_session"); !token.empty()) {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = sessions.find(token);
      if (it != sessions.end() && clock::now() - it->second < session_life) {
        return true;
      }
    }
    if (answered_rate_limit(req, res)) {
      return false;
    }
    auto given = bearer_of(req);
    if (!given.empty() && same_secret(given, opts.secret)) {
      return true;
    }
    if (!given.empty()) {
      wrong_secret(req, req.path);
    }
    error(res, 401,
          "this dashboard listens beyond loopback: every route needs the cluster secret "
          "(Authorization: Bearer SECRET, or POST /api/login)");
    return false;
  }

  /// Whether an action may go on; answers 403/429 itself when not.
  bool may_act(const httplib::Request& req, httplib::Response& res) {
    if (opts.secret.empty()) {
      error(res, 403,
            "this cluster has no secret, so the dashboard is read-only (start the job with "
            "--secret-file or SALAMANDER_SECRET to allow actions)");
      return false;
    }
    if (answered_rate_limit(req, res)) {
      return false;
    }
    auto given = bearer_of(req);
    if (given.empty()) {
      error(res, 403, "an action needs the cluster secret: Authorization: Bearer SECRET");
      return false;
    }
    if (!same_secret(given, opts.secret)) {
      wrong_secret(req, req.path);
      error(res, 403, "the cluster secret does not match");
      return false;
    }
    if (!same_secret(req.get_header_value("X-Salamander-Token"), csrf)) {
      error(res, 403,
            "an action needs the page's token in X-Salamander-Token (GET /api/session)");
      return false;
    }
    auto origin = req.get_header_value("Origin");
    if (!origin.empty()) {
      auto host = req.get_header_value("Host");
      if (origin != "http://" + host && origin != "https://" + host) {
        error(res, 403, "a cross-site action (Origin " + origin + ") is refused");
        return false;
      }
    }
    return true;
  }

  // ---- the actions

  // `checkpoint PATH`: the path, absolute, if it lies under the run's
  // directory; throws std::invalid_argument saying where it must be.
  std::string checkpoint_path(const std::string& given) {
    namespace fs = std::filesystem;
    auto base = fs::weakly_canonical(fs::absolute(opts.run_dir.empty() ? "." : opts.run_dir));
    fs::path p = given;
    auto full = fs::weakly_canonical(p.is_absolute() ? p : base / p);
    auto b = base.string();
    auto f = full.string();
    if (f.size() <= b.size() || f.compare(0, b.size(), b) != 0 || f[b.size()] != '/') {
      throw std::invalid_argument("a checkpoint from the dashboard is written under the run's "
                                  "directory " + b + "; " + given + " is not");
    }
    return f;
  }

  // The console line of an action (name and words), parsed as the console
  // parses it; throws std::invalid_argument saying what is wrong.
  console_command action_command(const std::string& name, std::vector<std::string> args) {
    if (name == "checkpoint") {
      if (!args.empty() && args[0] == "save") {
        args.erase(args.begin());
      }
      if (args.size() != 1) {
        throw std::invalid_argument("checkpoint takes one PATH (under the run's directory)");
      }
      args = {"save", checkpoint_path(args[0])};
    }
    std::string line = name;
    for (auto& a : args) {
      line += a.find(' ') != std::string::npos ? " '" + a + "'" : " " + a;
    }
    auto parsed = parse_console(line);
    if (!parsed.error.empty()) {
      throw std::invalid_argument(parsed.error);
    }
    if (parsed.commands.size() != 1) {
      throw std::invalid_argument("one action at a time");
    }
    return parsed.commands[0];
  }

  struct outcome {
    int code = 200;
    std::string text;
  };

  outcome act(const std::string& name, const std::vector<std::string>& args) {
    std::optional<console_command> command;
    if (name != "stop") {
      command = action_command(name, args); // throws: a 400
    } else if (!args.empty()) {
      throw std::invalid_argument("stop takes no arguments");
    }
    auto out = on_worker<outcome>([this, name, command](caf::scoped_actor& self) {
      auto c = current_cluster();
      if (!c) {
        return outcome{503, "no job yet"};
      }
      outcome out;
      auto ask = [&](auto&&... xs) {
        self->request(c, ask_timeout, xs...)
            .receive([&](std::string& text) { out = {200, text}; },
                     [&](caf::error& e) {
                       out = {e == caf::sec::request_timeout ? 504 : 409,
                              error_text(sys, e)};
                     });
        return 0;
      };
      if (!command) {
        ask(stop_atom_v, std::string("the dashboard"));
      } else if (!send_command(*command, ask)) {
        out = {400, "not an action: " + name};
      }
      log()->info("dashboard action {}: {} ({})", command ? command->text : name, out.text,
                  out.code);
      return out;
    });
    return out ? *out : outcome{503, "the dashboard is stopping"};
  }

  void on_action(const httplib::Request& req, httplib::Response& res) {
    auto name = req.matches[1].str();
    auto& names = action_names();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      error(res, 404, "no action " + name + " (the actions: pause, resume, repartition, "
                      "replicate, checkpoint, kill, slow, stop)");
      return;
    }
    if (!may_act(req, res)) {
      return;
    }
    outcome out;
    try {
      out = act(name, action_args(req.body));
    } catch (const std::invalid_argument& e) {
      error(res, 400, e.what());
      return;
    }
    if (out.code == 200) {
      reply(res, 200, json{{"ok", true}, {"answer", out.text}});
    } else {
      error(res, out.code, out.text);
    }
  }

  // ---- reads

  void on_login(const httplib::Request& req, httplib::Response& res) {
    if (opts.secret.empty()) {
      reply(res, 200, json{{"ok", true}, {"note", "this cluster has no secret"}});
      return;
    }
    if (answered_rate_limit(req, res)) {
      return;
    }
    auto given = bearer_of(req);
    if (!same_secret(given, opts.secret)) {
      wrong_secret(req, "/api/login");
      error(res, 403, "the cluster secret does not match");
      return;
    }
    auto token = actors::make_challenge() + actors::make_challenge();
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (sessions.size() >= sessions_max) {
        auto oldest = sessions.begin();
        for (auto it = sessions.begin(); it != sessions.end(); ++it) {
          if (it->second < oldest->second) {
            oldest = it;
          }
        }
        sessions.erase(oldest);
      }
      sessions[token] = clock::now();
    }
    res.set_header("Set-Cookie", "salamander_session=" + token +
                                     "; Path=/; HttpOnly; SameSite=Strict" +
                                     (opts.tls_cert.empty() ? "" : "; Secure"));
    reply(res, 200, json{{"ok", true}});
  }

  void on_events(const httplib::Request& req, httplib::Response& res) {
    uint64_t since = 0;
    if (req.has_param("since")) {
      auto text = req.get_param_value("since");
      try {
        size_t used = 0;
        since = std::stoull(text, &used);
        if (used != text.size()) {
          throw std::invalid_argument(text);
        }
      } catch (const std::exception&) {
        error(res, 400, "since must be an event number (0, 1, ...), got '" + text + "'");
        return;
      }
    }
    json list;
    uint64_t next;
    {
      std::lock_guard<std::mutex> lock(mutex);
      list = events_since(since);
      next = events_next;
    }
    reply(res, 200, json{{"events", std::move(list)}, {"next", next}});
  }

  json events_since(uint64_t since) const {
    json out = json::array();
    for (auto& e : events) {
      if (e.value("seq", uint64_t{0}) >= since) {
        out.push_back(e);
      }
    }
    return out;
  }

  // The stream: `state` at every poll, `events` with what is new; a
  // comment line now and then keeps idle proxies from cutting it.
  // The stream: `state` at every poll, `events` with what is new since the
  // event number the page asks from (?since=N: what /api/events said was
  // next); a comment line now and then keeps idle proxies from cutting it.
  // When the dashboard stops, a state not yet sent goes first.
  void on_stream(const httplib::Request& req, httplib::Response& res) {
    if (++streams > streams_max) {
      --streams;
      res.set_header("Retry-After", "5");
      error(res, 503, "too many pages are open (" + std::to_string(streams_max) +
                          "); close one and reload");
      return;
    }
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Accel-Buffering", "no");
    auto seen = std::make_shared<uint64_t>(0);
    uint64_t since = 0;
    try {
      since = req.has_param("since") ? std::stoull(req.get_param_value("since")) : 0;
    } catch (const std::exception&) {
    }
    auto events_seen = std::make_shared<uint64_t>(since);
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, seen, events_seen](size_t, httplib::DataSink& sink) {
          std::string state;
          json news;
          bool last = false;
          {
            std::unique_lock<std::mutex> lock(mutex);
            new_state.wait_for(lock, std::chrono::seconds(15),
                               [&] { return stopping || version != *seen; });
            last = stopping;
            if (version != *seen) {
              *seen = version;
              state = state_text;
              if (events_next > *events_seen) {
                news = events_since(*events_seen);
                *events_seen = events_next;
              }
            }
          }
          std::string out;
          if (!state.empty()) {
            out = "event: state\ndata: " + state + "\n\n";
            if (!news.is_null()) {
              out += "event: events\ndata: " +
                     news.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
            }
          } else if (!last) {
            out = ": idle\n\n";
          }
          if (!out.empty() && !sink.write(out.data(), out.size())) {
            return false;
          }
          if (last) {
            sink.done();
          }
          return true;
        },
        [this](bool) { --streams; });
  }

  void asset(httplib::Server& http, const std::string& path, const std::string& type,
             const std::string_view& body) {
    http.Get(path, [type, body](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-cache");
      res.set_content(body.data(), body.size(), type.c_str());
    });
  }

  void routes() {
    auto& http = server.handlers();
    http.set_default_headers(
        {{"Content-Security-Policy",
          "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
          "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
         {"X-Content-Type-Options", "nosniff"},
         {"X-Frame-Options", "DENY"},
         {"Referrer-Policy", "no-referrer"}});
    // on loopback, only a request for a loopback name is answered: a page
    // elsewhere whose name was rebound to 127.0.0.1 (DNS rebinding) could
    // read the job otherwise, as a cross-site request cannot
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (reads_need_secret || host_allowed(req.get_header_value("Host"))) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      error(res, 403,
            "this dashboard answers on loopback to 127.0.0.1, localhost or [::1] only (Host " +
                req.get_header_value("Host") + ")");
      return httplib::Server::HandlerResponse::Handled;
    });
    asset(http, "/", "text/html; charset=utf-8", dashboard_assets::page());
    asset(http, "/index.html", "text/html; charset=utf-8", dashboard_assets::page());
    asset(http, "/app.js", "text/javascript; charset=utf-8", dashboard_assets::script());
    asset(http, "/app.css", "text/css; charset=utf-8", dashboard_assets::style());
    asset(http, "/chart.js", "text/javascript; charset=utf-8", dashboard_assets::chart());
    http.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) {
      res.status = 204;
    });
    http.Get("/api/session", [this](const httplib::Request&, httplib::Response& res) {
      reply(res, 200,
            json{{"csrf", csrf},
                 {"actions", !opts.secret.empty()},
                 {"action_names", action_names()},
                 {"reads_need_secret", reads_need_secret}});
    });
    http.Post("/api/login", [this](const httplib::Request& req, httplib::Response& res) {
      on_login(req, res);
    });
    http.Get("/api/state", [this](const httplib::Request& req, httplib::Response& res) {
      if (may_read(req, res)) {
        std::lock_guard<std::mutex> lock(mutex);
        res.set_header("Cache-Control", "no-store");
        res.set_content(state_text, "application/json");
      }
    });
    http.Get("/api/history", [this](const httplib::Request& req, httplib::Response& res) {
      if (may_read(req, res)) {
        std::deque<json> copy;
        {
          std::lock_guard<std::mutex> lock(mutex);
          copy = history;
        }
        reply(res, 200, json{{"samples", json(std::move(copy))}});
      }
    });
    http.Get("/api/events", [this](const httplib::Request& req, httplib::Response& res) {
      if (may_read(req, res)) {
        on_events(req, res);
      }
    });
    http.Get("/api/stream", [this](const httplib::Request& req, httplib::Response& res) {
      if (may_read(req, res)) {
        on_stream(req, res);
      }
    });
    http.Post(R"(/api/actions/([^/]+))",
              [this](const httplib::Request& req, httplib::Response& res) {
                on_action(req, res);
              });
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (res.status == 404) {
        error(res, 404, "no such path: " + req.method + " " + req.path);
      } else if (res.status == 413) {
        error(res, 413, "the body is too large");
      } else if (res.status == 405) {
        error(res, 405, "method not allowed: " + req.method + " " + req.path);
      } else if (res.body.empty()) {
        error(res, res.status, "HTTP " + std::to_string(res.status));
      }
    });
    answer_exceptions_as_json(http);
  }
};

dashboard::dashboard(caf::actor_system& sys, dashboard_options opts)
    : impl_(std::make_unique<impl>(sys, std::move(opts))) {
  impl_->routes();
}

dashboard::~dashboard() {
  stop();
}

void dashboard::attach(const cluster_actor& cluster) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->cluster && impl_->cluster != cluster) {
      // another job: its events are numbered from 0 again
      impl_->events.clear();
      impl_->events_next = 0;
      impl_->history.clear();
    }
    impl_->cluster = cluster;
  }
  impl_->wake_worker.notify_one();
}

void dashboard::show_final(const job_status& s) {
  impl_->show_final(s);
}

void dashboard::set_models(std::vector<std::string> models) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->models = std::move(models);
}

int dashboard::start() {
  impl_->port = impl_->server.start();
  impl_->worker = std::thread([this] { impl_->work(); });
  return impl_->port;
}

void dashboard::stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->stopping) {
      return;
    }
    impl_->stopping = true;
  }
  impl_->wake_worker.notify_all();
  impl_->new_state.notify_all();
  if (impl_->worker.joinable()) {
    impl_->worker.join();
  }
  impl_->server.stop();
}

std::string dashboard::url() const {
  auto host = impl_->opts.host;
  if (host == "0.0.0.0" || host.empty()) {
    host = "127.0.0.1";
  }
  if (host.find(':') != std::string::npos && host.front() != '[') {
    host = "[" + host + "]";
  }
  return fmt::format("{}://{}:{}/", impl_->opts.tls_cert.empty() ? "http" : "https", host,
                     impl_->port);
}

} // namespace salamander::apps
