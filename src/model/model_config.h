// ModelConfig: the hyper-parameters every architecture builder needs, parsed from config.json.
//
// Architectures read their own config.json field names (n_embd vs hidden_size, ...) in their
// builder file and fill this one struct; nothing downstream reads config.json.
#pragma once

#include "kernels/kernels.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace huddle {

enum class Activation : std::uint8_t { GeluTanh, GeluErf, Silu };

struct ModelConfig {
  std::string architecture;  // builder name: "gpt2", "bert", "llama", "qwen2", "mistral", "phi3"
  std::int64_t vocab_size = 0;
  std::int64_t hidden = 0;
  std::int64_t layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  std::int64_t ffn = 0;
  std::int64_t max_positions = 0;    // largest number of positions (context length)
  std::int64_t type_vocab_size = 0;  // BERT token types
  float norm_eps = 1e-5f;
  kernels::RopeSpec rope;           // rotary models: theta and rope_scaling
  std::int64_t sliding_window = 0;  // causal attention over keys (p - window, p]; 0 = all
  bool qkv_bias = false;            // q/k/v projections carry biases (Qwen2, attention_bias)
  bool o_bias = false;              // attention output projection bias (attention_bias)
  bool mlp_bias = false;            // gate/up/down projection biases (Llama mlp_bias)
  Activation activation = Activation::GeluTanh;
  bool causal = true;  // decoder (LM) vs encoder
  bool tie_word_embeddings = false;
  std::vector<std::int32_t> bos_ids;
  std::vector<std::int32_t> eos_ids;

  // Validates internal consistency (positive sizes, heads divide hidden, ...); LoadError naming
  // `source` (the config.json path) and the field.
  void validate(const std::string& source) const;
};

// Reads and parses a JSON file; LoadError naming the path when missing or not JSON.
nlohmann::json read_json_file(const std::filesystem::path& path);

// Typed field access on a config.json object, with errors naming the file and the field
// (a nested object's fields as "rope_scaling.factor").
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& json, std::string source, std::string prefix = "");
  std::int64_t integer(const std::string& key) const;
  std::int64_t integer_or(const std::string& key, std::int64_t fallback) const;  // absent/null
  double number_or(const std::string& key, double fallback) const;
  std::string string_or(const std::string& key, const std::string& fallback) const;
  bool boolean_or(const std::string& key, bool fallback) const;
  // An int, a list of ints, or absent/null (empty list).
  std::vector<std::int32_t> int_list(const std::string& key) const;
  // A list of strings, or absent/null (empty list).
  std::vector<std::string> string_list(const std::string& key) const;
  bool has(const std::string& key) const;       // present and not null
  bool contains(const std::string& key) const;  // present, null included
  // The object at `key` (present, not null), read with this reader's source; LoadError if it is
  // not an object.
  ConfigReader object(const std::string& key) const;
  // Every key of the object, in file order (null fields included).
  std::vector<std::string> keys() const;
  // The name errors give `key`: "factor" or, in a nested reader, "rope_scaling.factor".
  std::string field(const std::string& key) const { return prefix_ + key; }
  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& json_;
  std::string source_;
  std::string prefix_;
};

}  // namespace huddle
