// `salamander chaos`: drive failures by hand against a running job (its
// supervisor started with --listen): crash a stage, kill a node's process,
// slow an emulated node down, or print the job's status.
#include "actors/cluster.hpp"
#include "actors/system.hpp"
#include "apps/commands.hpp"
#include "apps/runtime_env.hpp"

#include <caf/io/middleman.hpp>
#include <fmt/format.h>

namespace salamander::apps {

int run_chaos(const chaos_cli& cli) {
  auto log = logger("chaos");
  auto [host, port] = actors::parse_address(cli.supervisor);
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  auto sup = sys.middleman().remote_actor<supervisor_actor>(host, port);
  if (!sup) {
    log->error("no supervisor at {}: {}", cli.supervisor, sys.render(sup.error()));
    return 1;
  }
  auto timeout = std::chrono::seconds(10);
  int rc = 0;
  auto say = [&](std::string& reply) { std::printf("%s\n", reply.c_str()); };
  auto complain = [&](caf::error& err) {
    log->error("{}", sys.render(err));
    rc = 1;
  };
  caf::scoped_actor self{sys};
  const auto& a = cli.args;
  if (cli.command == "status") {
    self->request(*sup, timeout, caf::get_atom_v)
        .receive(
            [&](job_status& s) {
              std::printf("phase %s  epoch %lld/%lld  batch %lld/%lld  committed %lld  "
                          "%.0f samples/s  plan v%lld %s  recoveries %lld  replans %lld\n",
                          s.phase.c_str(), static_cast<long long>(s.epoch),
                          static_cast<long long>(s.epochs), static_cast<long long>(s.batch),
                          static_cast<long long>(s.batches), static_cast<long long>(s.committed),
                          s.samples_per_s, static_cast<long long>(s.plan_version), s.plan.c_str(),
                          static_cast<long long>(s.recoveries), static_cast<long long>(s.replans));
              if (!s.error.empty()) {
                std::printf("last failure: %s\n", s.error.c_str());
              }
            },
            complain);
  } else if (cli.command == "kill-stage" && a.size() == 1) {
    uint32_t stage = 0;
    try {
      stage = static_cast<uint32_t>(std::stoul(a[0]));
    } catch (const std::exception&) {
      log->error("kill-stage takes a stage number, got '{}'", a[0]);
      return 2;
    }
    self->request(*sup, timeout, kill_atom_v, stage).receive(say, complain);
  } else if (cli.command == "kill-node" && a.size() == 1) {
    self->request(*sup, timeout, kill_atom_v, a[0]).receive(say, complain);
  } else if (cli.command == "slow-node" && a.size() == 2) {
    double factor = 0;
    try {
      factor = std::stod(a[1]);
    } catch (const std::exception&) {
      log->error("slow-node takes NAME FACTOR (0 < FACTOR <= 1), got '{}'", a[1]);
      return 2;
    }
    self->request(*sup, timeout, slow_atom_v, a[0], factor).receive(say, complain);
  } else {
    log->error("unknown chaos command '{}' with {} argument(s); use: status | kill-stage N | "
               "kill-node NAME | slow-node NAME FACTOR",
               cli.command, a.size());
    return 2;
  }
  return rc;
}

} // namespace salamander::apps
