// OpenAI-shaped JSON bodies of chat completions: the reply and its stream chunks.
#pragma once

#include "serve/engine.h"
#include "serve/openai_json.h"

#include <nlohmann/json.hpp>

#include <string>

namespace huddle::serve {

// A fresh "chatcmpl-<hex>" id.
std::string new_chat_completion_id();

// {"id", "object": "chat.completion", "created", "model",
//  "choices": [{"index": 0, "message": {"role": "assistant", "content"}, "logprobs": null,
//               "finish_reason"}], "usage"}.
nlohmann::json chat_completion_json(const ResponseHeader& header, const CompletionResult& result);
// One "chat.completion.chunk": choices[0] holds `delta` ({"role": "assistant", "content": ""}
// first, then {"content": piece}, then {} with the finish reason) and `finish_reason` (null
// while going on).
nlohmann::json chat_chunk_json(const ResponseHeader& header, const nlohmann::json& delta,
                               const std::string& finish_reason);
// The last chunk of a stream with stream_options.include_usage: no choices, the usage.
nlohmann::json chat_usage_chunk_json(const ResponseHeader& header, const CompletionResult& result);

}  // namespace huddle::serve
