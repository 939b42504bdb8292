// SentencePiece `tokenizer.model` files (Llama 2, Mistral, T5, ...) through Debian's
// libsentencepiece, behind the Tokenizer interface.
//
// encode: control pieces written in the text (e.g. "<s>", "</s>") are matched first and become
// their ids, as Hugging Face's slow tokenizers do; each stretch between them is encoded by
// SentencePiece. add_special adds BOS / EOS as tokenizer_config.json's add_bos_token /
// add_eos_token say (defaults: BOS yes, EOS no, Llama's convention). decode: control pieces are
// written as their text unless skip_special; the rest is decoded by SentencePiece.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace huddle::tok {

struct SentencePieceOptions {
  bool add_bos = true;
  bool add_eos = false;
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Throws LoadError naming the file when it cannot be read or is not a SentencePiece model.
  SentencePieceTokenizer(const std::filesystem::path& model_file, SentencePieceOptions options);
  ~SentencePieceTokenizer() override;

  std::optional<std::int32_t> sp_bos_id() const;
  std::optional<std::int32_t> sp_eos_id() const;

 private:
  std::vector<std::int32_t> do_encode_ordinary(std::string_view text) const override;
  void do_add_special_tokens(std::vector<std::int32_t>& ids) const override;
  std::size_t do_num_special_tokens_to_add() const override;
  std::string do_decode(std::span<const std::int32_t> ids, bool skip_special) const override;
  std::optional<std::int32_t> do_token_to_id(std::string_view token) const override;
  std::optional<std::string> do_id_to_token(std::int32_t id) const override;
  bool do_is_special(std::int32_t id) const override;
  std::size_t do_vocab_size() const override;
  std::string_view do_kind() const override { return "SentencePiece"; }

  void encode_plain(std::string_view text, std::vector<std::int32_t>& ids) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  SentencePieceOptions options_;
  std::string file_;
  // Control pieces matched in the text, longest first.
  std::vector<std::pair<std::string, std::int32_t>> control_pieces_;
};

}  // namespace huddle::tok
