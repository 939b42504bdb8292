// SentencePiece `tokenizer.model` files (Llama 1/2, Mistral, TinyLlama, ...): the file is read by
// spm_model_file.h (no libsentencepiece: docs/tokenizers.md) and runs as the same pipeline as a
// GGUF "llama" vocabulary (spm_pipeline.h, spm_bpe_model.h).
//
// encode: control pieces written in the text (e.g. "<s>", "</s>") are matched first and become
// their ids, as Hugging Face's tokenizers do; each stretch between them is normalized (spaces as
// U+2581, the dummy prefix) and encoded by SentencePiece BPE. add_special adds BOS / EOS as
// tokenizer_config.json's add_bos_token / add_eos_token say (defaults: BOS yes, EOS no, Llama's
// convention). decode: control pieces are written as their text unless skip_special.
//
// Models Huddle does not run this way are refused by name: unigram (T5, ALBERT, XLNet), word and
// char models, a precompiled normalization map (nmt_nfkc), whitespace as a suffix.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include "tokenizer/hf_tokenizer.h"

namespace huddle::tok {

struct SentencePieceOptions {
  bool add_bos = true;
  bool add_eos = false;
};

struct SentencePieceTokenizer {
  std::unique_ptr<HfTokenizer> tokenizer;
  std::optional<std::int32_t> bos_id;  // the model's own, when it has that control piece
  std::optional<std::int32_t> eos_id;
};

// LoadError naming the file when it cannot be read, is not a SentencePiece model, or is a kind
// above.
SentencePieceTokenizer load_sentencepiece_model(const std::filesystem::path& model_file,
                                                SentencePieceOptions options);

}  // namespace huddle::tok
