// The body of POST /v1/completions, parsed and checked (OpenAI's field names and ranges).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace huddle::serve {

struct CompletionRequest {
  // Exactly one of the two: text to tokenize, or token ids as given.
  std::optional<std::string> prompt_text;
  std::vector<std::int32_t> prompt_ids;
  int max_tokens = 16;  // OpenAI's default
  float temperature = 1.0f;
  float top_p = 1.0f;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> stop;  // up to 4 non-empty strings
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // prompt_text was rendered by the model's chat template: when it begins with the BOS token
  // the tokenizer adds another, one is dropped; generation also ends at chat_stop_ids.
  bool from_chat_template = false;
};

// Throws RequestError (400) naming the field at fault: wrong type, value out of range, or a
// feature not supported (several prompts, n > 1; echo, logprobs, best_of, suffix, penalties and
// logit_bias other than their defaults). Other unknown fields (user, ...) are ignored.
CompletionRequest parse_completion_request(const nlohmann::json& body);

// The fields completions and chat completions share (all but the prompt), into `r`; the same
// errors as parse_completion_request.
void parse_generation_fields(const nlohmann::json& body, CompletionRequest& r);

// Parses a request body as JSON; RequestError (400) when it is not a JSON object.
nlohmann::json parse_json_body(const std::string& body);
// The same keeping objects' key order (chat: the tools are printed into the prompt).
nlohmann::ordered_json parse_ordered_json_body(const std::string& body);

}  // namespace huddle::serve
