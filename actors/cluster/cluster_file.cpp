#include "actors/cluster/cluster_file.hpp"
#include "actors/node/network.hpp"

#include "messages/errors.hpp"

#include <caf/io/middleman.hpp>

namespace salamander::actors {

caf::expected<std::vector<remote_node>>
connect_nodes(caf::actor_system& sys, const std::vector<cluster_node>& nodes) {
  std::vector<remote_node> out;
  for (auto& n : nodes) {
    auto h = remote_actor<node_actor>(sys, n.host, n.port);
    if (!h) {
      return caf::make_error(errc::unreachable,
                             "node " + n.name + " at " + n.host + ":" +
                                 std::to_string(n.port) +
                                 " is unreachable: " + sys.render(h.error()));
    }
    out.push_back({n.name, *h, n.host, n.port});
  }
  return out;
}

std::vector<remote_node>
local_nodes(caf::actor_system& sys, int n, int32_t threads,
            const std::vector<emulation_config>& emulation,
            std::vector<std::shared_ptr<cpu_limiter>>* limiters) {
  std::vector<remote_node> out;
  for (int i = 0; i < n; ++i) {
    node_config cfg;
    cfg.name = "local" + std::to_string(i);
    cfg.host = "embedded";
    cfg.threads = threads;
    if (static_cast<size_t>(i) < emulation.size()) {
      cfg.emulation.config = emulation[static_cast<size_t>(i)];
      cfg.emulation.config.force_dilation = true;
      cfg.emulation.limiter = std::make_shared<cpu_limiter>(cfg.emulation.config);
      if (limiters) {
        limiters->push_back(cfg.emulation.limiter);
      }
    }
    out.push_back({cfg.name, sys.spawn(node, cfg)});
  }
  return out;
}

} // namespace salamander::actors
