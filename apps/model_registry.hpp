// The models one `salamander serve` holds, and Triton's model repository
// extension over them. Each model is its own serving job (actors/serve/) on
// the server's one cluster: the same nodes, admitted and watched once, every
// job told of each loss and join; each job plans its pipeline over all of
// them, and a model loaded later is profiled while the others serve.
//
// Where models come from: `--load [NAME=]PATH` (repeatable) or
// `--repository DIR` (model_repository.hpp).
//
// POST /v2/repository/index lists them all (READY, LOADING, UNAVAILABLE with
// the reason); load and unload need the cluster secret as `Authorization:
// Bearer SECRET` (Triton's restricted-API pattern) and are refused with 403
// when it is missing, wrong, or no secret is set. Loading a model that
// serves builds the new pipeline beside it and swaps once it is ready; an
// unloaded model answers the requests it accepted before it goes. No
// LibTorch here: the gRPC front includes this header.
#pragma once

#include "apps/model_endpoint.hpp"
#include "apps/model_repository.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace salamander::apps {

class model_registry {
public:
  using endpoint_ptr = std::shared_ptr<model_endpoint>;
  /// Starts a model's serving job and its endpoint (not waiting for it to
  /// serve); throws std::exception with why it cannot.
  using starter = std::function<endpoint_ptr(const model_source&)>;
  /// A repository call's outcome: an HTTP status and what to say.
  struct answer {
    int status = 200;
    std::string message;
  };

  model_registry(std::vector<model_source> sources, std::string repository,
                 std::string secret, starter start,
                 std::chrono::milliseconds load_timeout = std::chrono::minutes(5));
  ~model_registry();
  model_registry(const model_registry&) = delete;
  model_registry& operator=(const model_registry&) = delete;

  /// Starts every model given (the fronts answer "not ready" meanwhile).
  /// Throws when one cannot start.
  void start_all();

  /// The endpoint serving `name` (and `version`, if not empty), or null
  /// with the 404's message in `why` (the models or versions there are).
  endpoint_ptr find(const std::string& name, const std::string& version,
                    std::string& why) const;
  /// An inference request for `name` (and `version`, if not empty) that
  /// arrived at `start`: its model's endpoint, the request counted there as
  /// pending; or null with the 404's message. A model not served counts
  /// none; an unknown version of one served counts its 404.
  endpoint_ptr accept(const std::string& name, const std::string& version,
                      model_endpoint::clock::time_point start, std::string& why) const;
  /// The models loaded now, by name.
  std::vector<endpoint_ptr> loaded() const;
  std::vector<std::string> names() const;
  /// Every model loaded serves (the server's readiness; false with none).
  bool all_ready() const;

  /// Triton's repository index: [{name, version, state, reason}], every
  /// model known (given, in the repository, or loaded); only READY ones
  /// when `ready_only`.
  nlohmann::json index(bool ready_only) const;

  /// Whether an `Authorization` header's value carries the secret.
  bool authorized(const std::string& authorization) const;
  /// Loads (or reloads) `name`: from the repository (scanned again) or its
  /// --load. Waits until it serves; the version before it, if any, serves
  /// until then and answers what it accepted.
  answer load(const std::string& name, const std::string& authorization);
  /// Stops serving `name` once it answered what it accepted.
  answer unload(const std::string& name, const std::string& authorization);

  /// Stops every model; their last statuses, by name.
  std::map<std::string, job_status> stop_all(const std::string& why);

  /// Whether a serving job stopped for `why` was stopped by the registry
  /// (an unload, a reload, a load that failed), not by an operator.
  static bool stopped_here(const std::string& why);

  /// Called with the names loaded after every load and unload.
  void on_change(std::function<void(const std::vector<std::string>&)> f);

private:
  struct entry {
    model_source source;
    endpoint_ptr endpoint; ///< null: not loaded
    /// Without an endpoint: UNAVAILABLE, or LOADING while its first
    /// pipeline starts, and why. With one, its job's phase says.
    std::string state = "UNAVAILABLE";
    std::string reason = "not loaded";
  };

  std::optional<answer> refused(const std::string& authorization) const;
  /// The source of `name` now: the repository's (scanned again), or its --load.
  std::optional<model_source> source_of(const std::string& name) const;
  void changed();

  std::string repository_;
  std::string secret_;
  starter start_;
  std::chrono::milliseconds load_timeout_;
  mutable std::mutex mutex_; ///< the entries
  std::mutex control_;       ///< one load or unload at a time
  std::map<std::string, entry> entries_;
  std::vector<std::string> order_; ///< names in the order given
  std::function<void(const std::vector<std::string>&)> on_change_;
};

} // namespace salamander::apps
