#include "serve/chat_request.h"

#include "serve/request_error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

namespace huddle::serve {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr int kMaxTokens = 1 << 24;  // as completions' max_tokens allows

RequestError bad_member(const std::string& field, const std::string& what) {
  return RequestError(400, fmt::format("'{}': {}", field, what), "invalid_request_error", field);
}

const ordered_json* member(const ordered_json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string content_text(const ordered_json& content, const std::string& where,
                         const std::string& role) {
  if (content.is_null()) {
    if (role == "assistant") return "";
    throw bad_member(where, "required");
  }
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw bad_member(where, "expected a string or a list of {\"type\": \"text\", \"text\": ...}");
  std::string text;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const ordered_json& part = content[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!part.is_object()) throw bad_member(at, "expected an object");
    const ordered_json* type = member(part, "type");
    if (!type || !type->is_string()) throw bad_member(at + ".type", "required: \"text\"");
    if (*type != "text")
      throw bad_member(at + ".type", fmt::format("'{}' parts are not supported; only \"text\"",
                                                 type->get<std::string>()));
    const ordered_json* t = member(part, "text");
    if (!t || !t->is_string()) throw bad_member(at + ".text", "expected a string");
    if (i > 0) text += '\n';
    text += t->get<std::string>();
  }
  return text;
}

// An assistant message's tool_calls, for the template: each {"id", "type": "function",
// "function": {"name", "arguments"}} with the arguments' JSON string parsed where it holds an
// object (an object given is kept).
ordered_json parse_tool_calls_field(const ordered_json& calls, const std::string& where) {
  if (!calls.is_array()) throw bad_member(where, "expected a list of calls");
  ordered_json out = ordered_json::array();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const ordered_json& call = calls[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!call.is_object()) throw bad_member(at, "expected an object");
    const ordered_json* id = member(call, "id");
    if (!id || !id->is_string()) throw bad_member(at + ".id", "required: a string");
    if (const ordered_json* type = member(call, "type"); type && *type != "function")
      throw bad_member(at + ".type", "expected \"function\"");
    const ordered_json* function = member(call, "function");
    if (!function || !function->is_object())
      throw bad_member(at + ".function", "required: {\"name\", \"arguments\"}");
    const ordered_json* name = member(*function, "name");
    if (!name || !name->is_string()) throw bad_member(at + ".function.name", "required: a string");
    const ordered_json* arguments = member(*function, "arguments");
    ordered_json args = ordered_json::object();
    if (arguments && arguments->is_string()) {
      ordered_json parsed = ordered_json::parse(arguments->get<std::string>(), nullptr, false);
      args = parsed.is_object() ? std::move(parsed) : *arguments;
    } else if (arguments && arguments->is_object()) {
      args = *arguments;
    } else {
      throw bad_member(at + ".function.arguments", "required: a JSON string");
    }
    out.push_back({{"id", *id},
                   {"type", "function"},
                   {"function", {{"name", *name}, {"arguments", std::move(args)}}}});
  }
  return out;
}

bool valid_function_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

// `tools`: a list of function definitions with distinct names.
ordered_json parse_tools(const ordered_json& tools) {
  if (!tools.is_array())
    throw bad_member("tools", "expected a list of {\"type\": \"function\", \"function\": {...}}");
  std::vector<std::string> names;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& tool = tools[i];
    const std::string at = fmt::format("tools[{}]", i);
    if (!tool.is_object()) throw bad_member(at, "expected an object");
    const ordered_json* type = member(tool, "type");
    if (!type || *type != "function") throw bad_member(at + ".type", "required: \"function\"");
    const ordered_json* function = member(tool, "function");
    if (!function || !function->is_object())
      throw bad_member(at + ".function", "required: {\"name\", \"description\", \"parameters\"}");
    const ordered_json* name = member(*function, "name");
    if (!name || !name->is_string() || !valid_function_name(name->get<std::string>()))
      throw bad_member(at + ".function.name", "required: 1 to 64 letters, digits, '_' or '-'");
    if (std::find(names.begin(), names.end(), name->get<std::string>()) != names.end())
      throw bad_member(at + ".function.name",
                       fmt::format("'{}' is defined twice", name->get<std::string>()));
    names.push_back(name->get<std::string>());
    if (const ordered_json* d = member(*function, "description"); d && !d->is_string())
      throw bad_member(at + ".function.description", "expected a string");
    if (const ordered_json* p = member(*function, "parameters"); p && !p->is_object())
      throw bad_member(at + ".function.parameters", "expected a JSON Schema object");
    if (const ordered_json* s = member(*function, "strict"); s && !s->is_boolean())
      throw bad_member(at + ".function.strict", "expected true or false");
  }
  return tools;
}

