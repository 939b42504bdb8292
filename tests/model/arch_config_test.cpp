// config.json of the Llama-family architectures: hub configs as published parse (their harmless
// fields pass), defaults follow transformers, and whatever would change the math without Huddle
// computing it (an unknown rope_type, a field no builder reads) is a LoadError naming it.
#include "core/error.h"
#include "model/architecture.h"
#include "model/model_config.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace huddle {
namespace {

ModelConfig parse_arch_config(const nlohmann::json& j) {
  const Architecture& arch = architecture_for_config(j, "config.json");
  ModelConfig c = arch.parse_config(ConfigReader(j, "config.json"));
  c.validate("config.json");
  return c;
}

// The message of the LoadError parsing `j` gives ("" and a test failure if none).
std::string error_of(const nlohmann::json& j) {
  try {
    parse_arch_config(j);
  } catch (const LoadError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << j.dump();
  return "";
}

#define EXPECT_HAS(text, needle) EXPECT_NE((text).find(needle), std::string::npos) << (text)

// Llama-3.2-1B's config.json as published.
nlohmann::json llama32_1b() {
  return nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})");
}

// Qwen2.5-0.5B's.
nlohmann::json qwen25_05b() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896,
    "initializer_range": 0.02, "intermediate_size": 4864, "max_position_embeddings": 32768,
    "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 14,
    "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 151936})");
}

// Mistral-7B-v0.1's.
nlohmann::json mistral_7b() {
  return nlohmann::json::parse(R"({
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
    "use_cache": true, "vocab_size": 32000})");
}

// Phi-3-mini-4k-instruct's (auto_map abridged).
nlohmann::json phi3_mini() {
  return nlohmann::json::parse(R"({
    "_name_or_path": "Phi-3-mini-4k-instruct", "architectures": ["Phi3ForCausalLM"],
    "attention_bias": false, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config"}, "bos_token_id": 1,
    "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 4096,
    "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "original_max_position_embeddings": 4096, "pad_token_id": 32000,
    "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0,
    "sliding_window": 2047, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.40.2", "use_cache": true, "vocab_size": 32064})");
}

TEST(ArchConfig, HubConfigsParse) {
  const ModelConfig llama = parse_arch_config(llama32_1b());
  EXPECT_EQ(llama.architecture, "llama");
  EXPECT_EQ(llama.rope.scaling, kernels::RopeScaling::Llama3);
  EXPECT_EQ(llama.rope.factor, 32.0f);
  EXPECT_EQ(llama.rope.low_freq_factor, 1.0f);
  EXPECT_EQ(llama.rope.high_freq_factor, 4.0f);
  EXPECT_EQ(llama.rope.original_max_positions, 8192);
  EXPECT_EQ(llama.rope.theta, 500000.0f);
  EXPECT_EQ(llama.max_positions, 131072);
  EXPECT_TRUE(llama.tie_word_embeddings);
  EXPECT_FALSE(llama.qkv_bias || llama.o_bias || llama.mlp_bias);

  const ModelConfig qwen = parse_arch_config(qwen25_05b());
  EXPECT_EQ(qwen.architecture, "qwen2");
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_FALSE(qwen.o_bias || qwen.mlp_bias);
  EXPECT_EQ(qwen.sliding_window, 0);  // use_sliding_window false
  EXPECT_EQ(qwen.rope.theta, 1000000.0f);
  EXPECT_EQ(qwen.norm_eps, 1e-6f);
  EXPECT_EQ(qwen.head_dim, 64);

  const ModelConfig mistral = parse_arch_config(mistral_7b());
  EXPECT_EQ(mistral.architecture, "mistral");
  EXPECT_EQ(mistral.sliding_window, 4096);

  const ModelConfig phi3 = parse_arch_config(phi3_mini());
  EXPECT_EQ(phi3.architecture, "phi3");
  EXPECT_EQ(phi3.sliding_window, 2047);
  EXPECT_EQ(phi3.head_dim, 96);
  EXPECT_EQ(phi3.rope.scaling, kernels::RopeScaling::None);
}

