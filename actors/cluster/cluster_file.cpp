#include "actors/cluster/cluster_file.hpp"

#include "messages/errors.hpp"

#include <caf/io/middleman.hpp>
#include <toml++/toml.h>

#include <set>

namespace salamander::actors {

std::pair<std::string, uint16_t> parse_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    throw std::invalid_argument("address '" + address + "' is not HOST:PORT");
  }
  auto host = address.substr(0, colon);
  auto port_text = address.substr(colon + 1);
  size_t used = 0;
  long port = -1;
  try {
    port = std::stol(port_text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != port_text.size() || port < 0 || port > 65535) {
    throw std::invalid_argument("address '" + address + "' has no valid port (0-65535)");
  }
  return {host, static_cast<uint16_t>(port)};
}

std::vector<cluster_node> read_cluster_file(const std::string& path) {
  toml::table tbl;
  try {
    tbl = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream where;
    where << e.source().begin;
    throw std::invalid_argument("cluster file " + path + ": " + std::string(e.description()) +
                                " at " + where.str());
  }
  auto* nodes = tbl["node"].as_array();
  if (!nodes || nodes->empty()) {
    throw std::invalid_argument("cluster file " + path +
                                " names no nodes (expected [[node]] tables with name and "
                                "address)");
  }
  std::vector<cluster_node> out;
  std::set<std::string> names;
  for (size_t i = 0; i < nodes->size(); ++i) {
    auto* t = nodes->get(i)->as_table();
    std::string where = "cluster file " + path + ", node " + std::to_string(i + 1);
    if (!t) {
      throw std::invalid_argument(where + " is not a table");
    }
    auto name = (*t)["name"].value<std::string>();
    auto address = (*t)["address"].value<std::string>();
    if (!name || name->empty()) {
      throw std::invalid_argument(where + " has no name");
    }
    if (!address) {
      throw std::invalid_argument(where + " (" + *name + ") has no address");
    }
    if (!names.insert(*name).second) {
      throw std::invalid_argument(where + ": the name " + *name + " is used twice");
    }
    cluster_node n;
    n.name = *name;
    try {
      std::tie(n.host, n.port) = parse_address(*address);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + " (" + *name + "): " + e.what());
    }
    out.push_back(n);
  }
  return out;
}

caf::expected<std::vector<remote_node>> connect_nodes(caf::actor_system& sys,
                                                      const std::vector<cluster_node>& nodes) {
  std::vector<remote_node> out;
  for (auto& n : nodes) {
    auto h = sys.middleman().remote_actor<node_actor>(n.host, n.port);
    if (!h) {
      return caf::make_error(errc::unreachable, "node " + n.name + " at " + n.host + ":" +
                                                    std::to_string(n.port) +
                                                    " is unreachable: " + sys.render(h.error()));
    }
    out.push_back({n.name, *h, n.host, n.port});
  }
  return out;
}

std::vector<remote_node> local_nodes(caf::actor_system& sys, int n, int32_t threads,
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
