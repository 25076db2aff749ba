// What `salamander serve` reports in the schemas stock tools read: Triton's
// statistics extension (GET /v2/models[/NAME[/versions/V]]/stats), its model
// configuration extension (GET /v2/models/NAME/config) and its Prometheus
// series (nv_inference_*), from the serving job's status and the HTTP
// front's own counters. No LibTorch, no HTTP: the front serves these.
#pragma once

#include "messages/job.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace salamander::apps {

/// A count and the time it took, summed (Triton's {"count", "ns"}).
struct timed_count {
  int64_t count = 0;
  int64_t ns = 0;
  void add(int64_t took_ns) {
    ++count;
    ns += took_ns;
  }
};

/// What the HTTP front measures itself: whole requests, and the time it
/// spends reading inputs and writing outputs.
struct front_counters {
  timed_count success;        ///< infer requests answered 200: arrival -> answer
  timed_count failure;        ///< answered with an error
  timed_count compute_input;  ///< reading the body into the model's input
  timed_count compute_output; ///< writing the answer's body
  int64_t pending = 0;        ///< infer requests arrived and not yet answered
};

/// The model as the configuration extension describes it.
struct served_model {
  std::string name;
  std::string version = "1";
  std::string spec;                 ///< the model's canonical text
  std::vector<int64_t> input_dims;  ///< one row's shape
  std::vector<int64_t> output_dims; ///< one row's
  int64_t max_batch = 0;            ///< rows per micro-batch at most
  bool batching = true;
  int64_t batch_delay_us = 0;
};

/// The protocol's extensions served, by Triton's names (GET /v2, gRPC's
/// ServerMetadata).
std::vector<std::string> protocol_extensions();

/// One entry of "model_stats".
nlohmann::json model_stats(const served_model& m, const serving_status& s,
                           const front_counters& front);

/// The model configuration, with the pipeline's plan now (`salamander`).
nlohmann::json model_config(const served_model& m, const job_status& s);

/// Triton's series for the model (counters and the pending gauge), with
/// `model` and `version` labels, in Prometheus' text format.
std::string triton_metrics(const served_model& m, const serving_status& s,
                           const front_counters& front);

/// Several Prometheus texts as one: each family's HELP and TYPE once, its
/// samples from every text under them, families in the order first seen
/// (a sample belongs to the family of the HELP or TYPE above it).
std::string merge_metric_families(const std::vector<std::string>& texts);

} // namespace salamander::apps
