// OpenAI-shaped JSON bodies: completions, stream chunks, the model list, errors.
#pragma once

#include "serve/engine.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace huddle::serve {

// What every response of one request shares.
struct ResponseHeader {
  std::string id;        // "cmpl-..."
  std::int64_t created;  // Unix seconds
  std::string model;
};

// A fresh "cmpl-<hex>" id.
std::string new_completion_id();

// {"id", "object", "created", "model"}: what every response and chunk begins with.
nlohmann::json response_base(const ResponseHeader& header, const char* object);
// {"prompt_tokens", "completion_tokens", "total_tokens"}.
nlohmann::json usage_json(const CompletionResult& result);

// {"id", "object": "text_completion", "created", "model", "choices": [...], "usage"}.
nlohmann::json completion_json(const ResponseHeader& header, const CompletionResult& result);
// One streamed chunk: choices[0] holds `text` and `finish_reason` (null while going on).
nlohmann::json completion_chunk_json(const ResponseHeader& header, const std::string& text,
                                     const std::string& finish_reason);
// The last chunk of a stream with stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const ResponseHeader& header, const CompletionResult& result);
// {"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}.
nlohmann::json models_json(const std::string& model, std::int64_t created);
// {"error": {"message", "type", "param", "code"}} (param and code null when empty).
nlohmann::json error_json(const std::string& message, const std::string& type,
                          const std::string& param = "", const std::string& code = "");

// Serialises without throwing on invalid UTF-8 (replaced by U+FFFD).
std::string dump(const nlohmann::json& j);

}  // namespace huddle::serve