void parse_tool_choice(const ordered_json& choice, ChatRequest& r) {
  if (choice == "none") {
    r.tool_choice = ToolChoice::kNone;
  } else if (choice == "auto") {
    r.tool_choice = ToolChoice::kAuto;
  } else if (choice == "required") {
    r.tool_choice = ToolChoice::kRequired;
  } else if (choice.is_object()) {
    if (const ordered_json* type = member(choice, "type"); !type || *type != "function")
      throw bad_member("tool_choice.type", "required: \"function\"");
    const ordered_json* function = member(choice, "function");
    const ordered_json* name =
        function && function->is_object() ? member(*function, "name") : nullptr;
    if (!name || !name->is_string())
      throw bad_member("tool_choice.function.name", "required: a string");
    r.tool_choice = ToolChoice::kFunction;
    r.tool_choice_name = name->get<std::string>();
    const std::vector<std::string> names = r.tool_names();
    if (std::find(names.begin(), names.end(), r.tool_choice_name) == names.end())
      throw bad_member("tool_choice.function.name",
                       fmt::format("'{}' is not one of the tools", r.tool_choice_name));
  } else {
    throw bad_member("tool_choice",
                     "expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                     "\"function\": {\"name\"}}");
  }
  if (r.tools.empty() && r.tool_choice != ToolChoice::kNone && r.tool_choice != ToolChoice::kAuto)
    throw bad_member("tool_choice", "requires tools");
}

ChatMessage parse_message(const ordered_json& m, std::size_t index) {
  const std::string where = fmt::format("messages[{}]", index);
  if (!m.is_object()) throw bad_member(where, "expected an object with 'role' and 'content'");
  const ordered_json* role = member(m, "role");
  if (!role) throw bad_member(where + ".role", "required");
  if (!role->is_string()) throw bad_member(where + ".role", "expected a string");
  static const std::array<const char*, 5> kRoles = {"system", "developer", "user", "assistant",
                                                    "tool"};
  const std::string r = role->get<std::string>();
  if (std::none_of(kRoles.begin(), kRoles.end(), [&](const char* k) { return r == k; })) {
    throw bad_member(where + ".role",
                     fmt::format("'{}' is not one of system, developer, user, assistant, tool", r));
  }
  const auto content = m.find("content");
  ChatMessage message;
  message.role = r;
  message.content =
      content_text(content == m.end() ? ordered_json() : *content, where + ".content", r);
  if (const ordered_json* name = member(m, "name")) {
    if (!name->is_string()) throw bad_member(where + ".name", "expected a string");
    message.name = name->get<std::string>();
  }
  if (const ordered_json* calls = member(m, "tool_calls");
      calls && !(calls->is_array() && calls->empty())) {
    if (r != "assistant")
      throw bad_member(where + ".tool_calls", "only an assistant makes tool calls");
    message.tool_calls = parse_tool_calls_field(*calls, where + ".tool_calls");
  }
  if (r == "tool") {
    const ordered_json* id = member(m, "tool_call_id");
    if (!id || !id->is_string())
      throw bad_member(where + ".tool_call_id", "required: the id of the call this answers");
    message.tool_call_id = id->get<std::string>();
  }
  return message;
}

}  // namespace

std::vector<std::string> ChatRequest::tool_names() const {
  std::vector<std::string> names;
  for (const auto& tool : tools) names.push_back(tool["function"]["name"].get<std::string>());
  return names;
}

ChatRequest parse_chat_request(const ordered_json& body) {
  ChatRequest r;
  const ordered_json* messages = member(body, "messages");
  if (!messages) throw bad_member("messages", "required");
  if (!messages->is_array() || messages->empty())
    throw bad_member("messages", "expected a non-empty list");
  for (std::size_t i = 0; i < messages->size(); ++i)
    r.messages.push_back(parse_message((*messages)[i], i));
  if (const ordered_json* tools = member(body, "tools")) r.tools = parse_tools(*tools);
  if (const ordered_json* tool_choice = member(body, "tool_choice"))
    parse_tool_choice(*tool_choice, r);
  if (const ordered_json* v = member(body, "parallel_tool_calls")) {
    if (!v->is_boolean()) throw bad_member("parallel_tool_calls", "expected true or false");
    r.parallel_tool_calls = v->get<bool>();
  }
  if (member(body, "functions") || member(body, "function_call"))
    throw bad_member(member(body, "functions") ? "functions" : "function_call",
                     "the deprecated function fields are not supported; use tools and tool_choice");
  if (const ordered_json* format = member(body, "response_format");
      format && !(format->is_object() && format->value("type", ordered_json()) == "text")) {
    throw bad_member("response_format", "only {\"type\": \"text\"} is supported");
  }
  if (const ordered_json* v = member(body, "top_logprobs"); v && *v != 0)
    throw bad_member("top_logprobs", "this value is not supported by this server");
  // Chat replies run to the end of the turn or of the context unless limited.
  r.generation.max_tokens = kMaxTokens;
  parse_generation_fields(nlohmann::json(body), r.generation);
  // The newer name of max_tokens in chat completions.
  if (const ordered_json* v = member(body, "max_completion_tokens")) {
    if (!v->is_number_integer() || *v < 0 || *v > kMaxTokens)
      throw bad_member("max_completion_tokens",
                       fmt::format("expected an integer in [0, {}]", kMaxTokens));
    r.generation.max_tokens = v->get<int>();
  }
  r.generation.from_chat_template = true;
  return r;
}

}  // namespace huddle::serve
