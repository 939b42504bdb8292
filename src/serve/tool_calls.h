// Tool calls in a chat reply: the format a model writes them in (chosen from its chat template),
// splitting a finished reply into content and calls, holding back streamed text that may begin
// a call, and the OpenAI JSON of the calls.
//
// Formats (docs/serving.md, "Tool calling"):
//   Hermes (Qwen2.5, Hermes): one or more
//       <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//     after optional content; the last closing tag may be missing (the turn ended).
//   Llama 3.1/3.2: one or more {"name": "f", "parameters": {...}} objects, separated by
//     whitespace or ';', making up the whole reply, or after <|python_tag|> (text before it is
//     content). "arguments" is accepted for "parameters".
//   Generic (a template with tool support in neither form): Hermes when the reply has
//     <tool_call>, else Llama's.
// A reply that does not parse completely in its format, or calls a function not offered, has no
// calls: it is returned as content, verbatim.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::serve {

enum class ToolCallFormat { kHermes, kLlama3, kGeneric };

// kHermes when the template writes <tool_call>, kLlama3 when it writes Llama 3's headers
// (<|start_header_id|>) and "parameters", else kGeneric.
ToolCallFormat tool_call_format(std::string_view template_source);

// What a reply's calls are parsed against.
struct ToolCallSyntax {
  ToolCallFormat format = ToolCallFormat::kGeneric;
  std::vector<std::string> names;  // the offered functions; a call to another is not a call
  bool parallel = true;            // false (parallel_tool_calls): only the first call is kept
};

struct ToolCall {
  std::string id;  // "call_<16 hex digits>", fresh per call
  std::string name;
  std::string arguments;  // a JSON object, serialised (key order as the model wrote it)
};

struct ParsedReply {
  // With calls: the text before the first, trailing whitespace removed; nullopt when that is
  // empty or blank. Without: the whole text.
  std::optional<std::string> content;
  std::vector<ToolCall> calls;
};

// Splits a finished reply (see the formats above).
ParsedReply parse_tool_calls(std::string_view text, const ToolCallSyntax& syntax);

// A streamed reply: push() returns the text now known to be content (never the start of a call,
// nor blank text that may precede one); finish() parses the whole reply as parse_tool_calls does
// and returns the content not yet returned, and the calls. The pieces push() returned followed
// by finish()'s content are parse_tool_calls's content (or the whole text without calls).
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallSyntax syntax);
  std::string push(std::string_view piece);
  ParsedReply finish();

 private:
  std::size_t content_end() const;  // how far full_ is surely content

  ToolCallSyntax syntax_;
  std::string full_;
  std::size_t emitted_ = 0;
};

// [{"id", "type": "function", "function": {"name", "arguments"}}] (and "index" with_index, as
// stream deltas carry it).
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index = false);

}  // namespace huddle::serve
