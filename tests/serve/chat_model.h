// A chat-capable copy of the llama-tiny fixture for the chat tests: its added token <|pad|>
// (id 511, special) renamed <|eot_id|>, and tokenizer_config.json given a chat template
// (default: the real Llama 3 template from tests/fixtures/chat_templates).
#pragma once

#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace huddle::testing {

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string llama3_template() {
  return read_text(fixture("chat_templates/llama-3.jinja"));
}

// Writes the chat model into `dir`; `chat_template` is the tokenizer_config.json value (a string,
// a list of named templates, or null for none).
inline void make_chat_model(const std::filesystem::path& dir,
                            const nlohmann::json& chat_template = llama3_template()) {
  copy_model(fixture_model("llama-tiny"), dir);
  std::string tokenizer = read_text(dir / "tokenizer.json");
  for (std::size_t at = tokenizer.find("\"<|pad|>\""); at != std::string::npos;
       at = tokenizer.find("\"<|pad|>\"", at))
    tokenizer.replace(at, 9, "\"<|eot_id|>\"");
  std::ofstream(dir / "tokenizer.json", std::ios::binary) << tokenizer;
  nlohmann::json config = nlohmann::json::parse(read_text(dir / "tokenizer_config.json"));
  config["pad_token"] = "<|eot_id|>";
  config["chat_template"] = chat_template;
  std::ofstream(dir / "tokenizer_config.json", std::ios::binary) << config.dump(1);
}

}  // namespace huddle::testing
