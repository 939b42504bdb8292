// A compiled PCRE2 pattern for the pre-tokenizer split regexes.
//
// Patterns from tokenizer.json (GPT-2's, Llama 3's) use Unicode classes such as \p{L}, so they are
// compiled with PCRE2_UTF | PCRE2_UCP (std::regex has no Unicode classes). PCRE2_MATCH_INVALID_UTF
// lets the subject hold invalid UTF-8: ill-formed bytes never match and end up between matches.
// A Regex is immutable after construction and safe to use from several threads.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace huddle::tok {

class Regex {
 public:
  // Throws LoadError naming the pattern and the position of the syntax error.
  explicit Regex(std::string_view pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // Non-empty, non-overlapping matches of the pattern in s, left to right, as [begin, end) byte
  // offsets. Throws InputError if PCRE2 gives up on s (resource limits), never crashes.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view s) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

}  // namespace huddle::tok
