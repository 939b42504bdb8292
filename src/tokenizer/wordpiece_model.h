// WordPiece model (tokenizer.json "model": {"type": "WordPiece", ...}), BERT's.
//
// Greedy longest-match-first: the longest vocabulary entry that starts the word, then the longest
// continuing_subword_prefix + entry that starts the rest, and so on. A word longer than
// max_input_chars_per_word characters, or one with a part that matches nothing, becomes the single
// unk_token.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/model.h"

namespace huddle::tok {

class WordPieceModel final : public Model {
 public:
  // Throws LoadError if unk_token is not in the vocabulary.
  WordPieceModel(Vocab vocab, std::string unk_token, std::string continuing_subword_prefix,
                 std::size_t max_input_chars_per_word);

  static std::unique_ptr<WordPieceModel> from_json(const Json& spec, std::string_view where);

  void tokenize(std::string_view word, std::vector<std::int32_t>& out) const override;
  const Vocab& vocab() const override { return vocab_; }
  std::string_view kind() const override { return "WordPiece"; }

 private:
  Vocab vocab_;
  std::string prefix_;
  std::size_t max_chars_;
  std::int32_t unk_id_;
};

}  // namespace huddle::tok
