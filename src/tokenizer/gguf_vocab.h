// Tokenizers in GGUF metadata (llama.cpp's tokenizer.ggml.* keys), both ways.
//
// GGUF holds a byte-level BPE tokenizer ("gpt2") as
//   tokenizer.ggml.model "gpt2", tokenizer.ggml.pre (the pre-tokenizer: "llama-bpe", "qwen2",
//   "gpt-2"), tokens [string; vocab], token_type [i32; vocab] (1 normal, 3 control, 4 user
//   defined, 5 unused), merges ["left right"], bos_token_id / eos_token_id (u32),
//   add_bos_token / add_eos_token (bool), and tokenizer.chat_template.
// Reading builds the tokenizer.json pipeline those keys stand for (pre-tokenizer regex per
// tokenizer.ggml.pre, as llama.cpp's llama-vocab.cpp) and hands it to the same code that reads
// tokenizer.json (tok::tokenizer_from_json). SentencePiece-style vocabularies ("llama": tokens +
// scores) and other models are refused by name.
#pragma once

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <memory>
#include <string>

namespace huddle::tok {

// The tokenizer of a GGUF file. LoadError naming the file and key when it has none, or one Huddle
// does not read.
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const io::GgufFile& file);
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& file);

// Writes <model_dir>'s tokenizer into `w`'s tokenizer.ggml.* keys, padded to `vocab_size` tokens
// as llama.cpp's converter does ("[PAD<id>]", unused): tokenizer.json as "gpt2", else a
// SentencePiece tokenizer.model as "llama". A directory with neither gets tokenizer.ggml.model
// "none" (llama.cpp then runs on token ids); the returned note says so (empty otherwise). LoadError
// naming the file and field when tokenizer.json is a kind GGUF cannot hold.
std::string write_gguf_vocab(io::GgufWriter& w, const std::filesystem::path& model_dir,
                             std::int64_t vocab_size);

}  // namespace huddle::tok