TEST(ArchConfig, DefaultsFollowTransformers) {
  nlohmann::json j = mistral_7b();
  j.erase("sliding_window");
  j.erase("rms_norm_eps");
  j.erase("max_position_embeddings");
  ModelConfig c = parse_arch_config(j);
  EXPECT_EQ(c.sliding_window, 4096);  // MistralConfig's default
  EXPECT_EQ(c.norm_eps, 1e-6f);
  EXPECT_EQ(c.max_positions, 131072);
  j["sliding_window"] = nullptr;  // null: full attention
  EXPECT_EQ(parse_arch_config(j).sliding_window, 0);

  j = phi3_mini();
  j.erase("sliding_window");
  j.erase("rms_norm_eps");
  c = parse_arch_config(j);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.norm_eps, 1e-5f);

  j = qwen25_05b();
  for (const char* key : {"rms_norm_eps", "max_position_embeddings", "tie_word_embeddings"}) {
    j.erase(key);
  }
  c = parse_arch_config(j);
  EXPECT_EQ(c.norm_eps, 1e-6f);
  EXPECT_EQ(c.max_positions, 32768);
  EXPECT_FALSE(c.tie_word_embeddings);
  j["layer_types"] = std::vector<std::string>(24, "full_attention");
  EXPECT_NO_THROW(parse_arch_config(j));
}

TEST(ArchConfig, RopeTypes) {
  nlohmann::json j = llama32_1b();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};  // the legacy key
  ModelConfig c = parse_arch_config(j);
  EXPECT_EQ(c.rope.scaling, kernels::RopeScaling::Linear);
  EXPECT_EQ(c.rope.factor, 4.0f);
  EXPECT_EQ(c.max_positions, 131072);

  j["max_position_embeddings"] = 4096;
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  c = parse_arch_config(j);
  EXPECT_EQ(c.rope.scaling, kernels::RopeScaling::Dynamic);
  EXPECT_EQ(c.rope.original_max_positions, 4096);
  EXPECT_EQ(c.max_positions, 8192);  // the context dynamic scaling stretches to

  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(parse_arch_config(j).rope.scaling, kernels::RopeScaling::None);
}

TEST(ArchConfig, UnknownRopeTypeIsRefusedByName) {
  nlohmann::json j = llama32_1b();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  std::string e = error_of(j);
  EXPECT_HAS(e, "config.json");
  EXPECT_HAS(e, "rope_scaling.rope_type 'yarn' is not supported");

  j["rope_scaling"] = {{"factor", 4.0}};
  EXPECT_HAS(error_of(j), "'rope_scaling' has no 'rope_type'");

  j = llama32_1b();
  j["rope_scaling"].erase("low_freq_factor");
  EXPECT_HAS(error_of(j), "missing field 'rope_scaling.low_freq_factor'");

  j = llama32_1b();
  j["rope_scaling"]["attention_factor"] = 0.5;  // a YaRN-style key on a llama3 scaling
  e = error_of(j);
  EXPECT_HAS(e, "'rope_scaling.attention_factor' is not understood for rope_type 'llama3'");

  j = llama32_1b();
  j["rope_scaling"]["factor"] = -2.0;
  EXPECT_HAS(error_of(j), "'rope_scaling.factor' must be a positive number");
}

TEST(ArchConfig, FieldsThatChangeTheMathAreRefusedByName) {
  nlohmann::json j = llama32_1b();
  j["attn_logit_softcapping"] = 50.0;
  std::string e = error_of(j);
  EXPECT_HAS(e, "config.json: field 'attn_logit_softcapping' is not understood by Huddle's llama");

  j = qwen25_05b();
  j["quantization_config"] = {{"quant_method", "gptq"}};
  EXPECT_HAS(error_of(j), "field 'quantization_config' is not understood by Huddle's qwen2");

  j = mistral_7b();
  j["residual_multiplier"] = 0.22;
  EXPECT_HAS(error_of(j), "field 'residual_multiplier' is not understood by Huddle's mistral");

  j = qwen25_05b();
  j["use_sliding_window"] = true;
  EXPECT_HAS(error_of(j), "use_sliding_window true is not supported");
  j = qwen25_05b();
  j["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_HAS(error_of(j), "layer_types[1] is 'sliding_attention'");

  j = phi3_mini();
  j["rope_scaling"] = {{"type", "longrope"}, {"long_factor", {1.0}}, {"short_factor", {1.0}}};
  EXPECT_HAS(error_of(j), "rope_scaling type 'longrope' is not supported for phi3");
  j = phi3_mini();
  j["partial_rotary_factor"] = 0.75;
  EXPECT_HAS(error_of(j), "partial_rotary_factor 0.75 is not supported");
  j = phi3_mini();
  j["partial_rotary_factor"] = 1.0;
  EXPECT_NO_THROW(parse_arch_config(j));

  j = mistral_7b();
  j["sliding_window"] = 0;
  EXPECT_HAS(error_of(j), "sliding_window must be positive or null");
  j = llama32_1b();
  j["hidden_act"] = "gelu";
  EXPECT_HAS(error_of(j), "hidden_act 'gelu'");
}

}  // namespace
}  // namespace huddle
