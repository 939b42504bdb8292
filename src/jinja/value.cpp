#include "jinja/value.h"

#include "core/error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace huddle::jinja {
namespace {

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append_json(std::string& out, const Value& v, int indent, int level) {
  const auto newline = [&](int at) {
    out += '\n';
    out.append(static_cast<std::size_t>(indent * at), ' ');
  };
  const char* item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat: {
      const double d = v.as_float();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        out += float_repr(d);
      }
      return;
    }
    case Value::Kind::kString:
      append_json_string(out, v.as_string());
      return;
    case Value::Kind::kList: {
      const List& list = v.as_list();
      if (list.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (i > 0) out += item_sep;
        if (indent >= 0) newline(level + 1);
        append_json(out, list[i], indent, level + 1);
      }
      if (indent >= 0) newline(level);
      out += ']';
      return;
    }
    case Value::Kind::kMap: {
      const auto& items = v.as_map().items();
      if (items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_sep;
        if (indent >= 0) newline(level + 1);
        append_json_string(out, items[i].first);
        out += ": ";
        append_json(out, items[i].second, indent, level + 1);
      }
      if (indent >= 0) newline(level);
      out += '}';
      return;
    }
    case Value::Kind::kUndefined:
    case Value::Kind::kFunction:
      throw InputError(fmt::format("Object of type {} is not JSON serializable", v.type_name()));
  }
}

template <typename Json>
Value value_from_json(const Json& j) {
  switch (j.type()) {
    case nlohmann::detail::value_t::null:
      return Value(nullptr);
    case nlohmann::detail::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::detail::value_t::number_integer:
      return Value(j.template get<std::int64_t>());
    case nlohmann::detail::value_t::number_unsigned: {
      const auto u = j.template get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<std::int64_t>(u));
    }
    case nlohmann::detail::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::detail::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::detail::value_t::array: {
      List list;
      list.reserve(j.size());
      for (const auto& item : j) list.push_back(value_from_json(item));
      return Value(std::move(list));
    }
    case nlohmann::detail::value_t::object: {
      Map m;
      for (const auto& [k, item] : j.items()) m.set(k, value_from_json(item));
      return Value::map(std::move(m));
    }
    default:
      return Value(nullptr);  // binary / discarded: not produced by the JSON parser
  }
}

}  // namespace

Value Value::from_json(const nlohmann::json& j) {
  return value_from_json(j);
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  return value_from_json(j);
}

const Value* Map::find(const std::string& key) const {
  for (const auto& [k, v] : items_)
    if (k == key) return &v;
  return nullptr;
}

void Map::set(const std::string& key, Value value) {
  for (auto& [k, v] : items_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(key, std::move(value));
}

double Value::as_number() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  if (is_int()) return static_cast<double>(as_int());
  return as_float();
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_float() != 0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !as_list().empty();
    case Kind::kMap:
      return as_map().size() != 0;
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest digits that read back as d, then Python's layout: fixed notation for decimal
  // exponents in [-4, 16), else d.ddde+XX.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);
  const auto e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::atoi(sci.c_str() + e + 1);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (const char c : mantissa)
    if (c != '.') digits += c;
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out.append("0.");
      out.append(static_cast<std::size_t>(-exponent - 1), '0');
      out.append(digits);
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out.append(digits);
      out.append(static_cast<std::size_t>(exponent + 1) - digits.size(), '0');
      out.append(".0");
    } else {
      const auto point = static_cast<std::size_t>(exponent + 1);
      out.append(digits, 0, point);
      out.push_back('.');
      out.append(digits, point, std::string::npos);
    }
    return out;
  }
  out.push_back(digits[0]);
  if (digits.size() > 1) {
    out.push_back('.');
    out.append(digits, 1, std::string::npos);
  }
  out.append(fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent)));
  return out;
}

std::string Value::str() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return as_string();
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return as_bool() ? "True" : "False";
    case Kind::kInt:
      return std::to_string(as_int());
    case Kind::kFloat:
      return float_repr(as_float());
    case Kind::kString: {
      const std::string& s = as_string();
      const char quote =
          s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
      std::string out(1, quote);
      for (const char c : s) {
        if (c == quote || c == '\\') {
          out += '\\';
          out += c;
        } else if (c == '\n') {
          out += "\\n";
        } else if (c == '\r') {
          out += "\\r";
        } else if (c == '\t') {
          out += "\\t";
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
      }
      out += quote;
      return out;
    }
    case Kind::kList: {
      std::string out = "[";
      const List& list = as_list();
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (i > 0) out += ", ";
        out += list[i].repr();
      }
      return out + "]";
    }
    case Kind::kMap: {
      const Map& m = as_map();
      std::string out = m.is_namespace ? "<Namespace {" : "{";
      for (std::size_t i = 0; i < m.items().size(); ++i) {
        if (i > 0) out += ", ";
        out += Value(m.items()[i].first).repr() + ": " + m.items()[i].second.repr();
      }
      return out + (m.is_namespace ? "}>" : "}");
    }
    case Kind::kFunction:
      return "<function>";
  }
  return "";
}

std::string Value::to_json(int indent) const {
  std::string out;
  append_json(out, *this, indent, 0);
  return out;
}

const char* Value::type_name() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kMap:
      return "dict";
    case Kind::kFunction:
      return "function";
  }
  return "?";
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) {
      const auto ai = a.is_bool() ? std::int64_t{a.as_bool()} : a.as_int();
      const auto bi = b.is_bool() ? std::int64_t{b.as_bool()} : b.as_int();
      return ai == bi;
    }
    return a.as_number() == b.as_number();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::kMap: {
      const Map& x = a.as_map();
      const Map& y = b.as_map();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* other = y.find(k);
        if (other == nullptr || !equal(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kFunction:
      return &a.as_function() == &b.as_function();
    default:
      return false;
  }
}

}  // namespace huddle::jinja
