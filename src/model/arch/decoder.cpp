#include "model/arch/decoder.h"

#include "core/error.h"
#include "model/graph_builder.h"
#include "model/rope_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace huddle::decoder {
namespace {

using kernels::WeightLayout;

// A projection's weight and bias (-1: none): whole tensors, or rows [begin, end) of fused ones.
struct Proj {
  ValueId w = -1;
  ValueId bias = -1;
};

}  // namespace

std::vector<std::string_view> understood_fields(std::initializer_list<std::string_view> own) {
  std::vector<std::string_view> fields = {
      "vocab_size",          "hidden_size",         "intermediate_size", "num_hidden_layers",
      "num_attention_heads", "num_key_value_heads", "head_dim",          "max_position_embeddings",
      "rms_norm_eps",        "rope_theta",          "rope_scaling",      "hidden_act",
      "tie_word_embeddings"};
  fields.insert(fields.end(), own);
  return fields;
}

std::int64_t read_sliding_window(const ConfigReader& r, std::int64_t absent) {
  const std::int64_t window =
      r.contains("sliding_window") ? r.integer_or("sliding_window", 0) : absent;
  if (r.has("sliding_window") && window <= 0) {
    throw LoadError(
        fmt::format("{}: sliding_window must be positive or null, is {}", r.source(), window));
  }
  return window;
}

std::optional<std::string> canonical_name(std::string_view name) {
  if (name.ends_with("rotary_emb.inv_freq")) return std::nullopt;
  return std::string(name);
}

ModelConfig parse_config(const ConfigReader& r, const Defaults& defaults) {
  ModelConfig c;
  c.architecture = defaults.architecture;
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
  if (c.head_dim % 2 != 0) {
    throw LoadError(fmt::format("{}: head_dim {} must be even for RoPE", r.source(), c.head_dim));
  }
  c.ffn = r.integer("intermediate_size");
  const std::int64_t max_position_embeddings =
      r.integer_or("max_position_embeddings", defaults.max_position_embeddings);
  c.norm_eps = static_cast<float>(r.number_or("rms_norm_eps", defaults.rms_norm_eps));
  c.rope = parse_rope(r, defaults.rope_theta, max_position_embeddings);
  c.max_positions = context_length(c.rope, max_position_embeddings);
  const std::string act = r.string_or("hidden_act", "silu");
  if (act != "silu") {
    throw LoadError(fmt::format("{}: hidden_act '{}' is not supported (silu)", r.source(), act));
  }
  c.activation = Activation::Silu;
  c.causal = true;
  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", defaults.tie_word_embeddings);
  c.bos_ids = r.int_list("bos_token_id");
  c.eos_ids = r.int_list("eos_token_id");
  return c;
}

Graph build_graph(const ModelConfig& c, const Layout& layout, const HasTensor& has_tensor) {
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
    // A whole [out, in] projection `name` (+ bias).
    auto whole = [&](const std::string& name, std::int64_t out, std::int64_t in, bool bias) {
      return Proj{b.weight(p + name + ".weight", {out, in}),
                  bias ? b.weight(p + name + ".bias", {out}) : -1};
    };
    // Rows [begin, end) of the fused [total, in] projection `name` (+ bias).
    auto part = [&](const std::string& name, std::int64_t total, std::int64_t in,
                    std::int64_t begin, std::int64_t end, bool bias) {
      return Proj{b.weight_slice(p + name + ".weight", {total, in}, 0, begin, end),
                  bias ? b.weight_slice(p + name + ".bias", {total}, 0, begin, end) : -1};
    };
    auto linear = [&](const char* name, ValueId input, const Proj& w, OpRole role) {
      return b.linear(name, input, w.w, w.bias, WeightLayout::OutIn, role);
    };

    ValueId h = b.rms_norm("attn_norm", x, b.weight(p + "input_layernorm.weight", {H}), c.norm_eps,
                           OpRole::AttnNorm);
    Proj wq, wk, wv;
    if (layout.fused_qkv) {
      const std::int64_t total = q_width + 2 * kv_width;
      wq = part("self_attn.qkv_proj", total, H, 0, q_width, c.qkv_bias);
      wk = part("self_attn.qkv_proj", total, H, q_width, q_width + kv_width, c.qkv_bias);
      wv = part("self_attn.qkv_proj", total, H, q_width + kv_width, total, c.qkv_bias);
    } else {
      wq = whole("self_attn.q_proj", q_width, H, c.qkv_bias);
      wk = whole("self_attn.k_proj", kv_width, H, c.qkv_bias);
      wv = whole("self_attn.v_proj", kv_width, H, c.qkv_bias);
    }
    ValueId q = linear("q", h, wq, OpRole::AttnQ);
    ValueId k = linear("k", h, wk, OpRole::AttnK);
    const ValueId v = linear("v", h, wv, OpRole::AttnV);
    q = b.rope("q_rope", q, positions, c.heads, c.head_dim, c.rope, OpRole::AttnRope);
    k = b.rope("k_rope", k, positions, c.kv_heads, c.head_dim, c.rope, OpRole::AttnRope);
    const ValueId a = b.attention("attn", q, k, v, c.heads, c.kv_heads, c.head_dim,
                                  /*causal=*/true, c.sliding_window);
    const ValueId o =
        linear("attn_out", a, whole("self_attn.o_proj", H, q_width, c.o_bias), OpRole::AttnOut);
    x = b.add("attn_residual", x, o, OpRole::AttnResidual);

    h = b.rms_norm("mlp_norm", x, b.weight(p + "post_attention_layernorm.weight", {H}), c.norm_eps,
                   OpRole::MlpNorm);
    Proj wgate, wup;
    if (layout.fused_gate_up) {
      wgate = part("mlp.gate_up_proj", 2 * F, H, 0, F, c.mlp_bias);
      wup = part("mlp.gate_up_proj", 2 * F, H, F, 2 * F, c.mlp_bias);
    } else {
      wgate = whole("mlp.gate_proj", F, H, c.mlp_bias);
      wup = whole("mlp.up_proj", F, H, c.mlp_bias);
    }
    const ValueId gate = linear("mlp_gate", h, wgate, OpRole::MlpGate);
    const ValueId up = linear("mlp_up", h, wup, OpRole::MlpUp);
    const ValueId act =
        b.mul("mlp_act", b.activation("mlp_silu", OpKind::Silu, gate, OpRole::MlpAct), up,
              OpRole::MlpAct);
    const ValueId d =
        linear("mlp_down", act, whole("mlp.down_proj", H, F, c.mlp_bias), OpRole::MlpDown);
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

nlohmann::json config_json(const ModelConfig& c) {
  const bool dynamic = c.rope.scaling == kernels::RopeScaling::Dynamic;
  nlohmann::json j = {
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden},
      {"intermediate_size", c.ffn},
      {"num_hidden_layers", c.layers},
      {"num_attention_heads", c.heads},
      {"num_key_value_heads", c.kv_heads},
      {"max_position_embeddings", dynamic ? c.rope.original_max_positions : c.max_positions},
      {"rms_norm_eps", c.norm_eps},
      {"rope_theta", c.rope.theta},
      {"rope_scaling", rope_scaling_json(c.rope)},
      {"hidden_act", "silu"},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
      {"torch_dtype", "float32"}};
  if (static_cast<std::int64_t>(c.head_dim) * c.heads != c.hidden) j["head_dim"] = c.head_dim;
  return j;
}

}  // namespace huddle::decoder
