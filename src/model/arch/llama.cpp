// Llama (LlamaForCausalLM: Llama 2, Llama 3.x): the shared decoder (arch/decoder.h) with separate
// q/k/v and gate/up projections.
//
// config.json: the decoder's shared fields (rope_scaling: linear, dynamic, llama3), plus
// attention_bias (q/k/v/o biases) and mlp_bias (gate/up/down biases). Other fields are refused
// by name unless harmless (model/config_fields.h).
// Checkpoint: arch/decoder.h's unfused tensors; rotary_emb.inv_freq buffers of old checkpoints
// are ignored (the frequencies come from config.json).
#include "model/arch/decoder.h"
#include "model/architecture.h"
#include "model/config_fields.h"

#include <nlohmann/json.hpp>

namespace huddle {
namespace {

ModelConfig llama_parse(const ConfigReader& r) {
  refuse_unknown_fields(r, "llama", decoder::understood_fields({"attention_bias", "mlp_bias"}));
  ModelConfig c = decoder::parse_config(
      r, {.architecture = "llama", .rms_norm_eps = 1e-6, .max_position_embeddings = 2048});
  c.qkv_bias = c.o_bias = r.boolean_or("attention_bias", false);
  c.mlp_bias = r.boolean_or("mlp_bias", false);
  return c;
}

nlohmann::json llama_to_config_json(const ModelConfig& c) {
  nlohmann::json j = decoder::config_json(c);
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  return j;
}

ModelConfig preset_1b() {
  // Shapes of a ~1.1B-parameter Llama (hidden 2048, 16 layers, GQA 32/8, SwiGLU 8192).
  ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = 32000;
  c.hidden = 2048;
  c.layers = 16;
  c.heads = 32;
  c.kv_heads = 8;
  c.head_dim = 64;
  c.ffn = 8192;
  c.max_positions = 2048;
  c.norm_eps = 1e-5f;
  c.rope.theta = 10000.0f;
  c.activation = Activation::Silu;
  c.causal = true;
  c.tie_word_embeddings = false;
  return c;
}

}  // namespace

Architecture llama_architecture() {
  return Architecture{
      .name = "llama",
      .model_types = {"llama"},
      .hf_classes = {"LlamaForCausalLM", "LlamaModel"},
      .parse_config = llama_parse,
      .canonical_name = decoder::canonical_name,
      .build_graph =
          [](const ModelConfig& c, const HasTensor& has_tensor) {
            return decoder::build_graph(c, {}, has_tensor);
          },
      .config_json = llama_to_config_json,
      .checkpoint_name = [](const std::string& name) { return name; },
      .presets = {{"llama-1b", preset_1b()}},
  };
}

}  // namespace huddle
