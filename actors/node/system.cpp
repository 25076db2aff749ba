#include "actors/node/system.hpp"

#include "messages/errors.hpp"
#include "messages/messages.hpp"

#include <caf/io/middleman.hpp>

namespace salamander {

std::string to_string(errc x) {
  switch (x) {
    case errc::none:
      return "none";
    case errc::unreachable:
      return "unreachable";
    case errc::protocol_mismatch:
      return "protocol_mismatch";
    case errc::model_mismatch:
      return "model_mismatch";
    case errc::node_lost:
      return "node_lost";
    case errc::stage_failed:
      return "stage_failed";
    case errc::timeout:
      return "timeout";
    case errc::bad_config:
      return "bad_config";
    case errc::unauthorized:
      return "unauthorized";
    case errc::busy:
      return "busy";
    case errc::job_ended:
      return "job_ended";
    case errc::not_applicable:
      return "not_applicable";
    case errc::no_such_worker:
      return "no_such_worker";
    case errc::not_ready:
      return "not_ready";
    case errc::io_failed:
      return "io_failed";
    case errc::bad_transfer:
      return "bad_transfer";
  }
  return "unknown";
}

namespace actors {

void configure(caf::actor_system_config& cfg, const system_options& opts) {
  cfg.add_message_types<caf::id_block::salamander>();
  if (!opts.deterministic) {
    cfg.load<caf::io::middleman>();
  }
  // cfg.add_error_category<errc>() does not compile in CAF 0.17.6; this is
  // the two-argument form it would expand to.
  cfg.add_error_category(caf::atom("salamander"),
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string out = to_string(static_cast<errc>(code));
                           if (ctx.match_elements<std::string>()) {
                             out += ": " + ctx.get_as<std::string>(0);
                           } else if (!ctx.empty()) {
                             out += " " + caf::deep_to_string(ctx);
                           }
                           return out;
                         });
  // Stage-to-stage tensors must go node to node: without this, a node that
  // learns of a peer's stage through the supervisor routes every message to
  // it through the supervisor (two hops, and the supervisor's link carries
  // the whole pipeline). With it, BASP connects the nodes directly.
  if (opts.automatic_connections) {
    cfg.set("middleman.enable-automatic-connections", true);
  }
  // Incoming messages are decoded by the network thread itself, not copied
  // to a BASP worker first: one copy less of every message, and no worker
  // buffer kept at the size of the largest message ever received (13 MB of
  // activations on a ViT-Small node, held after its job had ended).
  cfg.set("middleman.workers", size_t{0});
  if (opts.scheduler_threads > 0) {
    cfg.set("scheduler.max-threads", opts.scheduler_threads);
  }
  if (opts.deterministic) {
    cfg.set("scheduler.policy", caf::atom("testing"));
  } else if (opts.calm_workers) {
    // one queue for all workers: every enqueue wakes an idle worker, and an
    // idle worker sleeps on the queue's condition variable
    cfg.set("scheduler.policy", caf::atom("sharing"));
  }
  if (opts.heartbeat.count() > 0 && !opts.deterministic) {
    cfg.set("middleman.heartbeat-interval", caf::timespan{opts.heartbeat});
  }
  if (opts.connection_timeout.count() > 0) {
    cfg.set("middleman.connection-timeout", caf::timespan{opts.connection_timeout});
  }
}

} // namespace actors
} // namespace salamander
