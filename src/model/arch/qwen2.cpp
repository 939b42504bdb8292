// Qwen2 / Qwen2.5 (Qwen2ForCausalLM): the shared decoder (arch/decoder.h) with biases on the
// q/k/v projections (always, as transformers' Qwen2Attention has them; none on o_proj or the MLP).
//
// config.json: the decoder's shared fields (defaults: rms_norm_eps 1e-6, max_position_embeddings
// 32768, tie_word_embeddings false; the small sizes set it true), plus the sliding-window fields:
// Huddle runs full attention, so use_sliding_window must be false (then sliding_window and
// max_window_layers do nothing) and layer_types, when given, all "full_attention".
// Checkpoint: arch/decoder.h's unfused tensors with q/k/v biases.
#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/architecture.h"
#include "model/config_fields.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace huddle {
namespace {

ModelConfig qwen2_parse(const ConfigReader& r) {
  refuse_unknown_fields(r, "qwen2",
                        decoder::understood_fields({"use_sliding_window", "sliding_window",
                                                    "max_window_layers", "layer_types"}));
  if (r.boolean_or("use_sliding_window", false)) {
    throw LoadError(fmt::format(
        "{}: use_sliding_window true is not supported for qwen2 (per-layer sliding windows)",
        r.source()));
  }
  const std::vector<std::string> layer_types = r.string_list("layer_types");
  for (std::size_t i = 0; i < layer_types.size(); ++i) {
    if (layer_types[i] != "full_attention") {
      throw LoadError(
          fmt::format("{}: layer_types[{}] is '{}'; qwen2 supports only 'full_attention' layers",
                      r.source(), i, layer_types[i]));
    }
  }
  ModelConfig c = decoder::parse_config(
      r, {.architecture = "qwen2", .rms_norm_eps = 1e-6, .max_position_embeddings = 32768});
  c.qkv_bias = true;
  return c;
}

nlohmann::json qwen2_to_config_json(const ModelConfig& c) {
  nlohmann::json j = decoder::config_json(c);
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["model_type"] = "qwen2";
  j["use_sliding_window"] = false;
  return j;
}

ModelConfig preset_0_5b() {
  // Shapes of Qwen2.5-0.5B (hidden 896, 24 layers, GQA 14/2, SwiGLU 4864, tied embeddings).
  ModelConfig c;
  c.architecture = "qwen2";
  c.vocab_size = 151936;
  c.hidden = 896;
  c.layers = 24;
  c.heads = 14;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.ffn = 4864;
  c.max_positions = 32768;
  c.norm_eps = 1e-6f;
  c.rope.theta = 1000000.0f;
  c.qkv_bias = true;
  c.activation = Activation::Silu;
  c.causal = true;
  c.tie_word_embeddings = true;
  return c;
}

}  // namespace

Architecture qwen2_architecture() {
  return Architecture{
      .name = "qwen2",
      .model_types = {"qwen2"},
      .hf_classes = {"Qwen2ForCausalLM", "Qwen2Model"},
      .parse_config = qwen2_parse,
      .canonical_name = decoder::canonical_name,
      .build_graph =
          [](const ModelConfig& c, const HasTensor& has_tensor) {
            return decoder::build_graph(c, {}, has_tensor);
          },
      .config_json = qwen2_to_config_json,
      .checkpoint_name = [](const std::string& name) { return name; },
      .presets = {{"qwen2-0.5b", preset_0_5b()}},
  };
}

}  // namespace huddle
