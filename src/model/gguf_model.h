// A GGUF file (llama.cpp's format) as a Huddle model, for general.architecture "llama" and "qwen2".
//
// The config is rebuilt from the metadata as the same config.json the Hugging Face directory would
// have (arch/<name>.cpp's config_json), so one parser and validator checks both:
//   {arch}.embedding_length -> hidden_size      {arch}.block_count -> num_hidden_layers
//   {arch}.feed_forward_length -> intermediate_size
//   {arch}.attention.head_count(_kv) -> num_attention_heads / num_key_value_heads
//   {arch}.attention.key_length -> head_dim (default hidden / heads; value_length and
//     rope.dimension_count must equal it: partial rotary is refused)
//   {arch}.context_length -> max_position_embeddings   {arch}.rope.freq_base -> rope_theta
//   {arch}.attention.layer_norm_rms_epsilon -> rms_norm_eps
//   {arch}.rope.scaling.type none|linear (+ .factor) -> rope_scaling; others are refused
//   rope_freqs.weight (Llama 3 scaling as per-frequency factors): read only with the
//     huddle.rope_scaling key `huddle quantize` writes beside it (the rope_scaling JSON); refused
//     otherwise, never ignored
//   token_embd.weight rows -> vocab_size; output.weight absent -> tie_word_embeddings
//   blk.0.attn_q.bias / ffn_gate.bias present -> llama's attention_bias / mlp_bias
//   tokenizer.ggml.bos_token_id / eos_token_id -> bos_token_id / eos_token_id
// Tensors are offered under their Hugging Face names (model/gguf_names.h), llama's q/k rows put
// back in Hugging Face order.
#pragma once

#include "io/gguf.h"
#include "model/model_source.h"

#include <nlohmann/json.hpp>

#include <filesystem>

namespace huddle {

// config.json for the GGUF's model. LoadError naming the file and the key at fault.
nlohmann::json gguf_config_json(const io::GgufFile& file);

// The GGUF's config and tensors. LoadError naming the file (and key or tensor).
ModelSource open_gguf_model(const std::filesystem::path& path);

}  // namespace huddle
