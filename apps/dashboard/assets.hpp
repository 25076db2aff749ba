// The dashboard's files, compiled into the binary (cmake/embed_assets.cmake
// writes them from apps/dashboard/web/ and Debian's libjs-chart.js), so the
// page and a run's report need nothing at run time: no CDN, no internet.
#pragma once

#include <string_view>

namespace salamander::apps::dashboard_assets {

std::string_view page();   ///< web/index.html
std::string_view script(); ///< web/app.js: the live page and the report
std::string_view style();  ///< web/app.css
std::string_view chart();  ///< chart.js 3.9.1 (MIT), Debian's libjs-chart.js

} // namespace salamander::apps::dashboard_assets
