// BERT encoder (BertModel): word + position + token-type embeddings, post-LayerNorm blocks,
// exact (erf) GELU. Output: the final hidden states [T, H] (token type 0 everywhere).
//
// Checkpoint tensors (canonical names; hub files may prefix "bert."):
//   embeddings.{word_embeddings [V,H], position_embeddings [P,H], token_type_embeddings
//   [2,H]}.weight embeddings.LayerNorm.{weight,bias} [H]
//   encoder.layer.N.attention.self.{query,key,value}.{weight [H,H], bias [H]}
//   encoder.layer.N.attention.output.dense.{weight [H,H], bias}, .attention.output.LayerNorm.*
//   encoder.layer.N.intermediate.dense.{weight [F,H], bias [F]}
//   encoder.layer.N.output.dense.{weight [H,F], bias [H]}, encoder.layer.N.output.LayerNorm.*
// Ignored: pooler.*, cls.* (task heads). Old TF-converted files name LayerNorm gamma/beta.
#include "core/error.h"
#include "model/architecture.h"
#include "model/graph_builder.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace huddle {
namespace {

using kernels::WeightLayout;

ModelConfig bert_parse(const ConfigReader& r) {
  ModelConfig c;
  c.architecture = "bert";
  c.vocab_size = r.integer("vocab_size");
  c.hidden = r.integer("hidden_size");
  c.layers = r.integer("num_hidden_layers");
  c.heads = static_cast<int>(r.integer("num_attention_heads"));
  c.kv_heads = c.heads;
  if (c.heads <= 0 || c.hidden % c.heads != 0) {
    throw LoadError(fmt::format("{}: hidden_size {} is not a multiple of num_attention_heads {}",
                                r.source(), c.hidden, c.heads));
  }
  c.head_dim = static_cast<int>(c.hidden / c.heads);
  c.ffn = r.integer("intermediate_size");
  c.max_positions = r.integer_or("max_position_embeddings", 512);
  c.type_vocab_size = r.integer_or("type_vocab_size", 2);
  c.norm_eps = static_cast<float>(r.number_or("layer_norm_eps", 1e-12));
  const std::string act = r.string_or("hidden_act", "gelu");
  if (act == "gelu") {
    c.activation = Activation::GeluErf;
  } else if (act == "gelu_new" || act == "gelu_pytorch_tanh") {
    c.activation = Activation::GeluTanh;
  } else {
    throw LoadError(
        fmt::format("{}: hidden_act '{}' is not supported (gelu, gelu_new)", r.source(), act));
  }
  const std::string pos = r.string_or("position_embedding_type", "absolute");
  if (pos != "absolute") {
    throw LoadError(fmt::format("{}: position_embedding_type '{}' is not supported (absolute)",
                                r.source(), pos));
  }
  c.causal = false;
  c.tie_word_embeddings = false;
  return c;
}

std::optional<std::string> bert_canonical(std::string_view name) {
  constexpr std::string_view prefix = "bert.";
  if (name.starts_with(prefix)) name.remove_prefix(prefix.size());
  if (name.starts_with("cls.") || name.starts_with("pooler.")) return std::nullopt;
  std::string s(name);
  if (s.ends_with("LayerNorm.gamma")) s.replace(s.size() - 5, 5, "weight");
  if (s.ends_with("LayerNorm.beta")) s.replace(s.size() - 4, 4, "bias");
  return s;
}

Graph bert_build(const ModelConfig& c, const HasTensor& /*has_tensor*/) {
  const std::int64_t H = c.hidden, F = c.ffn;
  GraphBuilder b;
  const ValueId ids = b.input("ids", DType::I32);
  const ValueId positions = b.input("positions", DType::I32);
  const ValueId types = b.input("token_types", DType::I32);
  // Values are made one statement at a time, never two in one call's arguments (whose order
  // of evaluation gcc and clang differ on): the graph's order must not depend on the compiler,
  // since a worker receives its weights in that order.
  auto weight_and_bias = [&](const std::string& name, Shape weight_shape, Shape bias_shape) {
    const ValueId w = b.weight(name + ".weight", std::move(weight_shape));
    return std::pair{w, b.weight(name + ".bias", std::move(bias_shape))};
  };
  const ValueId word_table = b.weight("embeddings.word_embeddings.weight", {c.vocab_size, H});
  ValueId x = b.embedding("tok_embed", ids, word_table, OpRole::Embed);
  const ValueId position_table =
      b.weight("embeddings.position_embeddings.weight", {c.max_positions, H});
  const ValueId places = b.embedding("pos_embed", positions, position_table, OpRole::Embed);
  x = b.add("pos_add", x, places, OpRole::Embed);
  const ValueId type_table =
      b.weight("embeddings.token_type_embeddings.weight", {c.type_vocab_size, H});
  const ValueId kinds = b.embedding("type_embed", types, type_table, OpRole::Embed);
  x = b.add("type_add", x, kinds, OpRole::Embed);
  const auto [embed_norm_w, embed_norm_b] = weight_and_bias("embeddings.LayerNorm", {H}, {H});
  x = b.layer_norm("embed_norm", x, embed_norm_w, embed_norm_b, c.norm_eps, OpRole::Embed);
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = fmt::format("encoder.layer.{}.", l);
    b.begin_block(l);
    auto proj = [&](const char* name, const std::string& w, std::int64_t out, std::int64_t in,
                    ValueId input, OpRole role) {
      const auto [weight, bias] = weight_and_bias(p + w, {out, in}, {out});
      return b.linear(name, input, weight, bias, WeightLayout::OutIn, role);
    };
    const ValueId q = proj("q", "attention.self.query", H, H, x, OpRole::AttnQ);
    const ValueId k = proj("k", "attention.self.key", H, H, x, OpRole::AttnK);
    const ValueId v = proj("v", "attention.self.value", H, H, x, OpRole::AttnV);
    const ValueId a =
        b.attention("attn", q, k, v, c.heads, c.kv_heads, c.head_dim, /*causal=*/false);
    const ValueId o = proj("attn_out", "attention.output.dense", H, H, a, OpRole::AttnOut);
    x = b.add("attn_residual", x, o, OpRole::AttnResidual);
    const auto [attn_norm_w, attn_norm_b] =
        weight_and_bias(p + "attention.output.LayerNorm", {H}, {H});
    x = b.layer_norm("attn_norm", x, attn_norm_w, attn_norm_b, c.norm_eps, OpRole::AttnNorm);
    ValueId f = proj("mlp_up", "intermediate.dense", F, H, x, OpRole::MlpUp);
    f = b.activation("mlp_act",
                     c.activation == Activation::GeluErf ? OpKind::GeluErf : OpKind::GeluTanh, f,
                     OpRole::MlpAct);
    const ValueId d = proj("mlp_down", "output.dense", H, F, f, OpRole::MlpDown);
    x = b.add("mlp_residual", x, d, OpRole::MlpResidual);
    const auto [mlp_norm_w, mlp_norm_b] = weight_and_bias(p + "output.LayerNorm", {H}, {H});
    x = b.layer_norm("mlp_norm", x, mlp_norm_w, mlp_norm_b, c.norm_eps, OpRole::MlpNorm);
  }
  b.end_block();
  b.output(x);
  return b.finish();
}

