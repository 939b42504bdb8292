// OpenAI-shaped JSON bodies of chat completions: the reply and its stream chunks.
#pragma once

#include "serve/engine.h"
#include "serve/openai_json.h"
#include "serve/tool_calls.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace huddle::serve {

// A fresh "chatcmpl-<hex>" id.
std::string new_chat_completion_id();

// {"id", "object": "chat.completion", "created", "model",
//  "choices": [{"index": 0, "message": {"role": "assistant", "content"}, "logprobs": null,
//               "finish_reason"}], "usage"}.
nlohmann::json chat_completion_json(const ResponseHeader& header, const CompletionResult& result);
// The same with the reply split into content and tool calls (parse_tool_calls): with calls,
// message.content is the text before them or null, message.tool_calls lists them
// (tool_calls_json) and finish_reason is "tool_calls"; without, as above with reply.content.
nlohmann::json chat_completion_json(const ResponseHeader& header, const CompletionResult& result,
                                    const ParsedReply& reply);
// One "chat.completion.chunk": choices[0] holds `delta` ({"role": "assistant", "content": ""}
// first, then {"content": piece}, with tools {"tool_calls": [{"index", "id", "type",
// "function": {"name", "arguments"}}]} once a call is complete, then {} with the finish reason)
// and `finish_reason` (null while going on).
nlohmann::json chat_chunk_json(const ResponseHeader& header, const nlohmann::json& delta,
                               const std::string& finish_reason);
// The chunks that end a streamed reply whose tool calls were parsed (ToolCallStream::finish's
// `rest`): the content not yet sent (when any), one {"tool_calls": [{"index", "id", "type",
// "function"}]} delta per call, then {} with finish_reason "tool_calls" when there were calls,
// else `reason`.
std::vector<nlohmann::json> chat_finish_chunks(const ResponseHeader& header,
                                               const ParsedReply& rest, const std::string& reason);
// The last chunk of a stream with stream_options.include_usage: no choices, the usage.
nlohmann::json chat_usage_chunk_json(const ResponseHeader& header, const CompletionResult& result);

}  // namespace huddle::serve
