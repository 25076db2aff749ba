#include "actors/job/job_nodes.hpp"

#include <sstream>

namespace salamander::actors {

job_node node_of(const cluster_member& m) {
  job_node n;
  n.name = m.name;
  n.handle = caf::actor_cast<node_actor>(m.node);
  n.host = m.host;
  n.port = m.port;
  n.info = m.info;
  n.holder = caf::actor_cast<replica_holder_actor>(m.info.replica_holder);
  n.refused = m.refused;
  n.dead = m.refused || m.lost;
  return n;
}

std::vector<size_t> parse_balance(const std::string& text) {
  std::vector<size_t> out;
  if (text.empty()) {
    return out;
  }
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0) {
        throw std::invalid_argument(item);
      }
      out.push_back(static_cast<size_t>(v));
    } catch (const std::exception&) {
      throw std::invalid_argument("balance '" + text +
                                  "' is not a list of layer counts like 1,1,2");
    }
  }
  return out;
}

} // namespace salamander::actors
