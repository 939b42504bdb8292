// Small helpers the HTTP routes share: the clock, JSON and error responses, SSE framing.
#pragma once

#include "serve/openai_json.h"
#include "serve/request_error.h"

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace huddle::serve {

inline std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

inline void send_error(httplib::Response& res, const RequestError& e) {
  send_json(res, e.status(), error_json(e.what(), e.type(), e.param(), e.code()));
}

// One Server-Sent Events message: "data: {json}\n\n".
inline std::string sse(const nlohmann::json& chunk) {
  return fmt::format("data: {}\n\n", dump(chunk));
}

}  // namespace huddle::serve
