// Typed access to tokenizer.json fields with errors that name the field.
//
// Every getter throws LoadError("<where>.<key>: ...") when the field is missing (unless it has a
// default) or has the wrong JSON type; `where` is a path such as "normalizer.normalizers[1]".
// The loader prefixes the file name.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace huddle::tok {

using Json = nlohmann::json;

const Json& json_require(const Json& obj, std::string_view key, std::string_view where);
// nullptr when the key is absent or null.
const Json* json_find(const Json& obj, std::string_view key);

std::string json_string(const Json& obj, std::string_view key, std::string_view where);
std::string json_string_or(const Json& obj, std::string_view key, std::string_view fallback,
                           std::string_view where);
bool json_bool_or(const Json& obj, std::string_view key, bool fallback, std::string_view where);
std::int64_t json_int(const Json& obj, std::string_view key, std::string_view where);
std::int64_t json_int_or(const Json& obj, std::string_view key, std::int64_t fallback,
                         std::string_view where);
// A token id: an integer in [0, 2^31).
std::int32_t json_token_id(const Json& value, std::string_view where);
const Json& json_array(const Json& obj, std::string_view key, std::string_view where);
const Json& json_object(const Json& obj, std::string_view key, std::string_view where);
// A string holding exactly one code point (Metaspace's replacement, Strip's content).
char32_t json_char(const Json& obj, std::string_view key, std::string_view where);

// The component's "type" field; `where` names the component ("normalizer", "model", ...).
std::string json_type(const Json& obj, std::string_view where);

// "<where>.<key>" or "<where>[i]".
std::string json_path(std::string_view where, std::string_view key);
std::string json_path(std::string_view where, std::size_t index);

[[noreturn]] void throw_unsupported(std::string_view where, std::string_view type,
                                    std::string_view supported);

}  // namespace huddle::tok
