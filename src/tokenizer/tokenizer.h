// Tokenizer: text <-> token ids, exactly as the checkpoint's authors tokenize.
//
// A model directory carries its tokenizer as a Hugging Face `tokenizer.json` (byte-level BPE:
// GPT-2, Llama 3, Qwen; WordPiece: BERT) or a SentencePiece `tokenizer.model` (Llama 2 and
// others). Tokenizer::load picks the right one and reads the special ids (BOS, EOS, context length)
// from the directory's config files. docs/tokenizers.md lists what is supported.
//
// Text is UTF-8. Input that is not valid UTF-8 never crashes: byte-level BPE (and BPE with
// byte_fallback) encodes the raw bytes unchanged, other tokenizers first replace each ill-formed
// subsequence with U+FFFD. decode() always returns valid UTF-8: bytes that do not form a complete
// character become U+FFFD, as Hugging Face does. All methods are const and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace huddle {

// What encode_for_context does with text longer than the context.
enum class Truncation {
  kError,      // throw InputError (the default: never cut a prompt silently)
  kKeepStart,  // drop tokens from the end ("right" truncation)
  kKeepEnd,    // drop tokens from the start ("left" truncation, keeps the latest text)
};

// Special ids and limits read from the model directory (config.json, generation_config.json,
// tokenizer_config.json); empty when not known.
struct TokenizerModelInfo {
  std::optional<std::int32_t> bos_id;
  std::vector<std::int32_t> eos_ids;
  std::optional<std::size_t> context_length;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Loads <model_dir>/tokenizer.json, else <model_dir>/tokenizer.model (SentencePiece); given a
  // GGUF file, its tokenizer.ggml.* metadata (tokenizer/gguf_vocab.h). Throws
  // LoadError naming the directory and both files when neither exists, and naming the file and
  // field (or the unsupported component type) when one is malformed.
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& model_dir);

  // Token ids of `text`. add_special applies the tokenizer's post-processor (Llama's BOS, BERT's
  // [CLS] ... [SEP]). Special-token text inside `text` (e.g. "<|endoftext|>") is matched before
  // anything else and becomes its id, as Hugging Face does.
  std::vector<std::int32_t> encode(std::string_view text, bool add_special = true) const;

  // encode() whose result, special tokens included, has at most max_tokens ids. Longer text throws
  // InputError stating both lengths, unless `truncation` asks to cut it; truncation removes text
  // tokens and keeps the special ones.
  std::vector<std::int32_t> encode_for_context(std::string_view text, std::size_t max_tokens,
                                               Truncation truncation = Truncation::kError,
                                               bool add_special = true) const;

  // The text of `ids`. skip_special drops special tokens (BOS, EOS, [CLS], ...). Throws InputError
  // naming the first id that is not in the vocabulary.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special = false) const;

  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  // The vocabulary string of id (for byte-level BPE, in the byte-to-unicode alphabet).
  std::optional<std::string> id_to_token(std::int32_t id) const;
  bool is_special(std::int32_t id) const;
  // One more than the largest id (model vocabulary and added tokens).
  std::size_t vocab_size() const;
  // Number of ids add_special adds to one sequence.
  std::size_t num_special_tokens_to_add() const;
  // "BPE", "WordPiece" or "SentencePiece".
  std::string_view kind() const;

  std::optional<std::int32_t> bos_id() const { return info_.bos_id; }
  // The first end-of-sequence id, if any (generation stops on any of eos_ids()).
  std::optional<std::int32_t> eos_id() const;
  const std::vector<std::int32_t>& eos_ids() const { return info_.eos_ids; }
  std::optional<std::size_t> context_length() const { return info_.context_length; }
  const TokenizerModelInfo& model_info() const { return info_; }
  void set_model_info(TokenizerModelInfo info) { info_ = std::move(info); }

  // The pieces below are what encode() is made of; usable on their own.
  // Token ids of `text` without the post-processor's special tokens.
  std::vector<std::int32_t> encode_ordinary(std::string_view text) const;
  // Adds the post-processor's special tokens around one sequence of ids.
  void add_special_tokens(std::vector<std::int32_t>& ids) const;

 protected:
  Tokenizer() = default;

 private:
  virtual std::vector<std::int32_t> do_encode_ordinary(std::string_view text) const = 0;
  virtual void do_add_special_tokens(std::vector<std::int32_t>& ids) const = 0;
  virtual std::size_t do_num_special_tokens_to_add() const = 0;
  // ids are known to be in range.
  virtual std::string do_decode(std::span<const std::int32_t> ids, bool skip_special) const = 0;
  virtual std::optional<std::int32_t> do_token_to_id(std::string_view token) const = 0;
  virtual std::optional<std::string> do_id_to_token(std::int32_t id) const = 0;
  virtual bool do_is_special(std::int32_t id) const = 0;
  virtual std::size_t do_vocab_size() const = 0;
  virtual std::string_view do_kind() const = 0;

  TokenizerModelInfo info_;
};

}  // namespace huddle
