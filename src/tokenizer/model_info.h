// Special ids and the context length from a model directory's config files.
//
// eos ids: generation_config.json "eos_token_id", else config.json "eos_token_id", else
// tokenizer_config.json "eos_token" looked up in the vocabulary, else the tokenizer's own (a
// SentencePiece model's eos piece). "eos_token_id" may be an int or a list of ints. BOS the same
// way with "bos_token_id" / "bos_token". Context length: config.json "max_position_embeddings",
// "n_positions" or "n_ctx", else tokenizer_config.json "model_max_length" when it is a real limit.
#pragma once

#include <filesystem>
#include <optional>

#include "tokenizer/tokenizer.h"

namespace huddle::tok {

// Fallbacks from the tokenizer file itself (SentencePiece's bos/eos pieces).
struct TokenizerDefaults {
  std::optional<std::int32_t> bos_id;
  std::optional<std::int32_t> eos_id;
};

// Throws LoadError naming the file and field when a config file exists but is malformed, or names
// an id outside the tokenizer's vocabulary.
TokenizerModelInfo read_model_info(const std::filesystem::path& model_dir,
                                   const Tokenizer& tokenizer, const TokenizerDefaults& defaults);

}  // namespace huddle::tok
