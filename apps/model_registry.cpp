// A server's models and the repository extension, see model_registry.hpp.
#include "apps/model_registry.hpp"

#include "actors/cluster/auth.hpp"

#include <algorithm>

namespace salamander::apps {

using json = nlohmann::json;

namespace {

// Why the registry stops a model's job (stopped_here tells them apart).
constexpr const char* unloaded_why = "unloaded";
constexpr const char* reloaded_why = "reloaded";
constexpr const char* failed_why = "load failed";

} // namespace

model_registry::model_registry(std::vector<model_source> sources, std::string repository,
                               std::string secret, starter start,
                               std::chrono::milliseconds load_timeout)
    : repository_(std::move(repository)), secret_(std::move(secret)),
      start_(std::move(start)), load_timeout_(load_timeout) {
  if (!repository_.empty()) {
    for (auto& [name, src] : scan_repository(repository_)) {
      if (src.path.empty()) {
        entries_[name].source = src;
        entries_[name].reason = src.version;
        continue;
      }
      sources.push_back(src);
    }
  }
  for (auto& s : sources) {
    if (!valid_model_name(s.name)) {
      throw std::invalid_argument("'" + s.name +
                                  "' cannot be a model's name in URLs: letters, digits, "
                                  "_ . - (and not 'stats')");
    }
    if (std::find(order_.begin(), order_.end(), s.name) != order_.end()) {
      throw std::invalid_argument("two models are named '" + s.name +
                                  "': name them apart (--load NAME=PATH)");
    }
    order_.push_back(s.name);
    entries_[s.name].source = s;
  }
  if (order_.empty()) {
    throw std::invalid_argument(repository_.empty()
                                    ? "no model to serve"
                                    : "--repository " + repository_ +
                                          " holds no model (Triton's layout: "
                                          "DIR/NAME/VERSION/model.ckpt)");
  }
}

model_registry::~model_registry() = default;

void model_registry::start_all() {
  for (auto& name : order_) {
    model_source src;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      src = entries_.at(name).source;
    }
    auto endpoint = start_(src);
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.at(name).endpoint = std::move(endpoint);
  }
  changed();
}

model_registry::endpoint_ptr model_registry::find(const std::string& name,
                                                  const std::string& version,
                                                  std::string& why) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second.endpoint) {
    if (auto unknown = it->second.endpoint->unknown(name, version)) {
      why = *unknown;
      return nullptr;
    }
    return it->second.endpoint;
  }
  std::string served;
  for (auto& [n, e] : entries_) {
    if (e.endpoint) {
      served += (served.empty() ? "'" : ", '") + n + "'";
    }
  }
  why = "unknown model '" + name + "'" +
        (it != entries_.end() ? " (not loaded: " + it->second.reason + ")" : "") +
        "; this server serves " + (served.empty() ? "no model now" : served);
  return nullptr;
}

model_registry::endpoint_ptr
model_registry::accept(const std::string& name, const std::string& version,
                       model_endpoint::clock::time_point start, std::string& why) const {
  // a request for a model not served counts to none (as Triton's); an
  // unknown version of one served counts to it
  auto m = find(name, "", why);
  if (!m) {
    return nullptr;
  }
  m->arrived();
  if (auto unknown = m->unknown(name, version)) {
    why = *unknown;
    m->finished(404, start);
    return nullptr;
  }
  return m;
}

std::vector<model_registry::endpoint_ptr> model_registry::loaded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<endpoint_ptr> out;
  for (auto& [n, e] : entries_) {
    if (e.endpoint) {
      out.push_back(e.endpoint);
    }
  }
  return out;
}

std::vector<std::string> model_registry::names() const {
  std::vector<std::string> out;
  for (auto& e : loaded()) {
    out.push_back(e->model().name);
  }
  return out;
}

bool model_registry::all_ready() const {
  auto models = loaded();
  return !models.empty() && std::all_of(models.begin(), models.end(),
                                        [](const endpoint_ptr& m) { return m->ready(); });
}

json model_registry::index(bool ready_only) const {
  std::vector<std::pair<std::string, entry>> copy;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    copy.assign(entries_.begin(), entries_.end());
  }
  json out = json::array();
  for (auto& [name, e] : copy) {
    std::string state = e.state;
    std::string reason = e.reason;
    // (a repository model without a version has why in `version`)
    std::string version =
        e.source.path.empty() && e.source.spec.empty() ? "" : e.source.version;
    if (e.endpoint) {
      version = e.endpoint->model().version;
      auto s = e.endpoint->status();
      if (s.phase == status_phase::serving) {
        state = "READY";
        reason.clear();
      } else if (s.finished()) {
        state = "UNAVAILABLE";
        reason = "the pipeline " + to_string(s.phase) +
                 (s.error.empty() ? "" : ": " + s.error);
      } else {
        state = "LOADING";
        reason = "the pipeline is " + to_string(s.phase);
      }
    }
    if (ready_only && state != "READY") {
      continue;
    }
    json m{{"name", name}, {"state", state}};
    if (!version.empty()) {
      m["version"] = version;
    }
    if (!reason.empty()) {
      m["reason"] = reason;
    }
    out.push_back(std::move(m));
  }
  return out;
}

