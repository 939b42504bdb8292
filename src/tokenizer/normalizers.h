// Normalizers: the first step of a tokenizer.json pipeline, applied to each stretch of text
// between added tokens.
//
// Supported "type"s: BertNormalizer, Lowercase, NFC, NFD, NFKC, NFKD, StripAccents, Strip,
// Replace, Prepend, Sequence. Others throw LoadError naming the type.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/json_fields.h"

namespace huddle::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string_view text) const = 0;
  // False when the normalizer is byte-safe (Replace, Prepend): raw bytes of invalid UTF-8 may then
  // pass through it to a byte-capable model instead of being repaired first.
  virtual bool needs_valid_utf8() const { return true; }
};

// BERT's normalizer, as in Hugging Face: clean_text drops NUL, U+FFFD and control characters and
// maps whitespace to ' '; handle_chinese_chars puts spaces around CJK ideographs; strip_accents
// (which defaults to `lowercase` when null) removes non-spacing marks after NFD; lowercase.
struct BertNormalizerOptions {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  bool strip_accents = true;
  bool lowercase = true;
};
std::string bert_normalize(std::string_view text, const BertNormalizerOptions& options);

// Builds the normalizer described by `spec`; `where` is its JSON path for error messages.
std::unique_ptr<Normalizer> make_normalizer(const Json& spec, std::string_view where);

}  // namespace huddle::tok
