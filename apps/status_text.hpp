// A job's status as the progress line and the console's `status` show it.
#pragma once

#include "apps/progress_text.hpp"
#include "messages/job.hpp"

#include <string>
#include <vector>

namespace salamander::apps {

/// "[training]", "epoch 1/1", "batch 412/937", "3830 samples/s", "loss
/// 0.4120", "eta 19s", "plan v2", health; while the job does not train, the
/// rate is "- samples/s (paused)" and the ETA holds. `eta` carries the
/// training time over successive looks (nullptr: this look only).
std::vector<progress_field> status_fields(const job_status& s, eta_clock* eta = nullptr);

/// The fields on one line, two spaces apart (the console's `status`).
std::string status_line(const job_status& s);

} // namespace salamander::apps
