// The cluster file (actors/cluster/cluster_toml.cpp): TOML a user writes,
// naming the nodes of a cluster and their addresses.
#include "actors/cluster/cluster_toml.hpp"
#include "fuzz/fuzz_support.hpp"

#include <set>
#include <stdexcept>

using namespace salamander;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto text = fuzz::as_string(data, size);
  try {
    auto nodes = actors::parse_cluster_file(text, "fuzz.toml");
    FUZZ_CHECK(!nodes.empty(), "a cluster file with no nodes was accepted");
    std::set<std::string> names;
    for (auto& n : nodes) {
      FUZZ_CHECK(!n.name.empty(), "a node with no name");
      FUZZ_CHECK(names.insert(n.name).second, "the name " + n.name + " twice");
      FUZZ_CHECK(!n.host.empty(), "node " + n.name + " has no host");
    }
  } catch (const std::invalid_argument&) {
  }
  try {
    auto [host, port] = actors::parse_address(text);
    FUZZ_CHECK(!host.empty(), "an address with no host: " + text);
    // the port is written in decimal digits, nothing else (" 80", "+80": no)
    auto port_text = text.substr(host.size() + 1);
    FUZZ_CHECK(!port_text.empty() &&
                   port_text.find_first_not_of("0123456789") == std::string::npos &&
                   std::stoul(port_text) == port,
               "'" + text + "' read as " + host + " port " + std::to_string(port));
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
