// GPT-2 (GPT2LMHeadModel): learned positions, pre-LayerNorm blocks, gelu_new MLP, tied head.
//
// Checkpoint tensors (canonical names; hub files may prefix "transformer."):
//   wte.weight [V, H], wpe.weight [P, H]
//   h.N.ln_1.{weight,bias} [H]
//   h.N.attn.c_attn.weight [H, 3H] (Conv1D: [in, out], q|k|v packed along out), .bias [3H]
//   h.N.attn.c_proj.weight [H, H], .bias [H]
//   h.N.ln_2.{weight,bias} [H]
//   h.N.mlp.c_fc.weight [H, F], .bias [F]; h.N.mlp.c_proj.weight [F, H], .bias [H]
//   ln_f.{weight,bias} [H]; lm_head.weight [V, H] only when untied
// Ignored: h.N.attn.bias and h.N.attn.masked_bias (causal-mask buffers).
#include "core/error.h"
#include "model/architecture.h"
#include "model/graph_builder.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace huddle {
namespace {

using kernels::WeightLayout;

ModelConfig gpt2_parse(const ConfigReader& r) {
  ModelConfig c;
  c.architecture = "gpt2";
  c.vocab_size = r.integer("vocab_size");
  c.hidden = r.integer("n_embd");
  c.layers = r.integer("n_layer");
  c.heads = static_cast<int>(r.integer("n_head"));
  c.kv_heads = c.heads;
  if (c.heads <= 0 || c.hidden % c.heads != 0) {
    throw LoadError(
        fmt::format("{}: n_embd {} is not a multiple of n_head {}", r.source(), c.hidden, c.heads));
  }
  c.head_dim = static_cast<int>(c.hidden / c.heads);
  c.ffn = r.integer_or("n_inner", 4 * c.hidden);  // n_inner: null means 4 * n_embd
  c.max_positions = r.integer_or("n_positions", r.integer_or("n_ctx", 1024));
  c.norm_eps = static_cast<float>(r.number_or("layer_norm_epsilon", 1e-5));
  const std::string act = r.string_or("activation_function", "gelu_new");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") {
    c.activation = Activation::GeluTanh;
  } else if (act == "gelu") {
    c.activation = Activation::GeluErf;
  } else {
    throw LoadError(fmt::format("{}: activation_function '{}' is not supported (gelu_new, gelu)",
                                r.source(), act));
  }
  c.causal = true;
  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", true);
  c.bos_ids = r.int_list("bos_token_id");
  c.eos_ids = r.int_list("eos_token_id");
  return c;
}

