#include "serve/chat_json.h"

#include <fmt/format.h>

#include <random>

namespace huddle::serve {
namespace {

using nlohmann::json;

}  // namespace

std::string new_chat_completion_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("chatcmpl-{:016x}", rng());
}

json chat_completion_json(const ResponseHeader& header, const CompletionResult& result) {
  return chat_completion_json(header, result, ParsedReply{result.text, {}});
}

json chat_completion_json(const ResponseHeader& header, const CompletionResult& result,
                          const ParsedReply& reply) {
  json message = {{"role", "assistant"},
                  {"content", reply.content ? json(*reply.content) : json(nullptr)}};
  if (!reply.calls.empty()) message["tool_calls"] = tool_calls_json(reply.calls);
  json j = response_base(header, "chat.completion");
  j["choices"] =
      json::array({{{"index", 0},
                    {"message", std::move(message)},
                    {"logprobs", nullptr},
                    {"finish_reason", reply.calls.empty() ? result.finish_reason : "tool_calls"}}});
  j["usage"] = usage_json(result);
  return j;
}

json chat_chunk_json(const ResponseHeader& header, const json& delta,
                     const std::string& finish_reason) {
  json j = response_base(header, "chat.completion.chunk");
  j["choices"] = json::array(
      {{{"index", 0},
        {"delta", delta},
        {"logprobs", nullptr},
        {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}}});
  return j;
}

std::vector<json> chat_finish_chunks(const ResponseHeader& header, const ParsedReply& rest,
                                     const std::string& reason) {
  std::vector<json> chunks;
  if (rest.content) chunks.push_back(chat_chunk_json(header, {{"content", *rest.content}}, ""));
  for (const json& call : tool_calls_json(rest.calls, /*with_index=*/true))
    chunks.push_back(chat_chunk_json(header, {{"tool_calls", json::array({call})}}, ""));
  chunks.push_back(
      chat_chunk_json(header, json::object(), rest.calls.empty() ? reason : "tool_calls"));
  return chunks;
}

json chat_usage_chunk_json(const ResponseHeader& header, const CompletionResult& result) {
  json j = response_base(header, "chat.completion.chunk");
  j["choices"] = json::array();
  j["usage"] = usage_json(result);
  return j;
}

}  // namespace huddle::serve
