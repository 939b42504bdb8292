// Mistral (MistralForCausalLM): the shared decoder (arch/decoder.h) with sliding-window
// attention: a query at position p attends keys in (p - sliding_window, p], in the prompt and
// over the KV cache alike.
//
// config.json: the decoder's shared fields (defaults: rms_norm_eps 1e-6, max_position_embeddings
// 131072), plus sliding_window (absent: 4096 as in transformers' MistralConfig; null: full
// attention).
// Checkpoint: arch/decoder.h's unfused tensors, no biases.
#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/architecture.h"
#include "model/config_fields.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace huddle {
namespace {

ModelConfig mistral_parse(const ConfigReader& r) {
  refuse_unknown_fields(r, "mistral", decoder::understood_fields({"sliding_window"}));
  ModelConfig c = decoder::parse_config(
      r, {.architecture = "mistral", .rms_norm_eps = 1e-6, .max_position_embeddings = 4096 * 32});
  c.sliding_window = decoder::read_sliding_window(r, 4096);  // transformers' default
  return c;
}

nlohmann::json mistral_to_config_json(const ModelConfig& c) {
  nlohmann::json j = decoder::config_json(c);
  j["architectures"] = {"MistralForCausalLM"};
  j["model_type"] = "mistral";
  j["sliding_window"] = c.sliding_window > 0 ? nlohmann::json(c.sliding_window) : nullptr;
  return j;
}

ModelConfig preset_7b() {
  // Shapes of Mistral-7B-v0.1 (hidden 4096, 32 layers, GQA 32/8, SwiGLU 14336, window 4096).
  ModelConfig c;
  c.architecture = "mistral";
  c.vocab_size = 32000;
  c.hidden = 4096;
  c.layers = 32;
  c.heads = 32;
  c.kv_heads = 8;
  c.head_dim = 128;
  c.ffn = 14336;
  c.max_positions = 32768;
  c.norm_eps = 1e-5f;
  c.rope.theta = 10000.0f;
  c.sliding_window = 4096;
  c.activation = Activation::Silu;
  c.causal = true;
  return c;
}

}  // namespace

Architecture mistral_architecture() {
  return Architecture{
      .name = "mistral",
      .model_types = {"mistral"},
      .hf_classes = {"MistralForCausalLM", "MistralModel"},
      .parse_config = mistral_parse,
      .canonical_name = decoder::canonical_name,
      .build_graph =
          [](const ModelConfig& c, const HasTensor& has_tensor) {
            return decoder::build_graph(c, {}, has_tensor);
          },
      .config_json = mistral_to_config_json,
      .checkpoint_name = [](const std::string& name) { return name; },
      .presets = {{"mistral-7b", preset_7b()}},
  };
}

}  // namespace huddle
