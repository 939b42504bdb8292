// The tokenizer.json pipeline around a SentencePiece BPE model (spm_bpe_model.h), shared by GGUF
// "llama" vocabularies (gguf_vocab.h) and tokenizer.model files (sentencepiece_tokenizer.h): the
// parts Hugging Face's Llama tokenizer.json has, written as JSON for tokenizer_from_json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/json_fields.h"
#include "tokenizer/spm_bpe_model.h"

namespace huddle::tok {

struct SpmPipelineOptions {
  bool add_space_prefix = true;           // a leading U+2581 (SentencePiece's dummy prefix)
  bool remove_extra_whitespaces = false;  // strip the ends and collapse runs of spaces first
};

// Sets root["added_tokens"] (control pieces special, user-defined pieces not: both matched in
// the text before the model), root["normalizer"] (spaces as U+2581, the dummy prefix before
// every stretch of text between added tokens) and root["decoder"] (U+2581 as spaces, byte
// pieces fused into text, the first dummy prefix's space stripped).
void spm_pipeline_json(const std::vector<ScoredPiece>& pieces, const SpmPipelineOptions& options,
                       Json& root);

// A TemplateProcessing post-processor adding `bos` before and `eos` after the text, where given;
// `tokens[id]` is each id's token string.
Json template_processor_json(std::optional<std::int32_t> bos, std::optional<std::int32_t> eos,
                             const std::vector<std::string>& tokens);

}  // namespace huddle::tok
