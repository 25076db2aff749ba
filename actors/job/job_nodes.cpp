#include "actors/job/job_nodes.hpp"
#include "messages/errors.hpp"

#include <algorithm>
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

node_row basic_row(const job_node& node, size_t n, const std::vector<size_t>& plan_nodes,
                   size_t staged) {
  node_row r;
  r.name = node.name;
  r.health = node.refused ? "refused" : node.dead ? "dead" : "ok";
  r.role = "spare";
  for (size_t i = 0; i < plan_nodes.size() && i < staged; ++i) {
    if (plan_nodes[i] == n) {
      r.role = "stage " + std::to_string(i);
    }
  }
  r.emulation = node.info.emulation;
  r.cpu_share = node.info.cpu_share;
  r.memory_bytes = node.info.memory_bytes;
  r.link_bytes_per_s = node.info.link_bytes_per_s;
  return r;
}

joined take_joined(std::vector<job_node>& nodes, std::vector<std::string>& dead_names,
                   uint32_t n, const cluster_member& m) {
  if (n == nodes.size()) {
    nodes.push_back(node_of(m));
    return joined::new_node;
  }
  if (n > nodes.size()) {
    return joined::unknown;
  }
  dead_names.erase(std::remove(dead_names.begin(), dead_names.end(), m.name),
                   dead_names.end());
  nodes[n] = node_of(m);
  return joined::back;
}

std::vector<std::tuple<std::string, std::string, bool>>
record_dials(std::set<std::pair<size_t, size_t>>& peered,
             const std::vector<uint64_t>& flat,
             const std::vector<std::pair<size_t, size_t>>& dials,
             const std::vector<job_node>& nodes) {
  for (size_t k = 0; k + 1 < flat.size(); k += 2) {
    peered.insert({flat[k], flat[k + 1]});
  }
  std::vector<std::tuple<std::string, std::string, bool>> out;
  for (auto [a, b] : dials) {
    out.emplace_back(nodes[a].name, nodes[b].name, peered.count({a, b}) > 0);
  }
  return out;
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

caf::expected<joined> accept_joined(std::vector<job_node>& nodes,
                                    std::vector<std::string>& dead_names, uint32_t n,
                                    const cluster_member& m) {
  auto how = take_joined(nodes, dead_names, n, m);
  if (how == joined::unknown) {
    return caf::make_error(errc::no_such_worker,
                           "node index " + std::to_string(n) + " is unknown");
  }
  return how;
}



} // namespace salamander::actors
