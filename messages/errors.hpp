// salamander's error codes: values users can act on, carried in caf::error
// with a context string that names the node, stage or file concerned.
#pragma once

#include <caf/error.hpp>
#include <caf/sec.hpp>

#include <cstdint>
#include <string>

namespace salamander {

enum class errc : uint8_t {
  none = 0,
  unreachable,       ///< a node could not be connected to
  protocol_mismatch, ///< a node speaks another protocol version
  model_mismatch,    ///< a node describes the model differently (fingerprint)
  node_lost,         ///< a node or stage went away
  stage_failed,      ///< a stage reported an error
  timeout,           ///< no progress within the configured time
  bad_config,        ///< invalid job or cluster configuration
  unauthorized,      ///< the peer did not prove the cluster secret
  busy,              ///< serving: the request queue is full (try again later)
  job_ended,         ///< the job has finished or failed: it takes no command
  not_applicable,    ///< the command does not apply to this mode (no pipeline)
  no_such_worker,    ///< no stage, client or node of that number (name) is running
  not_ready,         ///< nothing to act on yet (no round has finished)
  io_failed,         ///< a file could not be read or written
  bad_transfer,      ///< weights in parts that do not decode (damaged or foreign)
};

std::string to_string(errc x);

} // namespace salamander

CAF_ERROR_CODE_ENUM(salamander::errc, "salamander")
