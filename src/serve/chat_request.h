// The body of POST /v1/chat/completions, parsed and checked: `messages` and the fields chat
// shares with completions (max_tokens or max_completion_tokens, temperature, top_p, seed, stop,
// stream, stream_options).
#pragma once

#include "serve/chat_template.h"
#include "serve/completion_request.h"

#include <nlohmann/json_fwd.hpp>

#include <vector>

namespace huddle::serve {

struct ChatRequest {
  // role one of system, developer, user, assistant, tool; content a string or a list of
  // {"type": "text", "text": ...} parts (joined with "\n"), null only for an assistant.
  std::vector<ChatMessage> messages;
  CompletionRequest generation;  // everything but the prompt, which the template makes
};

// RequestError (400) naming the field at fault ("messages[1].content", "max_tokens", ...):
// a missing or empty `messages`, a message that is not an object, a missing or unknown role,
// content of the wrong type, a part that is not text; tools and non-text response formats
// (not supported); and what parse_generation_fields refuses.
ChatRequest parse_chat_request(const nlohmann::json& body);

}  // namespace huddle::serve
