// JSON answers over cpp-httplib, as every HTTP front of salamander words
// them (serve's KServe v2 routes, the dashboard's API): a body, an error
// {"error": "..."}, and an exception turned into a 500 that says what.
#pragma once

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <exception>
#include <string>

namespace salamander::apps {

/// `body` as the answer, with status `code`. Text that is not UTF-8 (a
/// path, a node's name) is replaced rather than thrown on.
inline void json_reply(httplib::Response& res, int code, const nlohmann::json& body) {
  res.status = code;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

/// {"error": what} with status `code`.
inline void json_error(httplib::Response& res, int code, const std::string& what) {
  json_reply(res, code, nlohmann::json{{"error", what}});
}

/// A handler that throws answers 500 with the exception's message.
inline void answer_exceptions_as_json(httplib::Server& http) {
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        json_error(res, 500, what);
      });
}

} // namespace salamander::apps
