// Small helpers the HTTP routes share: the clock, JSON and error responses, SSE framing.
#pragma once

#include "serve/client_connection.h"
#include "serve/completion_request.h"
#include "serve/engine.h"
#include "serve/openai_json.h"
#include "serve/request_error.h"

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

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

// How one streamed response spells its events; completions and chat differ only in these.
struct StreamEvents {
  using Chunks = std::vector<nlohmann::json>;
  std::optional<nlohmann::json> first;               // sent before any text (chat's role)
  std::function<Chunks(const std::string&)> piece;   // for a piece of text (none: held back)
  std::function<Chunks(const std::string&)> finish;  // the last, given the finish reason
  std::function<nlohmann::json(const CompletionResult&)> usage;  // with include_usage
};

// Streams one request as Server-Sent Events on the connection's thread: `first`, each piece as
// it is generated, the finish, the usage when asked, then [DONE]; an error becomes an error
// event before [DONE]; a client that leaves cancels the request (a failed write, or
// `connection` gone between decode steps).
void stream_events(httplib::Response& res, Engine& engine, CompletionRequest request,
                   StreamEvents events, ClientConnection connection);

// Generates a non-streamed answer; std::nullopt when the client left before it was done (the
// request was cancelled between decode steps: there is no one to answer).
std::optional<CompletionResult> complete_for(Engine& engine, const CompletionRequest& request,
                                             const ClientConnection& connection);

}  // namespace huddle::serve
