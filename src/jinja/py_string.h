// Python str methods over UTF-8 strings, as chat templates call them. Lengths, indexes and slices
// count code points (as Python does); case mapping (upper, lower, title, capitalize) is ASCII only.
// Whitespace is Python's str.isspace() set (ASCII and the Unicode spaces).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::jinja::py {

// The byte offset where each code point starts, plus s.size() at the end. Ill-formed bytes count
// as one code point each.
std::vector<std::size_t> char_offsets(std::string_view s);
std::size_t char_count(std::string_view s);

enum class Side { kBoth, kLeft, kRight };
// str.strip / lstrip / rstrip; `chars` (when given) are the code points to remove.
std::string strip(std::string_view s, Side side, std::optional<std::string_view> chars = {});
// str.split(): on runs of whitespace when `sep` is absent, else on `sep` (non-empty).
// max_split < 0: no limit.
std::vector<std::string> split(std::string_view s, std::optional<std::string_view> sep,
                               long max_split = -1);
// str.replace(old, new, count); count < 0: all.
std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    long count = -1);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);
std::string capitalize(std::string_view s);

}  // namespace huddle::jinja::py
