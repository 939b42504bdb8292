// Added tokens (tokenizer.json "added_tokens"): special and user tokens matched in the text before
// normalization and pre-tokenization, so that "<|endoftext|>" or "[SEP]" typed in a prompt becomes
// its id instead of being split like ordinary text.
//
// Matching is leftmost-longest over the text, as Hugging Face's Aho-Corasick matcher does. Tokens
// with normalized=false are matched in the raw text; those with normalized=true in the normalized
// text (their content normalized the same way). Per-token options: single_word (the match must not
// touch word characters on either side), lstrip / rstrip (the token absorbs the whitespace on its
// left / right).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_fields.h"

namespace huddle::tok {

class Normalizer;

struct AddedToken {
  std::string content;
  std::int32_t id = 0;
  bool special = false;
  bool normalized = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
};

// A stretch [begin, end) of text; id >= 0 when it is an added token.
struct TextSpan {
  std::size_t begin;
  std::size_t end;
  std::int32_t id;
};

class AddedVocabulary {
 public:
  AddedVocabulary();
  // normalizer may be null; it is used to normalize the content of normalized=true tokens.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);
  ~AddedVocabulary();
  AddedVocabulary(AddedVocabulary&&) noexcept;
  AddedVocabulary& operator=(AddedVocabulary&&) noexcept;

  // Reads the "added_tokens" array.
  static std::vector<AddedToken> parse(const Json& list, std::string_view where);

  // Cuts text into added-token matches and the text between them (spans cover the text in order;
  // stripped whitespace belongs to the token's span).
  std::vector<TextSpan> split_raw(std::string_view text) const;
  std::vector<TextSpan> split_normalized(std::string_view text) const;
  bool has_normalized_tokens() const;

  std::optional<std::int32_t> find(std::string_view content) const;
  const AddedToken* by_id(std::int32_t id) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

  // Implementation detail: the string matcher (defined in added_tokens.cpp).
  class Matcher;

 private:
  std::vector<AddedToken> tokens_;
  std::unordered_map<std::int32_t, std::size_t> by_id_;
  std::unique_ptr<Matcher> raw_;
  std::unique_ptr<Matcher> normalized_;
};

}  // namespace huddle::tok
