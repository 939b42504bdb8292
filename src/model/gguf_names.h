// How llama.cpp's GGUF files name and lay out the tensors of the llama / qwen2 decoder, against
// the Hugging Face names Huddle's graph uses (arch/decoder.h):
//   token_embd.weight        model.embed_tokens.weight
//   output_norm.weight       model.norm.weight
//   output.weight            lm_head.weight (absent: tied to token_embd)
//   blk.N.attn_norm.weight   model.layers.N.input_layernorm.weight
//   blk.N.attn_{q,k,v}.*     model.layers.N.self_attn.{q,k,v}_proj.*   (weight, bias)
//   blk.N.attn_output.*      model.layers.N.self_attn.o_proj.*
//   blk.N.ffn_norm.weight    model.layers.N.post_attention_layernorm.weight
//   blk.N.ffn_{gate,up,down}.*  model.layers.N.mlp.{gate,up,down}_proj.*
// Shapes are the same once GGUF's ne order is reversed ([out, in]).
//
// llama.cpp's convert_hf_to_gguf.py (LlamaModel.permute) reorders the rows of llama's q_proj and
// k_proj (weights and biases) within each head, from Hugging Face's rotate-half pairing to the
// interleaved pairing its rope kernel uses: HF row h·D + a·D/2 + b  ->  GGUF row h·D + 2b + a
// (a in {0,1}, b < D/2, D the head dim; k uses the kv head count). Qwen2 is not permuted (llama.cpp
// runs it with NeoX-style rope). Rows move whole, so this works on block-quantised rows too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace huddle {

// nullopt when the name is not one of the decoder tensors above.
std::optional<std::string> gguf_to_hf_name(std::string_view gguf_name);
std::optional<std::string> hf_to_gguf_name(std::string_view hf_name);

// How many heads the rows of Hugging Face tensor `hf_name` are permuted over in a GGUF of
// architecture `arch` (llama: q -> heads, k -> kv_heads); 0 when not permuted.
int rope_permute_heads(std::string_view arch, std::string_view hf_name, int heads, int kv_heads);

// dst = src with its `rows` rows of `row_bytes` reordered as above: HF order -> GGUF order when
// `to_gguf`, else back. rows must be a multiple of 2·heads; src and dst must not overlap.
void permute_rope_rows(std::span<const std::byte> src, std::span<std::byte> dst, std::int64_t rows,
                       std::size_t row_bytes, int heads, bool to_gguf);

}  // namespace huddle
