// The body of POST /v1/chat/completions, parsed and checked: `messages`, the tool fields
// (tools, tool_choice, parallel_tool_calls) and the fields chat shares with completions
// (max_tokens or max_completion_tokens, temperature, top_p, seed, stop, stream, stream_options).
#pragma once

#include "serve/chat_template.h"
#include "serve/completion_request.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace huddle::serve {

// tool_choice: kAuto when absent; kFunction names one function (tool_choice_name).
enum class ToolChoice { kAuto, kNone, kRequired, kFunction };

struct ChatRequest {
  // role one of system, developer, user, assistant, tool; content a string or a list of
  // {"type": "text", "text": ...} parts (joined with "\n"), null only for an assistant (and
  // then ""); an assistant's tool_calls, a tool message's tool_call_id (chat_template.h).
  std::vector<ChatMessage> messages;
  // [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}] as
  // given (key order kept: the template prints them); empty when none.
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;     // with ToolChoice::kFunction
  bool parallel_tool_calls = true;  // false: a reply's first call only
  CompletionRequest generation;     // everything but the prompt, which the template makes

  // Whether the model is offered the tools (and its reply parsed for calls): tools given and
  // tool_choice not "none".
  bool offers_tools() const { return !tools.empty() && tool_choice != ToolChoice::kNone; }
  std::vector<std::string> tool_names() const;
};

// RequestError (400) naming the field at fault ("messages[1].content", "tools[0].function.name",
// ...): a missing or empty `messages`, a message that is not an object, a missing or unknown
// role, content of the wrong type, a part that is not text; tool_calls not on an assistant or
// malformed (id, type "function", function.name, function.arguments a string or an object); a
// tool message without a string tool_call_id; tools that are not function definitions (name
// of 1-64 letters, digits, '_' or '-', unique; parameters an object); a tool_choice that is not
// "none", "auto", "required" or {"type": "function", "function": {"name"}} naming a given tool
// ("required" and a named function need tools); non-text response formats (not supported); and
// what parse_generation_fields refuses. The body is ordered_json so that the tools keep their
// key order (a nlohmann::json converts).
ChatRequest parse_chat_request(const nlohmann::ordered_json& body);

}  // namespace huddle::serve
