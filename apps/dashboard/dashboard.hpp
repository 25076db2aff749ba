// The live web dashboard of a job (`--dashboard HOST:PORT` on supervisor,
// train, serve, federate and split): one page, served from the binary, over
// the bounded HTTP transport (apps/http_transport.hpp), reading the job's
// common status and timeline from the cluster supervisor as the console
// does.
//
//   GET  /                      the page (HTML; its script, style and chart.js
//   GET  /app.js /app.css         are files of the binary, no CDN)
//   GET  /chart.js
//   GET  /api/session           what the page may do: {"csrf", "actions",
//                               "reads_need_secret"}
//   GET  /api/state             {"job": {...}, "nodes": [...], "sample": {...}}
//                               (apps/dashboard/state_json.hpp), at most a
//                               poll period old
//   GET  /api/history           the samples so far (the live curves)
//   GET  /api/events?since=N    the timeline: the job's events numbered N on
//   GET  /api/stream?since=N    server-sent events: `state` at every poll,
//                               `events` from event N on, as the timeline
//                               grows (at most 16 pages at once)
//   POST /api/login             the secret in, a session cookie out (reads
//                               on a non-loopback address)
//   POST /api/actions/NAME      the console's verbs, with {"args": [...]}:
//                               pause, resume, repartition [BALANCE],
//                               replicate, checkpoint PATH, kill stage N |
//                               client N | node NAME, slow node NAME FACTOR,
//                               cut node NAME SECONDS, stop
//
// Who may do what: on loopback anyone on the host may read; bound anywhere
// else, the cluster secret must be set and every route needs it (a Bearer
// header or the login cookie). Actions always need `Authorization: Bearer
// SECRET` and the page's token in `X-Salamander-Token` (a cross-site form
// can set neither); without a secret every action is 403 and the page is
// read-only. A wrong secret is logged and, past 5 a minute from one
// address, answered 429. Checkpoint paths must lie under the run's
// directory.
#pragma once

#include "apps/http_transport.hpp"
#include "messages/interfaces.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace salamander::apps {

struct dashboard_options {
  std::string host = "127.0.0.1";
  uint16_t port = 0; ///< 0: any free port
  /// HTTPS with this certificate and key (PEM); empty: plain HTTP.
  std::string tls_cert;
  std::string tls_key;
  /// The cluster secret ("" : none; actions are then refused).
  std::string secret;
  /// `checkpoint PATH` must resolve under this directory ("": the current
  /// directory).
  std::string run_dir;
  /// How often the job's status is read (the stream's pace).
  std::chrono::milliseconds poll{1000};
  int threads = 32; ///< connections served at once (each page's stream holds one)
  /// The models the job serves (its page names them); empty for training.
  std::vector<std::string> models;
};

/// "HOST:PORT" into the options (a bare PORT means loopback). Throws
/// std::invalid_argument naming the value.
void parse_dashboard_address(const std::string& text, dashboard_options& opts);

/// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost).
bool is_loopback(const std::string& host);

class dashboard {
public:
  /// Throws std::invalid_argument when bound beyond loopback without a
  /// cluster secret.
  dashboard(caf::actor_system& sys, dashboard_options opts);
  ~dashboard();
  dashboard(const dashboard&) = delete;
  dashboard& operator=(const dashboard&) = delete;

  /// The cluster supervisor whose job the page shows (until then the page
  /// says it waits for one).
  void attach(const cluster_actor& cluster);

  /// The job's status as it ended (the command has it once the job and its
  /// cluster are gone): the page and its streams show it before the end.
  void show_final(const job_status& s);

  /// The models a server holds now (after a repository load or unload).
  void set_models(std::vector<std::string> models);

  /// Binds, serves and starts polling; the port bound. Throws when it
  /// cannot bind or (HTTPS) load the certificate.
  int start();
  void stop();
  /// "http://127.0.0.1:PORT/" once started.
  std::string url() const;

  struct impl;

private:
  std::unique_ptr<impl> impl_;
};

} // namespace salamander::apps
