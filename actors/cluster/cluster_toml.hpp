// The cluster file (TOML), see deploy/cluster.example.toml:
//
//   [[node]]
//   name = "board-1"
//   address = "192.0.2.11:7101"
//
// Stage i runs on the i-th node listed. Torch- and CAF-free: what a user
// wrote is checked here, before anything connects.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace salamander::actors {

struct cluster_node {
  std::string name;
  std::string host;
  uint16_t port = 0;
};

/// Throws std::invalid_argument naming the file, the entry and the problem.
std::vector<cluster_node> read_cluster_file(const std::string& path);

/// The same, from the file's text; `path` names it in errors.
std::vector<cluster_node> parse_cluster_file(const std::string& text, const std::string& path);

/// Parses "HOST:PORT"; throws std::invalid_argument naming the bad value.
std::pair<std::string, uint16_t> parse_address(const std::string& address);

} // namespace salamander::actors
