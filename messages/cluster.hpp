// The cluster protocol's data: a node's answer to hello, its profile and
// links, a node as the console's `nodes` shows it, and what the cluster
// supervisor hands a job (its members, a profiling round's results).
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace salamander {

/// What a node's profiler measured for one model on its device.
struct device_report {
  std::string node;
  uint32_t micro_batch_size = 0;
  std::vector<double> forward_s;  ///< per layer, one micro-batch
  std::vector<double> backward_s; ///< per layer, one micro-batch
  double memory_bytes = 0;        ///< usable: the emulated cap or MemAvailable
  double link_bytes_per_s = 0;    ///< emulated rate, or 0: not known here
  double cpu_share = 1;           ///< emulated share in force, 1 on real devices
  std::string emulation;          ///< "none" on real devices
  /// Emulation: measured wall seconds per CPU second of the model's work
  /// (1/share if the quota were exact); 0 on real devices.
  double slowdown = 0;
  /// Nodes of one type (`node --device-type`, else the same processor,
  /// compute threads and emulation) are planned from one profile, the
  /// median of theirs (actors/planning/capacity.hpp). "": a type of its own.
  std::string device_type;
};

/// What a node's profiler measured of its link to another node's.
struct link_report {
  std::string from;
  std::string to;
  double latency_s = 0;   ///< one way: half the median round trip of small pings
  double bytes_per_s = 0; ///< from the median time of 256 KB transfers
  std::string method;     ///< "measured", or "measured + EMULATED rate"
};

/// A node's answer to hello.
struct node_info {
  std::string name;
  uint32_t protocol = 0;
  std::string host;
  int32_t threads = 1;
  std::string zoo_fingerprint; ///< describe("cnn").fingerprint: same zoo build?
  std::string emulation = "none";
  caf::actor replica_holder; ///< this node's
  double memory_bytes = 0;   ///< usable: the emulated cap or MemAvailable
  /// HMAC of the supervisor's challenge under the cluster secret (see
  /// actors/auth.hpp), and the node's own challenge for the supervisor.
  std::string proof;
  std::string challenge;
  double cpu_share = 1;        ///< emulated share in force now, 1 on real devices
  double link_bytes_per_s = 0; ///< emulated link rate, 0: not known
  caf::actor profiler;         ///< this node's (link probes go profiler to profiler)
  uint16_t port = 0;           ///< where it listens (0: inside the supervisor's process)
};

/// One node as the console's `nodes` shows it.
struct node_row {
  std::string name;
  std::string health;    ///< ok, late, dead, refused, joining (hello pending)
  std::string role;      ///< "stage 1", or "spare" when the plan leaves it out
  std::string emulation; ///< "none" on real devices
  double cpu_share = 1;
  /// Relative compute speed from its profile and measured stage times
  /// (1: as profiled), 0 when not profiled.
  double speed = 0;
  double memory_bytes = 0;
  double link_bytes_per_s =
      0; ///< measured to its peers (median), else emulated; 0: unknown
  double link_latency_s = 0;    ///< measured, one way (median over peers); 0: unknown
  double last_heartbeat_s = -1; ///< seconds since it last answered; -1: never
  double capacity = 1; ///< its profiler's last report: compute capacity vs the start
  std::string address; ///< HOST:PORT where it listens ("" : in the supervisor's process)
};

/// One node of the cluster as a job sees it: the cluster supervisor hands
/// every job the members it admitted (submit) and each one that joins.
struct cluster_member {
  uint32_t index = 0; ///< its place in the cluster's node table (stable)
  std::string name;
  caf::actor node; ///< a node_actor
  /// Where it listens, for its pipeline neighbours ("" / 0: not reachable
  /// that way, e.g. in the supervisor's process).
  std::string host;
  uint16_t port = 0;
  node_info info;
  bool refused = false; ///< failed admission (cluster secret): never part of a job
  bool lost = false;    ///< went away before the job attached
  std::string why;      ///< why refused or lost
};

/// A measured link from one node to another (cluster node indices).
struct link_entry {
  uint32_t from = 0;
  uint32_t to = 0;
  link_report report;
};

/// A profiling round: every live node's profile of one model (indexed by
/// node; a node that was not asked has an empty report) and the links
/// measured between them.
struct cluster_profile {
  std::vector<device_report> devices;
  std::vector<link_entry> links;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_row& x) {
  return f(caf::meta::type_name("node_row"), x.name, x.health, x.role, x.emulation,
           x.cpu_share, x.speed, x.memory_bytes, x.link_bytes_per_s, x.link_latency_s,
           x.last_heartbeat_s, x.capacity, x.address);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_info& x) {
  return f(caf::meta::type_name("node_info"), x.name, x.protocol, x.host, x.threads,
           x.zoo_fingerprint, x.emulation, x.replica_holder, x.memory_bytes, x.proof,
           x.challenge, x.cpu_share, x.link_bytes_per_s, x.profiler, x.port);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, link_report& x) {
  return f(caf::meta::type_name("link_report"), x.from, x.to, x.latency_s, x.bytes_per_s,
           x.method);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device_report& x) {
  return f(caf::meta::type_name("device_report"), x.node, x.micro_batch_size, x.forward_s,
           x.backward_s, x.memory_bytes, x.link_bytes_per_s, x.cpu_share, x.emulation,
           x.slowdown, x.device_type);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_member& x) {
  return f(caf::meta::type_name("cluster_member"), x.index, x.name, x.node, x.host,
           x.port, x.info, x.refused, x.lost, x.why);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, link_entry& x) {
  return f(caf::meta::type_name("link_entry"), x.from, x.to, x.report);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_profile& x) {
  return f(caf::meta::type_name("cluster_profile"), x.devices, x.links);
}

} // namespace salamander
