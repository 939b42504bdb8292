#include "serve/chat_template.h"

#include "core/error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

namespace huddle::serve {
namespace {

using nlohmann::json;

// A special token in tokenizer_config.json: a string, {"content": ...} (AddedToken), or null.
std::string token_text(const json& config, const char* name, const std::string& file) {
  const auto it = config.find(name);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  throw LoadError(fmt::format("{}: '{}' is neither a string nor {{\"content\": ...}}", file, name));
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : source_(std::move(source)),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)),
      template_(source_) {}

std::optional<ChatTemplate> ChatTemplate::load(const std::filesystem::path& model_dir) {
  const std::filesystem::path path = model_dir / "tokenizer_config.json";
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const json config = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object())
    throw LoadError(fmt::format("{}: not a JSON object", path.string()));
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::nullopt;
  std::string source;
  if (it->is_string()) {
    source = it->get<std::string>();
  } else if (it->is_array()) {
    bool found = false;
    for (const json& entry : *it) {
      if (entry.is_object() && entry.value("name", json()) == "default" &&
          entry.contains("template") && entry["template"].is_string()) {
        source = entry["template"].get<std::string>();
        found = true;
      }
    }
    if (!found) {
      throw LoadError(fmt::format(
          "{}: 'chat_template' lists named templates but none named \"default\"", path.string()));
    }
  } else {
    throw LoadError(fmt::format("{}: 'chat_template' is neither a string nor a list of templates",
                                path.string()));
  }
  std::string bos = token_text(config, "bos_token", path.string());
  std::string eos = token_text(config, "eos_token", path.string());
  try {
    return ChatTemplate(std::move(source), std::move(bos), std::move(eos));
  } catch (const jinja::TemplateError& e) {
    throw LoadError(fmt::format("{}: chat_template: {}", path.string(), e.what()));
  }
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt,
                                 const nlohmann::ordered_json& tools) const {
  jinja::List list;
  for (const ChatMessage& m : messages) {
    jinja::Map message;
    message.set("role", jinja::Value(m.role));
    message.set("content", jinja::Value(m.content));
    if (m.name) message.set("name", jinja::Value(*m.name));
    if (!m.tool_calls.is_null()) message.set("tool_calls", jinja::Value::from_json(m.tool_calls));
    if (m.tool_call_id) message.set("tool_call_id", jinja::Value(*m.tool_call_id));
    list.push_back(jinja::Value::map(std::move(message)));
  }
  jinja::Map variables;
  variables.set("messages", jinja::Value(std::move(list)));
  variables.set("tools", tools.is_null() ? jinja::Value(nullptr) : jinja::Value::from_json(tools));
  variables.set("documents", jinja::Value(nullptr));
  variables.set("add_generation_prompt", jinja::Value(add_generation_prompt));
  if (!bos_token_.empty()) variables.set("bos_token", jinja::Value(bos_token_));
  if (!eos_token_.empty()) variables.set("eos_token", jinja::Value(eos_token_));
  return template_.render(variables);
}

std::vector<std::int32_t> end_of_turn_ids(const ChatTemplate& chat, const Tokenizer& tokenizer) {
  static const char* const kMarkers[] = {"<|eot_id|>",    "<|eom_id|>",    "<|im_end|>", "<|end|>",
                                         "<end_of_turn>", "<|endoftext|>", "</s>"};
  std::vector<std::string> candidates;
  for (const char* marker : kMarkers)
    if (chat.source().find(marker) != std::string::npos) candidates.emplace_back(marker);
  if (!chat.eos_token().empty()) candidates.push_back(chat.eos_token());
  std::vector<std::int32_t> ids;
  for (const std::string& text : candidates) {
    const std::optional<std::int32_t> id = tokenizer.token_to_id(text);
    if (!id || !tokenizer.is_special(*id)) continue;
    // The tokenizer must read the text back as that one token (not split into pieces).
    if (tokenizer.encode(text, /*add_special=*/false) != std::vector<std::int32_t>{*id}) continue;
    ids.push_back(*id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace huddle::serve
