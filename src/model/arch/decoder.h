// The decoder Llama, Qwen2, Mistral and Phi-3 share: RMSNorm, rotate-half RoPE (rope_scaling
// included), grouped-query attention (optionally over a sliding window), SwiGLU MLP, tied or
// untied head. Each family's file says how config.json and the checkpoint spell it.
//
// Checkpoint tensors (torch.nn.Linear weights are [out, in]; D = head_dim):
//   model.embed_tokens.weight [V, H]
//   model.layers.N.input_layernorm.weight [H]
//   model.layers.N.self_attn.q_proj.weight [Hq·D, H]; k_proj, v_proj [Hkv·D, H]
//     (.bias [out] when ModelConfig::qkv_bias), or, fused, self_attn.qkv_proj.weight
//     [(Hq + 2·Hkv)·D, H] with q | k | v along out
//   model.layers.N.self_attn.o_proj.weight [H, Hq·D] (.bias [H] when o_bias)
//   model.layers.N.post_attention_layernorm.weight [H]
//   model.layers.N.mlp.{gate_proj,up_proj}.weight [F, H] (.bias when mlp_bias), or, fused,
//     mlp.gate_up_proj.weight [2F, H] with gate | up along out; mlp.down_proj.weight [H, F]
//   model.norm.weight [H]; lm_head.weight [V, H] (absent or ignored when tied)
// Fused tensors are declared whole and used as weight slices, so tensor-parallel plans cut heads
// and MLP columns inside them like any other linear.
#pragma once

#include "graph/graph.h"
#include "model/architecture.h"
#include "model/model_config.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::decoder {

// How a family stores its projections.
struct Layout {
  bool fused_qkv = false;      // self_attn.qkv_proj (Phi-3)
  bool fused_gate_up = false;  // mlp.gate_up_proj (Phi-3)
};

// A family's transformers defaults for absent config.json fields.
struct Defaults {
  std::string architecture;  // builder name
  double rms_norm_eps = 1e-6;
  std::int64_t max_position_embeddings = 2048;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
};

// The config.json fields parse_config reads, plus a family's `own`: what the family passes to
// refuse_unknown_fields (model/config_fields.h).
std::vector<std::string_view> understood_fields(std::initializer_list<std::string_view> own);

// Reads the shared fields: vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads (absent: MHA), head_dim (absent: hidden / heads,
// must be even), max_position_embeddings, rms_norm_eps, rope_theta and rope_scaling
// (model/rope_config.h), hidden_act (silu only), tie_word_embeddings, bos/eos ids. LoadError
// naming the field.
ModelConfig parse_config(const ConfigReader& r, const Defaults& defaults);

// `sliding_window`: absent -> `absent` (0: none), null -> none, else a positive window; LoadError
// naming the field otherwise.
std::int64_t read_sliding_window(const ConfigReader& r, std::int64_t absent);

// Checkpoint name -> canonical name: unchanged, except the rotary_emb.inv_freq buffers of old
// checkpoints (nullopt: the frequencies come from config.json).
std::optional<std::string> canonical_name(std::string_view name);

// The forward graph (logits of the last row; all rows on request).
Graph build_graph(const ModelConfig& c, const Layout& layout, const HasTensor& has_tensor);

// The shared fields as the hub writes them (`huddle synth`); the family adds model_type,
// architectures and its own fields.
nlohmann::json config_json(const ModelConfig& c);

}  // namespace huddle::decoder
