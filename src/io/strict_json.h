// JSON parsing for file headers, index files, plans and messages that come from outside the
// program.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace huddle::io {

// How many arrays and objects may nest. Huddle's own documents nest fewer than 10 deep; the
// bound keeps every later recursive walk of a parsed value (copy, compare, dump() in an error
// message) from overflowing the stack on a hostile document.
inline constexpr int kMaxJsonDepth = 64;

// Parses `text`; throws LoadError naming `origin` (a file path, or "file: header") when the text
// is not valid JSON, nests more than `max_depth` arrays and objects, or has an object that repeats
// a key. nlohmann's DOM parser silently keeps the last duplicate, which would let two tensors
// claim one name; its callback interface sees every key, so detecting duplicates costs one set of
// keys per open object. The parser itself is iterative: the depth is checked as it goes, before
// anything recursive runs.
nlohmann::json parse_strict_json(std::string_view text, std::string_view origin,
                                 int max_depth = kMaxJsonDepth);

}  // namespace huddle::io
