// `--dashboard HOST:PORT` and `--dashboard-https`, as supervisor, train,
// serve, federate and split take them: declared once, and the dashboard
// they ask for started from the command's own secret, TLS and run
// directory.
#pragma once

#include "apps/dashboard/dashboard.hpp"

#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
} // namespace CLI

namespace salamander::apps {

struct dashboard_cli {
  std::string address; ///< "": no dashboard
  bool https = false;  ///< with the --tls directory's cert.pem and key.pem
};

/// Declares --dashboard (and --dashboard-https unless the command has its
/// own HTTPS: serve's --https covers its dashboard too).
void add_dashboard(CLI::App& sub, dashboard_cli& d, bool https_flag = true);

/// What the command knows that the dashboard needs.
struct dashboard_context {
  std::string secret_file;  ///< --secret-file ("" : $SALAMANDER_SECRET)
  std::string tls_dir;      ///< --tls ("" : $SALAMANDER_TLS)
  std::string metrics_path; ///< the run's log: checkpoints go beside it
  bool https = false;       ///< serve --https: its dashboard speaks HTTPS too
  std::vector<std::string> models; ///< serve: the models it holds
};

/// The dashboard asked for, started, with "dashboard: URL" on stdout; null
/// when none was asked for. Throws std::invalid_argument or
/// std::runtime_error saying why it cannot start.
std::unique_ptr<dashboard> open_dashboard(caf::actor_system& sys, const dashboard_cli& d,
                                          const dashboard_context& ctx);

} // namespace salamander::apps