std::optional<std::string> gpt2_canonical(std::string_view name) {
  constexpr std::string_view prefix = "transformer.";
  if (name.starts_with(prefix)) name.remove_prefix(prefix.size());
  if (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")) return std::nullopt;
  return std::string(name);
}

Graph gpt2_build(const ModelConfig& c, const HasTensor& has_tensor) {
  const std::int64_t H = c.hidden, F = c.ffn, V = c.vocab_size;
  GraphBuilder b;
  const ValueId ids = b.input("ids", DType::I32);
  const ValueId positions = b.input("positions", DType::I32);
  // Values are made one statement at a time, never two in one call's arguments (whose order
  // of evaluation gcc and clang differ on): the graph's order must not depend on the compiler,
  // since a worker receives its weights in that order.
  const ValueId wte = b.weight("wte.weight", {V, H});
  const ValueId wpe = b.weight("wpe.weight", {c.max_positions, H});
  const ValueId tokens = b.embedding("tok_embed", ids, wte, OpRole::Embed);
  const ValueId places = b.embedding("pos_embed", positions, wpe, OpRole::Embed);
  ValueId x = b.add("embed", tokens, places, OpRole::Embed);
  auto weight_and_bias = [&](const std::string& name, Shape weight_shape, Shape bias_shape) {
    const ValueId w = b.weight(name + ".weight", std::move(weight_shape));
    return std::pair{w, b.weight(name + ".bias", std::move(bias_shape))};
  };
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = fmt::format("h.{}.", l);
    b.begin_block(l);
    const auto [ln1_w, ln1_b] = weight_and_bias(p + "ln_1", {H}, {H});
    ValueId h = b.layer_norm("attn_norm", x, ln1_w, ln1_b, c.norm_eps, OpRole::AttnNorm);
    auto qkv = [&](const char* name, int part, OpRole role) {
      const ValueId w =
          b.weight_slice(p + "attn.c_attn.weight", {H, 3 * H}, 1, part * H, (part + 1) * H);
      const ValueId bias =
          b.weight_slice(p + "attn.c_attn.bias", {3 * H}, 0, part * H, (part + 1) * H);
      return b.linear(name, h, w, bias, WeightLayout::InOut, role);
    };
    const ValueId q = qkv("q", 0, OpRole::AttnQ);
    const ValueId k = qkv("k", 1, OpRole::AttnK);
    const ValueId v = qkv("v", 2, OpRole::AttnV);
    const ValueId a =
        b.attention("attn", q, k, v, c.heads, c.kv_heads, c.head_dim, /*causal=*/true);
    const auto [proj_w, proj_b] = weight_and_bias(p + "attn.c_proj", {H, H}, {H});
    const ValueId o = b.linear("attn_out", a, proj_w, proj_b, WeightLayout::InOut, OpRole::AttnOut);
    x = b.add("attn_residual", x, o, OpRole::AttnResidual);
    const auto [ln2_w, ln2_b] = weight_and_bias(p + "ln_2", {H}, {H});
    h = b.layer_norm("mlp_norm", x, ln2_w, ln2_b, c.norm_eps, OpRole::MlpNorm);
    const auto [fc_w, fc_b] = weight_and_bias(p + "mlp.c_fc", {H, F}, {F});
    ValueId f = b.linear("mlp_up", h, fc_w, fc_b, WeightLayout::InOut, OpRole::MlpUp);
    f = b.activation("mlp_act",
                     c.activation == Activation::GeluErf ? OpKind::GeluErf : OpKind::GeluTanh, f,
                     OpRole::MlpAct);
    const auto [down_w, down_b] = weight_and_bias(p + "mlp.c_proj", {F, H}, {H});
    const ValueId d = b.linear("mlp_down", f, down_w, down_b, WeightLayout::InOut, OpRole::MlpDown);
    x = b.add("mlp_residual", x, d, OpRole::MlpResidual);
  }
  b.end_block();
  const auto [lnf_w, lnf_b] = weight_and_bias("ln_f", {H}, {H});
  x = b.layer_norm("final_norm", x, lnf_w, lnf_b, c.norm_eps, OpRole::FinalNorm);
  x = b.last_row("last", x);
  const bool tied = c.tie_word_embeddings || !has_tensor("lm_head.weight");
  const ValueId head = tied ? wte : b.weight("lm_head.weight", {V, H});
  b.output(b.linear("logits", x, head, -1, WeightLayout::OutIn, OpRole::Head));
  return b.finish();
}

nlohmann::json gpt2_to_config_json(const ModelConfig& c) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", c.vocab_size},
          {"n_embd", c.hidden},
          {"n_layer", c.layers},
          {"n_head", c.heads},
          {"n_positions", c.max_positions},
          {"n_ctx", c.max_positions},
          {"n_inner", c.ffn == 4 * c.hidden ? nlohmann::json(nullptr) : nlohmann::json(c.ffn)},
          {"activation_function", c.activation == Activation::GeluErf ? "gelu" : "gelu_new"},
          {"layer_norm_epsilon", c.norm_eps},
          {"tie_word_embeddings", c.tie_word_embeddings},
          {"bos_token_id", c.vocab_size - 1},
          {"eos_token_id", c.vocab_size - 1},
          {"torch_dtype", "float32"}};
}

ModelConfig gpt2_preset(std::int64_t hidden, std::int64_t layers, int heads) {
  ModelConfig c;
  c.architecture = "gpt2";
  c.vocab_size = 50257;
  c.hidden = hidden;
  c.layers = layers;
  c.heads = c.kv_heads = heads;
  c.head_dim = static_cast<int>(hidden / heads);
  c.ffn = 4 * hidden;
  c.max_positions = 1024;
  c.norm_eps = 1e-5f;
  c.activation = Activation::GeluTanh;
  c.causal = true;
  c.tie_word_embeddings = true;
  return c;
}

}  // namespace

Architecture gpt2_architecture() {
  return Architecture{
      .name = "gpt2",
      .model_types = {"gpt2"},
      .hf_classes = {"GPT2LMHeadModel", "GPT2Model"},
      .parse_config = gpt2_parse,
      .canonical_name = gpt2_canonical,
      .build_graph = gpt2_build,
      .config_json = gpt2_to_config_json,
      .checkpoint_name =
          [](const std::string& name) {
            return name == "lm_head.weight" ? name : "transformer." + name;
          },
      .presets = {{"gpt2", gpt2_preset(768, 12, 12)},
                  {"gpt2-medium", gpt2_preset(1024, 24, 16)},
                  {"gpt2-large", gpt2_preset(1280, 36, 20)},
                  {"gpt2-xl", gpt2_preset(1600, 48, 25)}},
  };
}

}  // namespace huddle
