// Unicode character classes and normal forms for the normalizers and pre-tokenizers.
//
// Classes follow the definitions Hugging Face `tokenizers` uses (Rust's char methods and the
// `unicode_categories` crate); categories and normal forms come from utf8proc. Functions that
// take strings expect valid UTF-8 (callers repair input first, see utf8.h).
#pragma once

#include <string>
#include <string_view>

namespace huddle::tok {

// Rust char::is_whitespace: the Unicode White_Space property.
bool is_whitespace(char32_t cp);
// General category P* (Pc, Pd, Ps, Pe, Pi, Pf, Po).
bool is_punctuation(char32_t cp);
// ASCII punctuation or P*: what BERT splits on.
bool is_bert_punctuation(char32_t cp);
// Category C* other than tab, newline and carriage return (BERT's "control" class: Cc, Cf, Cn,
// Co, Cs).
bool is_bert_control(char32_t cp);
// Category Mn (non-spacing mark), what accent stripping removes after NFD.
bool is_nonspacing_mark(char32_t cp);
// Category N* (Rust char::is_numeric).
bool is_numeric(char32_t cp);
// Category L* or N*, or '_' (a "word" character for single_word added tokens).
bool is_word_char(char32_t cp);
// The CJK Unified Ideograph blocks BERT isolates (the same table as BERT's tokenization.py).
bool is_cjk_ideograph(char32_t cp);

// Per-character full lowercase mapping (Rust char::to_lowercase, no context-dependent rules).
std::string to_lower(std::string_view s);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
std::string normalize_form(std::string_view s, NormalForm form);

}  // namespace huddle::tok
