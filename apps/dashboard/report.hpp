// A finished run as one self-contained page: `salamander plot RUN.jsonl -o
// report.html` puts the metrics log's curves and timeline into the
// dashboard's own page (apps/dashboard/web/), its script, style and
// chart.js inlined, so it opens from a file with nothing else at hand.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace salamander::apps {

/// The page's data from a metrics log's lines (objects with "t" and
/// "event"): {"title", "mode", "state", "samples", "events"}. `samples`
/// hold the live page's curve points (batch lines thinned to at most
/// `max_samples`, evaluations, serving lines); `state` the final plan as
/// node bars, when the log names one.
nlohmann::json report_data(const std::vector<nlohmann::json>& lines, const std::string& title,
                           size_t max_samples = 2000);

/// The dashboard's page with `data` embedded and every file inlined.
std::string report_page(const nlohmann::json& data);

/// "node1[0,2) node2[2,4)" -> [{node, begin, end}, ...] in order; entries
/// that are not NAME[B,E) are skipped.
nlohmann::json parse_plan_text(const std::string& plan);

} // namespace salamander::apps