bool model_registry::authorized(const std::string& authorization) const {
  return !secret_.empty() &&
         actors::same_secret(actors::bearer_token(authorization), secret_);
}

std::optional<model_registry::answer>
model_registry::refused(const std::string& authorization) const {
  if (secret_.empty()) {
    return answer{403, "loading and unloading models needs the cluster secret, and this "
                       "server has none: start it with --secret-file FILE (or "
                       "SALAMANDER_SECRET) and send Authorization: Bearer SECRET"};
  }
  if (!authorized(authorization)) {
    return answer{403, "loading and unloading models needs the cluster secret: send "
                       "Authorization: Bearer SECRET (missing or wrong)"};
  }
  return std::nullopt;
}

std::optional<model_source> model_registry::source_of(const std::string& name) const {
  if (!repository_.empty()) {
    auto found = scan_repository(repository_);
    if (auto it = found.find(name); it != found.end() && !it->second.path.empty()) {
      return it->second;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(name);
  if (it != entries_.end() &&
      (!it->second.source.path.empty() || !it->second.source.spec.empty())) {
    return it->second.source;
  }
  return std::nullopt;
}

model_registry::answer model_registry::load(const std::string& name,
                                            const std::string& authorization) {
  if (auto no = refused(authorization)) {
    return *no;
  }
  std::lock_guard<std::mutex> control(control_);
  auto src = source_of(name);
  if (!src) {
    std::string known;
    for (auto& m : index(false)) {
      known += (known.empty() ? "'" : ", '") + m["name"].get<std::string>() + "'";
    }
    return {404, "no model '" + name + "' to load" +
                     (repository_.empty() ? "" : " in " + repository_) +
                     " (models known: " + (known.empty() ? "none" : known) + ")"};
  }
  endpoint_ptr fresh;
  try {
    fresh = start_(*src);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& ent = entries_[name];
    ent.source = *src;
    if (!ent.endpoint) {
      ent.state = "UNAVAILABLE";
      ent.reason = e.what();
    }
    return {400, "cannot load '" + name + "': " + e.what()};
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& ent = entries_[name];
    if (!ent.endpoint) {
      ent.state = "LOADING";
      ent.reason = "its pipeline starts";
    }
  }
  // the new pipeline starts beside the one that serves (if any)
  if (!fresh->wait_serving(load_timeout_)) {
    auto s = fresh->status();
    auto why = s.error.empty() ? "not serving after " +
                                     std::to_string(load_timeout_.count() / 1000) + " s"
                               : s.error;
    fresh->stop(failed_why);
    std::lock_guard<std::mutex> lock(mutex_);
    auto& ent = entries_[name];
    if (!ent.endpoint) {
      ent.state = "UNAVAILABLE";
      ent.reason = why;
    }
    return {500, "cannot load '" + name + "': " + why};
  }
  endpoint_ptr before;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& ent = entries_[name];
    before = std::move(ent.endpoint);
    ent.source = *src;
    ent.endpoint = fresh;
  }
  changed();
  if (before) {
    before->replaced_by(fresh);
    before->stop(reloaded_why);
    return {200, "model '" + name + "' reloaded: version " + src->version};
  }
  return {200, "model '" + name + "' loaded: version " + src->version};
}

model_registry::answer model_registry::unload(const std::string& name,
                                              const std::string& authorization) {
  if (auto no = refused(authorization)) {
    return *no;
  }
  std::lock_guard<std::mutex> control(control_);
  endpoint_ptr gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(name);
    if (it == entries_.end() || !it->second.endpoint) {
      return {404, "model '" + name + "' is not loaded"};
    }
    gone = std::move(it->second.endpoint);
    it->second.state = "UNAVAILABLE";
    it->second.reason = "unloaded";
  }
  changed();
  // new requests get a 404 from now on; the ones it accepted are answered
  gone->stop(unloaded_why);
  return {200, "model '" + name + "' unloaded"};
}

std::map<std::string, job_status> model_registry::stop_all(const std::string& why) {
  std::lock_guard<std::mutex> control(control_);
  std::map<std::string, job_status> out;
  for (auto& m : loaded()) {
    out[m->model().name] = m->stop(why);
  }
  return out;
}

bool model_registry::stopped_here(const std::string& why) {
  return why == unloaded_why || why == reloaded_why || why == failed_why;
}

void model_registry::on_change(std::function<void(const std::vector<std::string>&)> f) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_change_ = std::move(f);
}

void model_registry::changed() {
  std::function<void(const std::vector<std::string>&)> f;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    f = on_change_;
  }
  if (f) {
    f(names());
  }
}

} // namespace salamander::apps
