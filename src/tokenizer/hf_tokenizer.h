// A Hugging Face tokenizer.json pipeline: added tokens -> normalizer -> pre-tokenizer -> model ->
// post-processor, and token strings -> decoder for the way back.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/decoders.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processors.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/tokenizer.h"

namespace huddle::tok {

struct HfPipeline {
  std::vector<AddedToken> added_tokens;
  std::unique_ptr<Normalizer> normalizer;         // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;    // may be null
  std::unique_ptr<Model> model;                   // required
  std::unique_ptr<PostProcessor> post_processor;  // may be null
  std::unique_ptr<Decoder> decoder;               // may be null: tokens joined with spaces
};

class HfTokenizer final : public Tokenizer {
 public:
  explicit HfTokenizer(HfPipeline pipeline);

  // Whether invalid UTF-8 input reaches the model as raw bytes (byte-level BPE or byte_fallback,
  // with no Unicode normalizer) rather than being repaired to U+FFFD first.
  bool passes_raw_bytes() const { return raw_bytes_; }

 private:
  std::vector<std::int32_t> do_encode_ordinary(std::string_view text) const override;
  void do_add_special_tokens(std::vector<std::int32_t>& ids) const override;
  std::size_t do_num_special_tokens_to_add() const override;
  std::string do_decode(std::span<const std::int32_t> ids, bool skip_special) const override;
  std::optional<std::int32_t> do_token_to_id(std::string_view token) const override;
  std::optional<std::string> do_id_to_token(std::int32_t id) const override;
  bool do_is_special(std::int32_t id) const override;
  std::size_t do_vocab_size() const override { return vocab_size_; }
  std::string_view do_kind() const override { return pipeline_.model->kind(); }

  void encode_segment(std::string_view text, bool at_origin, std::vector<std::int32_t>& ids) const;

  HfPipeline pipeline_;
  AddedVocabulary added_;
  bool raw_bytes_ = false;
  std::size_t vocab_size_ = 0;
};

// Builds a tokenizer from a parsed tokenizer.json. Throws LoadError naming the field at fault.
// `model`, when given, is the pipeline's model and root has none (a GGUF "llama" vocabulary's
// SentencePiece BPE, which tokenizer.json has no type for).
std::unique_ptr<HfTokenizer> tokenizer_from_json(const Json& root,
                                                 std::unique_ptr<Model> model = nullptr);

// Reads and builds <file>. Throws LoadError naming the file (and the field at fault).
std::unique_ptr<HfTokenizer> load_tokenizer_json(const std::filesystem::path& file);

}  // namespace huddle::tok
