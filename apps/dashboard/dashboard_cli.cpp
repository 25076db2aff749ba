#include "apps/dashboard/dashboard_cli.hpp"

#include "actors/cluster/auth.hpp"
#include "actors/node/tls.hpp"
#include "apps/runtime_env.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>

namespace salamander::apps {

void add_dashboard(CLI::App& sub, dashboard_cli& d, bool https_flag) {
  sub.add_option("--dashboard", d.address,
                 "HOST:PORT (or PORT) of a live web page of the job: nodes, plan, curves, "
                 "timeline, actions (loopback unless told otherwise; another address needs "
                 "the cluster secret)");
  if (https_flag) {
    sub.add_flag("--dashboard-https", d.https,
                 "the dashboard speaks HTTPS with the --tls directory's cert.pem and key.pem");
  }
}

std::unique_ptr<dashboard> open_dashboard(caf::actor_system& sys, const dashboard_cli& d,
                                          const dashboard_context& ctx) {
  if (d.address.empty()) {
    if (d.https) {
      throw std::invalid_argument("--dashboard-https needs --dashboard HOST:PORT");
    }
    return nullptr;
  }
  dashboard_options o;
  parse_dashboard_address(d.address, o);
  if (auto secret = actors::load_secret(ctx.secret_file)) {
    o.secret = *secret;
  }
  if (d.https || ctx.https) {
    auto tls = actors::checked_tls(ctx.tls_dir);
    if (!tls.enabled()) {
      throw std::invalid_argument("--dashboard-https serves with this process's TLS material: "
                                  "give --tls DIR (deploy/make-certs.sh makes one)");
    }
    o.tls_cert = tls.cert_file();
    o.tls_key = tls.key_file();
  }
  o.models = ctx.models;
  if (!ctx.metrics_path.empty()) {
    o.run_dir = std::filesystem::path(ctx.metrics_path).parent_path().string();
  }
  auto dash = std::make_unique<dashboard>(sys, o);
  dash->start();
  std::printf("dashboard: %s\n", dash->url().c_str());
  std::fflush(stdout);
  logger("dashboard")
      ->info("dashboard on {} ({})", dash->url(),
             o.secret.empty() ? "read-only: no cluster secret"
                              : "actions need the cluster secret");
  return dash;
}

} // namespace salamander::apps
