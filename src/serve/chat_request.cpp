#include "serve/chat_request.h"

#include "serve/request_error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

namespace huddle::serve {
namespace {

using nlohmann::json;

constexpr int kMaxTokens = 1 << 24;  // as completions' max_tokens allows

RequestError bad_field(const std::string& field, const std::string& what) {
  return RequestError(400, fmt::format("'{}': {}", field, what), "invalid_request_error", field);
}

const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string content_text(const json& content, const std::string& where, const std::string& role) {
  if (content.is_null()) {
    if (role == "assistant") return "";
    throw bad_field(where, "required");
  }
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw bad_field(where, "expected a string or a list of {\"type\": \"text\", \"text\": ...}");
  std::string text;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!part.is_object()) throw bad_field(at, "expected an object");
    const json* type = field(part, "type");
    if (!type || !type->is_string()) throw bad_field(at + ".type", "required: \"text\"");
    if (*type != "text")
      throw bad_field(at + ".type", fmt::format("'{}' parts are not supported; only \"text\"",
                                                type->get<std::string>()));
    const json* t = field(part, "text");
    if (!t || !t->is_string()) throw bad_field(at + ".text", "expected a string");
    if (i > 0) text += '\n';
    text += t->get<std::string>();
  }
  return text;
}

ChatMessage parse_message(const json& m, std::size_t index) {
  const std::string where = fmt::format("messages[{}]", index);
  if (!m.is_object()) throw bad_field(where, "expected an object with 'role' and 'content'");
  const json* role = field(m, "role");
  if (!role) throw bad_field(where + ".role", "required");
  if (!role->is_string()) throw bad_field(where + ".role", "expected a string");
  static const std::array<const char*, 5> kRoles = {"system", "developer", "user", "assistant",
                                                    "tool"};
  const std::string r = role->get<std::string>();
  if (std::none_of(kRoles.begin(), kRoles.end(), [&](const char* k) { return r == k; })) {
    throw bad_field(where + ".role",
                    fmt::format("'{}' is not one of system, developer, user, assistant, tool", r));
  }
  if (const json* calls = field(m, "tool_calls"); calls && !(calls->is_array() && calls->empty()))
    throw bad_field(where + ".tool_calls", "tool calls are not supported by this server");
  const auto content = m.find("content");
  ChatMessage message{
      r, content_text(content == m.end() ? json() : *content, where + ".content", r), std::nullopt};
  if (const json* name = field(m, "name")) {
    if (!name->is_string()) throw bad_field(where + ".name", "expected a string");
    message.name = name->get<std::string>();
  }
  return message;
}

}  // namespace

ChatRequest parse_chat_request(const json& body) {
  ChatRequest r;
  const json* messages = field(body, "messages");
  if (!messages) throw bad_field("messages", "required");
  if (!messages->is_array() || messages->empty())
    throw bad_field("messages", "expected a non-empty list");
  for (std::size_t i = 0; i < messages->size(); ++i)
    r.messages.push_back(parse_message((*messages)[i], i));
  if (const json* tools = field(body, "tools"); tools && !(tools->is_array() && tools->empty()))
    throw bad_field("tools", "tools are not supported by this server");
  if (const json* tool_choice = field(body, "tool_choice"); tool_choice && *tool_choice != "none")
    throw bad_field("tool_choice", "tools are not supported by this server");
  if (const json* format = field(body, "response_format");
      format && !(format->is_object() && format->value("type", json()) == "text")) {
    throw bad_field("response_format", "only {\"type\": \"text\"} is supported");
  }
  if (const json* v = field(body, "top_logprobs"); v && *v != 0)
    throw bad_field("top_logprobs", "this value is not supported by this server");
  // Chat replies run to the end of the turn or of the context unless limited.
  r.generation.max_tokens = kMaxTokens;
  parse_generation_fields(body, r.generation);
  // The newer name of max_tokens in chat completions.
  if (const json* v = field(body, "max_completion_tokens")) {
    if (!v->is_number_integer() || *v < 0 || *v > kMaxTokens)
      throw bad_field("max_completion_tokens",
                      fmt::format("expected an integer in [0, {}]", kMaxTokens));
    r.generation.max_tokens = v->get<int>();
  }
  r.generation.from_chat_template = true;
  return r;
}

}  // namespace huddle::serve
