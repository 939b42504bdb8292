// Phi-3 (Phi3ForCausalLM): the shared decoder (arch/decoder.h) with fused projections:
// self_attn.qkv_proj [(Hq + 2·Hkv)·D, H] (q | k | v along out) and mlp.gate_up_proj [2F, H]
// (gate | up), used as weight slices so tensor-parallel plans cut heads and columns inside them.
//
// config.json: the decoder's shared fields (defaults: rms_norm_eps 1e-5, max_position_embeddings
// 4096), plus sliding_window (null or absent: full attention), partial_rotary_factor (1.0 only),
// attention_bias (false only), original_max_position_embeddings (read only by longrope, so
// harmless without it). rope_scaling must be null: longrope (Phi-3 128k, Phi-3.5) and the
// others are refused by name.
// Checkpoint: the fused tensors above, o_proj, down_proj, norms, embed_tokens, lm_head; no biases.
#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/architecture.h"
#include "model/config_fields.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace huddle {
namespace {

ModelConfig phi3_parse(const ConfigReader& r) {
  refuse_unknown_fields(
      r, "phi3",
      decoder::understood_fields({"sliding_window", "partial_rotary_factor", "attention_bias",
                                  "original_max_position_embeddings"}));
  if (r.has("rope_scaling")) {
    const ConfigReader s = r.object("rope_scaling");
    throw LoadError(fmt::format(
        "{}: rope_scaling type '{}' is not supported for phi3 (only rope_scaling: null; longrope "
        "is not implemented)",
        r.source(), s.string_or("rope_type", s.string_or("type", "?"))));
  }
  const double partial = r.number_or("partial_rotary_factor", 1.0);
  if (partial != 1.0) {
    throw LoadError(fmt::format("{}: partial_rotary_factor {} is not supported for phi3 (1.0 only)",
                                r.source(), partial));
  }
  if (r.boolean_or("attention_bias", false)) {
    throw LoadError(fmt::format("{}: attention_bias true is not supported for phi3", r.source()));
  }
  ModelConfig c = decoder::parse_config(
      r, {.architecture = "phi3", .rms_norm_eps = 1e-5, .max_position_embeddings = 4096});
  c.sliding_window = decoder::read_sliding_window(r, 0);
  return c;
}

nlohmann::json phi3_to_config_json(const ModelConfig& c) {
  nlohmann::json j = decoder::config_json(c);
  j["architectures"] = {"Phi3ForCausalLM"};
  j["model_type"] = "phi3";
  j["sliding_window"] = c.sliding_window > 0 ? nlohmann::json(c.sliding_window) : nullptr;
  return j;
}

ModelConfig preset_mini() {
  // Shapes of Phi-3-mini-4k (hidden 3072, 32 layers, 32 heads, SwiGLU 8192, window 2047).
  ModelConfig c;
  c.architecture = "phi3";
  c.vocab_size = 32064;
  c.hidden = 3072;
  c.layers = 32;
  c.heads = 32;
  c.kv_heads = 32;
  c.head_dim = 96;
  c.ffn = 8192;
  c.max_positions = 4096;
  c.norm_eps = 1e-5f;
  c.rope.theta = 10000.0f;
  c.sliding_window = 2047;
  c.activation = Activation::Silu;
  c.causal = true;
  return c;
}

}  // namespace

Architecture phi3_architecture() {
  return Architecture{
      .name = "phi3",
      .model_types = {"phi3"},
      .hf_classes = {"Phi3ForCausalLM", "Phi3Model"},
      .parse_config = phi3_parse,
      .canonical_name = decoder::canonical_name,
      .build_graph =
          [](const ModelConfig& c, const HasTensor& has_tensor) {
            return decoder::build_graph(c, {.fused_qkv = true, .fused_gate_up = true}, has_tensor);
          },
      .config_json = phi3_to_config_json,
      .checkpoint_name = [](const std::string& name) { return name; },
      .presets = {{"phi3-mini", preset_mini()}},
  };
}

}  // namespace huddle