nlohmann::json bert_to_config_json(const ModelConfig& c) {
  return {{"architectures", {"BertModel"}},
          {"model_type", "bert"},
          {"vocab_size", c.vocab_size},
          {"hidden_size", c.hidden},
          {"num_hidden_layers", c.layers},
          {"num_attention_heads", c.heads},
          {"intermediate_size", c.ffn},
          {"hidden_act", c.activation == Activation::GeluErf ? "gelu" : "gelu_new"},
          {"max_position_embeddings", c.max_positions},
          {"type_vocab_size", c.type_vocab_size},
          {"layer_norm_eps", c.norm_eps},
          {"pad_token_id", 0},
          {"position_embedding_type", "absolute"},
          {"torch_dtype", "float32"}};
}

ModelConfig bert_preset(std::int64_t hidden, std::int64_t layers, int heads) {
  ModelConfig c;
  c.architecture = "bert";
  c.vocab_size = 30522;
  c.hidden = hidden;
  c.layers = layers;
  c.heads = c.kv_heads = heads;
  c.head_dim = static_cast<int>(hidden / heads);
  c.ffn = 4 * hidden;
  c.max_positions = 512;
  c.type_vocab_size = 2;
  c.norm_eps = 1e-12f;
  c.activation = Activation::GeluErf;
  c.causal = false;
  return c;
}

}  // namespace

Architecture bert_architecture() {
  return Architecture{
      .name = "bert",
      .model_types = {"bert"},
      .hf_classes = {"BertModel", "BertForMaskedLM", "BertForPreTraining"},
      .parse_config = bert_parse,
      .canonical_name = bert_canonical,
      .build_graph = bert_build,
      .config_json = bert_to_config_json,
      .checkpoint_name = [](const std::string& name) { return name; },
      .presets = {{"bert-base", bert_preset(768, 12, 12)},
                  {"bert-large", bert_preset(1024, 24, 16)}},
  };
}

}  // namespace huddle
