// BPE model (tokenizer.json "model": {"type": "BPE", ...}).
//
// A word is split into characters (each ill-formed UTF-8 byte counts as one), each looked up in the
// vocabulary, then adjacent pairs are merged lowest rank first (leftmost first among equal ranks)
// until no pair in the merge table remains, as Hugging Face does. Options:
//  - ignore_merges: a word that is itself in the vocabulary becomes that one token (Llama 3);
//  - byte_fallback: a character missing from the vocabulary becomes its <0xXX> byte tokens;
//  - unk_token / fuse_unk: otherwise it becomes unk (consecutive unks fused if fuse_unk), or is
//    dropped when there is no unk_token;
//  - continuing_subword_prefix / end_of_word_suffix: marks on non-first / last characters.
// `dropout` (a training-time option) is ignored: encoding is deterministic.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/model.h"

namespace huddle::tok {

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel final : public Model {
 public:
  // Throws LoadError naming the merge (by index) whose parts or result are not in the vocabulary.
  BpeModel(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           BpeOptions options);
  ~BpeModel() override;

  // From the "model" object of tokenizer.json; merges may be "a b" strings or ["a", "b"] pairs.
  static std::unique_ptr<BpeModel> from_json(const Json& spec, std::string_view where);

  void tokenize(std::string_view word, std::vector<std::int32_t>& out) const override;
  const Vocab& vocab() const override { return vocab_; }
  bool encodes_bytes() const override { return options_.byte_fallback; }
  std::string_view kind() const override { return "BPE"; }

 private:
  struct Merges;
  std::optional<std::int32_t> symbol_id(std::string_view chars, bool first, bool last) const;

  Vocab vocab_;
  BpeOptions options_;
  std::unique_ptr<Merges> merges_;
  std::optional<std::int32_t> unk_id_;
  std::array<std::int32_t, 256> byte_ids_{};  // id of <0xXX>, or -1
};

}  // namespace huddle::tok
