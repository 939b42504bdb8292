// UTF-8 decoding, encoding and repair shared by the tokenizer pipeline.
//
// The tokenizers work on byte strings that are usually, but not always, valid UTF-8: text typed
// by a user, or bytes produced by decoding a partial byte-level token. These helpers never read
// past the end of their input and never throw; invalid input is reported, not trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace huddle::tok {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// One step of decoding at s[pos]. For a well-formed sequence: {code point, its length, true}.
// For an ill-formed one: {U+FFFD, length of the maximal subpart (>= 1), false}, which is the
// unit that Unicode's "substitution of maximal subparts" (and Rust's from_utf8_lossy, which
// Hugging Face uses) replaces with one U+FFFD. Requires pos < s.size().
struct Utf8Step {
  char32_t cp;
  std::size_t len;
  bool valid;
};
Utf8Step utf8_next(std::string_view s, std::size_t pos);

// Appends the UTF-8 encoding of cp (cp must be a Unicode scalar value; others become U+FFFD).
void append_utf8(std::string& out, char32_t cp);

bool is_valid_utf8(std::string_view s);

// s with every ill-formed subsequence replaced by one U+FFFD (from_utf8_lossy semantics).
std::string repair_utf8(std::string_view s);

// Number of code points, counting each ill-formed subpart as one.
std::size_t utf8_length(std::string_view s);

}  // namespace huddle::tok
