#include "tokenizer/json_fields.h"

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace huddle::tok {
namespace {

[[noreturn]] void bad_type(std::string_view where, std::string_view key, std::string_view wanted,
                           const Json& got) {
  throw LoadError(
      fmt::format("{}: expected {}, got {}", json_path(where, key), wanted, got.type_name()));
}

}  // namespace

std::string json_path(std::string_view where, std::string_view key) {
  return where.empty() ? std::string(key) : fmt::format("{}.{}", where, key);
}

std::string json_path(std::string_view where, std::size_t index) {
  return fmt::format("{}[{}]", where, index);
}

const Json& json_require(const Json& obj, std::string_view key, std::string_view where) {
  if (!obj.is_object()) {
    throw LoadError(fmt::format("{}: expected an object, got {}", where, obj.type_name()));
  }
  const auto it = obj.find(key);
  if (it == obj.end()) throw LoadError(fmt::format("{}: missing field", json_path(where, key)));
  return *it;
}

const Json* json_find(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string json_string(const Json& obj, std::string_view key, std::string_view where) {
  const Json& v = json_require(obj, key, where);
  if (!v.is_string()) bad_type(where, key, "a string", v);
  return v.get<std::string>();
}

std::string json_string_or(const Json& obj, std::string_view key, std::string_view fallback,
                           std::string_view where) {
  const Json* v = json_find(obj, key);
  if (v == nullptr) return std::string(fallback);
  if (!v->is_string()) bad_type(where, key, "a string", *v);
  return v->get<std::string>();
}

bool json_bool_or(const Json& obj, std::string_view key, bool fallback, std::string_view where) {
  const Json* v = json_find(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) bad_type(where, key, "true or false", *v);
  return v->get<bool>();
}

std::int64_t json_int(const Json& obj, std::string_view key, std::string_view where) {
  const Json& v = json_require(obj, key, where);
  if (!v.is_number_integer()) bad_type(where, key, "an integer", v);
  return v.get<std::int64_t>();
}

std::int64_t json_int_or(const Json& obj, std::string_view key, std::int64_t fallback,
                         std::string_view where) {
  const Json* v = json_find(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) bad_type(where, key, "an integer", *v);
  return v->get<std::int64_t>();
}

std::int32_t json_token_id(const Json& value, std::string_view where) {
  if (!value.is_number_integer()) {
    throw LoadError(fmt::format("{}: expected a token id, got {}", where, value.type_name()));
  }
  if (value.is_number_unsigned()
          ? value.get<std::uint64_t>() > 0x7FFFFFFFu
          : (value.get<std::int64_t>() < 0 || value.get<std::int64_t>() > 0x7FFFFFFF)) {
    throw LoadError(fmt::format("{}: token id {} out of range", where, value.dump()));
  }
  return static_cast<std::int32_t>(value.get<std::int64_t>());
}

const Json& json_array(const Json& obj, std::string_view key, std::string_view where) {
  const Json& v = json_require(obj, key, where);
  if (!v.is_array()) bad_type(where, key, "an array", v);
  return v;
}

const Json& json_object(const Json& obj, std::string_view key, std::string_view where) {
  const Json& v = json_require(obj, key, where);
  if (!v.is_object()) bad_type(where, key, "an object", v);
  return v;
}

char32_t json_char(const Json& obj, std::string_view key, std::string_view where) {
  const std::string s = json_string(obj, key, where);
  if (s.empty())
    throw LoadError(fmt::format("{}: expected one character, got \"\"", json_path(where, key)));
  const Utf8Step step = utf8_next(s, 0);
  if (!step.valid || step.len != s.size()) {
    throw LoadError(
        fmt::format("{}: expected one character, got \"{}\"", json_path(where, key), s));
  }
  return step.cp;
}

std::string json_type(const Json& obj, std::string_view where) {
  return json_string(obj, "type", where);
}

void throw_unsupported(std::string_view where, std::string_view type, std::string_view supported) {
  throw LoadError(fmt::format("{}: unsupported type '{}' (supported: {})", where, type, supported));
}

}  // namespace huddle::tok
