#include "model/gguf_names.h"

#include "core/error.h"

#include <array>
#include <cstring>
#include <utility>

namespace huddle {

namespace {

constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kGlobal = {{
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
}};

// Per layer: GGUF suffix after "blk.N.", HF suffix after "model.layers.N.".
constexpr std::array<std::pair<std::string_view, std::string_view>, 16> kLayer = {{
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_gate.bias", "mlp.gate_proj.bias"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_up.bias", "mlp.up_proj.bias"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_down.bias", "mlp.down_proj.bias"},
}};

// "<prefix>N.<rest>" -> (N, rest) when N is a plain decimal layer number.
std::optional<std::pair<std::string_view, std::string_view>> split_layer(std::string_view name,
                                                                         std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  name.remove_prefix(prefix.size());
  const std::size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 9) return std::nullopt;
  const std::string_view number = name.substr(0, dot);
  for (char ch : number) {
    if (ch < '0' || ch > '9') return std::nullopt;
  }
  if (number.size() > 1 && number[0] == '0') return std::nullopt;
  return std::pair{number, name.substr(dot + 1)};
}

std::optional<std::string> translate(std::string_view name, bool from_gguf) {
  for (const auto& [g, h] : kGlobal) {
    if (name == (from_gguf ? g : h)) return std::string(from_gguf ? h : g);
  }
  const auto parts = split_layer(name, from_gguf ? "blk." : "model.layers.");
  if (!parts) return std::nullopt;
  for (const auto& [g, h] : kLayer) {
    if (parts->second == (from_gguf ? g : h)) {
      return std::string(from_gguf ? "model.layers." : "blk.") + std::string(parts->first) + "." +
             std::string(from_gguf ? h : g);
    }
  }
  return std::nullopt;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::optional<std::string> gguf_to_hf_name(std::string_view gguf_name) {
  return translate(gguf_name, true);
}

std::optional<std::string> hf_to_gguf_name(std::string_view hf_name) {
  return translate(hf_name, false);
}

int rope_permute_heads(std::string_view arch, std::string_view hf_name, int heads, int kv_heads) {
  if (arch != "llama") return 0;
  if (ends_with(hf_name, ".self_attn.q_proj.weight") ||
      ends_with(hf_name, ".self_attn.q_proj.bias"))
    return heads;
  if (ends_with(hf_name, ".self_attn.k_proj.weight") ||
      ends_with(hf_name, ".self_attn.k_proj.bias"))
    return kv_heads;
  return 0;
}

void permute_rope_rows(std::span<const std::byte> src, std::span<std::byte> dst, std::int64_t rows,
                       std::size_t row_bytes, int heads, bool to_gguf) {
  HUDDLE_CHECK(heads > 0 && rows % (2 * heads) == 0, "{} rows over {} heads", rows, heads);
  HUDDLE_CHECK(src.size() == static_cast<std::size_t>(rows) * row_bytes && dst.size() == src.size(),
               "permute_rope_rows: {} / {} bytes for {} rows of {}", src.size(), dst.size(), rows,
               row_bytes);
  const std::int64_t d = rows / heads;
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t a = 0; a < 2; ++a) {
      for (std::int64_t b = 0; b < d / 2; ++b) {
        const std::int64_t hf = h * d + a * (d / 2) + b;
        const std::int64_t gg = h * d + 2 * b + a;
        const std::int64_t from = to_gguf ? hf : gg;
        const std::int64_t to = to_gguf ? gg : hf;
        std::memcpy(dst.data() + static_cast<std::size_t>(to) * row_bytes,
                    src.data() + static_cast<std::size_t>(from) * row_bytes, row_bytes);
      }
    }
  }
}

}  // namespace huddle
