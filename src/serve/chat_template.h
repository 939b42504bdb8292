// The model's chat template: tokenizer_config.json's `chat_template` (a Jinja string, or a list
// of {"name", "template"} of which "default" is used) with the file's bos_token and eos_token,
// rendered as Hugging Face's apply_chat_template renders it (src/jinja/template.h).
#pragma once

#include "jinja/template.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace huddle::serve {

struct ChatMessage {
  std::string role;
  std::string content;
  std::optional<std::string> name;
  // An assistant's calls, [{"id", "type": "function", "function": {"name", "arguments"}}], with
  // arguments an object where the request's JSON string parses to one (the templates print
  // them with tojson, as transformers' callers pass dicts); null when none.
  nlohmann::ordered_json tool_calls = nullptr;
  std::optional<std::string> tool_call_id;  // a tool message's
};

class ChatTemplate {
 public:
  // Parses `source`; jinja::TemplateError when it does not parse. Empty tokens: not set (the
  // template sees them undefined, as Hugging Face leaves out unset special tokens).
  ChatTemplate(std::string source, std::string bos_token, std::string eos_token);

  // <model_dir>/tokenizer_config.json's template; nullopt when the file or the field is absent.
  // LoadError naming the file and field when they are malformed or the template does not parse
  // (with the line and column in the template).
  static std::optional<ChatTemplate> load(const std::filesystem::path& model_dir);

  // The prompt for `messages`: variables messages ([{role, content[, name][, tool_calls]
  // [, tool_call_id]}], keys present only when set), add_generation_prompt, bos_token,
  // eos_token, tools (the list as given, or none when null) and documents (none), as
  // transformers' apply_chat_template(messages, tools=...). Throws jinja::TemplateError when
  // the template refuses them (raise_exception) or fails.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& tools = nullptr) const;

  const std::string& source() const { return source_; }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 private:
  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  jinja::Template template_;
};

// The ids at which a chat reply ends: each end-of-turn marker the template writes
// (<|eot_id|>, <|eom_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, </s>) and its
// eos_token, where the tokenizer knows the text as one special token. Sorted, no duplicates.
std::vector<std::int32_t> end_of_turn_ids(const ChatTemplate& chat, const Tokenizer& tokenizer);

}  // namespace huddle::serve
