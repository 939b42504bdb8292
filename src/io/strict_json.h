// JSON parsing for file headers and index files that come from outside the program.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace huddle::io {

// Parses `text`; throws LoadError naming `origin` (a file path, or "file: header") when the text
// is not valid JSON or when an object repeats a key. nlohmann's DOM parser silently keeps the
// last duplicate, which would let two tensors claim one name; its callback interface sees every
// key, so detecting duplicates costs one set of keys per open object.
nlohmann::json parse_strict_json(std::string_view text, std::string_view origin);

}  // namespace huddle::io
