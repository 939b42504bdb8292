// Llama (LlamaForCausalLM): RMSNorm, rotate-half RoPE, grouped-query attention, SwiGLU MLP,
// tied or untied output head.
//
// Checkpoint tensors (torch.nn.Linear weights are [out, in]):
//   model.embed_tokens.weight [V, H]
//   model.layers.N.input_layernorm.weight [H]
//   model.layers.N.self_attn.q_proj.weight [Hq·D, H]; k_proj, v_proj [Hkv·D, H]; o_proj [H, Hq·D]
//     (optional .bias on q/k/v/o when attention_bias is true)
//   model.layers.N.post_attention_layernorm.weight [H]
//   model.layers.N.mlp.{gate_proj,up_proj}.weight [F, H]; down_proj [H, F]
//   model.norm.weight [H]; lm_head.weight [V, H] (absent or ignored when tied)
#include "core/error.h"
#include "model/architecture.h"
#include "model/graph_builder.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace huddle {
namespace {

using kernels::WeightLayout;

ModelConfig parse(const ConfigReader& r) {
  ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = r.integer("vocab_size");
  c.hidden = r.integer("hidden_size");
  c.layers = r.integer("num_hidden_layers");
  c.heads = static_cast<int>(r.integer("num_attention_heads"));
  c.kv_heads = static_cast<int>(r.integer_or("num_key_value_heads", c.heads));  // absent: MHA
  if (c.heads <= 0)
    throw LoadError(fmt::format("{}: num_attention_heads must be positive", r.source()));
  if (!r.has("head_dim") && c.hidden % c.heads != 0) {
    throw LoadError(fmt::format("{}: hidden_size {} is not a multiple of num_attention_heads {}",
                                r.source(), c.hidden, c.heads));
  }
  c.head_dim = static_cast<int>(r.integer_or("head_dim", c.hidden / c.heads));
  c.ffn = r.integer("intermediate_size");
  c.max_positions = r.integer_or("max_position_embeddings", 2048);
  c.norm_eps = static_cast<float>(r.number_or("rms_norm_eps", 1e-6));
  c.rope_theta = static_cast<float>(r.number_or("rope_theta", 10000.0));  // absent: 10000
  if (r.has("rope_scaling")) {
    throw LoadError(fmt::format("{}: rope_scaling is not supported yet (only null)", r.source()));
  }
  const std::string act = r.string_or("hidden_act", "silu");
  if (act != "silu") {
    throw LoadError(fmt::format("{}: hidden_act '{}' is not supported (silu)", r.source(), act));
  }
  c.activation = Activation::Silu;
  c.causal = true;
  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
  c.bos_ids = r.int_list("bos_token_id");
  c.eos_ids = r.int_list("eos_token_id");
  return c;
}

std::optional<std::string> canonical(std::string_view name) {
  if (name.ends_with("rotary_emb.inv_freq")) return std::nullopt;  // buffer in old checkpoints
  return std::string(name);
}

Graph build(const ModelConfig& c, const HasTensor& has_tensor) {
  const std::int64_t H = c.hidden, F = c.ffn, V = c.vocab_size;
  const std::int64_t q_width = static_cast<std::int64_t>(c.heads) * c.head_dim;
  const std::int64_t kv_width = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
  GraphBuilder b;
  const ValueId ids = b.input("ids", DType::I32);
  const ValueId positions = b.input("positions", DType::I32);
  const ValueId embed = b.weight("model.embed_tokens.weight", {V, H});
  ValueId x = b.embedding("tok_embed", ids, embed, OpRole::Embed);
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    b.begin_block(l);
    auto proj = [&](const char* name, const std::string& w, std::int64_t out, std::int64_t in,
                    ValueId input, OpRole role) {
      const std::string bias = p + w + ".bias";
      return b.linear(name, input, b.weight(p + w + ".weight", {out, in}),
                      has_tensor(bias) ? b.weight(bias, {out}) : -1, WeightLayout::OutIn, role);
    };
    ValueId h = b.rms_norm("attn_norm", x, b.weight(p + "input_layernorm.weight", {H}), c.norm_eps,
                           OpRole::AttnNorm);
    ValueId q = proj("q", "self_attn.q_proj", q_width, H, h, OpRole::AttnQ);
    ValueId k = proj("k", "self_attn.k_proj", kv_width, H, h, OpRole::AttnK);
    const ValueId v = proj("v", "self_attn.v_proj", kv_width, H, h, OpRole::AttnV);
    q = b.rope("q_rope", q, positions, c.heads, c.head_dim, c.rope_theta, OpRole::AttnRope);
    k = b.rope("k_rope", k, positions, c.kv_heads, c.head_dim, c.rope_theta, OpRole::AttnRope);
    const ValueId a =
        b.attention("attn", q, k, v, c.heads, c.kv_heads, c.head_dim, /*causal=*/true);
    const ValueId o = proj("attn_out", "self_attn.o_proj", H, q_width, a, OpRole::AttnOut);
    x = b.add("attn_residual", x, o, OpRole::AttnResidual);
    h = b.rms_norm("mlp_norm", x, b.weight(p + "post_attention_layernorm.weight", {H}), c.norm_eps,
                   OpRole::MlpNorm);
    const ValueId gate = proj("mlp_gate", "mlp.gate_proj", F, H, h, OpRole::MlpGate);
    const ValueId up = proj("mlp_up", "mlp.up_proj", F, H, h, OpRole::MlpUp);
    const ValueId act =
        b.mul("mlp_act", b.activation("mlp_silu", OpKind::Silu, gate, OpRole::MlpAct), up,
              OpRole::MlpAct);
    const ValueId d = proj("mlp_down", "mlp.down_proj", H, F, act, OpRole::MlpDown);
    x = b.add("mlp_residual", x, d, OpRole::MlpResidual);
  }
  b.end_block();
  x = b.rms_norm("final_norm", x, b.weight("model.norm.weight", {H}), c.norm_eps,
                 OpRole::FinalNorm);
  x = b.last_row("last", x);
  const bool tied = c.tie_word_embeddings || !has_tensor("lm_head.weight");
  const ValueId head = tied ? embed : b.weight("lm_head.weight", {V, H});
  b.output(b.linear("logits", x, head, -1, WeightLayout::OutIn, OpRole::Head));
  return b.finish();
}

nlohmann::json to_config_json(const ModelConfig& c) {
  nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}},
                      {"model_type", "llama"},
                      {"vocab_size", c.vocab_size},
                      {"hidden_size", c.hidden},
                      {"intermediate_size", c.ffn},
                      {"num_hidden_layers", c.layers},
                      {"num_attention_heads", c.heads},
                      {"num_key_value_heads", c.kv_heads},
                      {"max_position_embeddings", c.max_positions},
                      {"rms_norm_eps", c.norm_eps},
                      {"rope_theta", c.rope_theta},
                      {"rope_scaling", nullptr},
                      {"hidden_act", "silu"},
                      {"tie_word_embeddings", c.tie_word_embeddings},
                      {"bos_token_id", 1},
                      {"eos_token_id", 2},
                      {"attention_bias", false},
                      {"torch_dtype", "float32"}};
  if (static_cast<std::int64_t>(c.head_dim) * c.heads != c.hidden) j["head_dim"] = c.head_dim;
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
  c.rope_theta = 10000.0f;
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
      .parse_config = parse,
      .canonical_name = canonical,
      .build_graph = build,
      .config_json = to_config_json,
      .checkpoint_name = [](const std::string& name) { return name; },
      .presets = {{"llama-1b", preset_1b()}},
  };
}

}  // namespace huddle
