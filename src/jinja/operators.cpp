#include "jinja/operators.h"

#include "jinja/py_string.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace huddle::jinja {
namespace {

[[noreturn]] void type_error(const std::string& op, const Value& a, const Value& b, Position at) {
  render_error(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(),
                           b.type_name()),
               at);
}

bool is_integral(const Value& v) {
  return v.is_int() || v.is_bool();
}
std::int64_t integral(const Value& v) {
  return v.is_bool() ? std::int64_t{v.as_bool()} : v.as_int();
}

// Python's floor modulo and division for integers.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value repeat(const Value& seq, std::int64_t n, Position at, Budget& budget) {
  const bool empty = seq.is_string() ? seq.as_string().empty() : seq.as_list().empty();
  if (n <= 0 || empty) return seq.is_string() ? Value(std::string()) : Value(List{});
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    budget.bytes(
        std::min<std::size_t>(static_cast<std::size_t>(n), SIZE_MAX / (s.size() + 1)) * s.size(),
        at);
    std::string out;
    for (std::int64_t i = 0; i < n; ++i) out += s;
    return Value(std::move(out));
  }
  const List& l = seq.as_list();
  budget.items(
      std::min<std::size_t>(static_cast<std::size_t>(n), SIZE_MAX / (l.size() + 1)) * l.size(), at);
  List out;
  for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), l.begin(), l.end());
  return Value(std::move(out));
}

// Python ordering for numbers, strings and lists; TypeError otherwise. -1, 0 or 1.
int compare(const Value& a, const Value& b, const std::string& op, Position at) {
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) {
      const auto x = integral(a), y = integral(b);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const double x = a.as_number(), y = b.as_number();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equal(x[i], y[i])) continue;
      return compare(x[i], y[i], op, at);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  render_error(fmt::format("'{}' not supported between instances of '{}' and '{}'", op,
                           a.type_name(), b.type_name()),
               at);
}

// Python's slice.indices(length) for one bound.
std::int64_t clamp_index(const Value& v, std::int64_t length, bool negative_step, bool is_start,
                         Position at) {
  if (v.is_none() || v.is_undefined()) {
    if (negative_step) return is_start ? length - 1 : -1;
    return is_start ? 0 : length;
  }
  if (!is_integral(v)) render_error("slice indices must be integers or none", at);
  std::int64_t i = integral(v);
  if (i < 0) {
    i += length;
    if (i < 0) i = negative_step ? -1 : 0;
  } else if (i >= length) {
    i = negative_step ? length - 1 : length;
  }
  return i;
}

}  // namespace

void Budget::bytes(std::size_t n, Position at) {
  bytes_ += n;
  if (n > limits_.max_work_bytes || bytes_ > limits_.max_work_bytes) {
    throw TemplateError(TemplateError::Kind::kLimit,
                        fmt::format("the template made more than {} bytes of text while rendering",
                                    limits_.max_work_bytes),
                        at);
  }
}

void Budget::items(std::size_t n, Position at) {
  items_ += static_cast<std::int64_t>(std::min<std::size_t>(n, INT64_MAX / 2));
  if (items_ > limits_.max_iterations) {
    throw TemplateError(TemplateError::Kind::kLimit,
                        fmt::format("the template ran more than {} loop iterations or list items",
                                    limits_.max_iterations),
                        at);
  }
}

void render_error(const std::string& message, Position at) {
  throw TemplateError(TemplateError::Kind::kRender, message, at);
}

std::vector<Value> iterate(const Value& v, Position at) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.as_list();
    case Value::Kind::kMap: {
      std::vector<Value> keys;
      for (const auto& item : v.as_map().items()) keys.emplace_back(item.first);
      return keys;
    }
    case Value::Kind::kString: {
      const std::string& s = v.as_string();
      const auto offsets = py::char_offsets(s);
      std::vector<Value> chars;
      for (std::size_t i = 0; i + 1 < offsets.size(); ++i)
        chars.emplace_back(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
      return chars;
    }
    default:
      render_error(fmt::format("'{}' object is not iterable", v.type_name()), at);
  }
}

Value get_attr(const Value& object, const std::string& name, Position at) {
  if (object.is_undefined())
    render_error(fmt::format("cannot read attribute '{}' of an undefined value", name), at);
  if (object.is_map()) {
    const Value* found = object.as_map().find(name);
    return found ? *found : Value();
  }
  return Value();
}

Value get_item(const Value& object, const Value& key, Position at) {
  if (object.is_undefined())
    render_error(fmt::format("cannot index an undefined value with {}", key.repr()), at);
  if (object.is_map()) {
    if (!key.is_string()) return Value();
    const Value* found = object.as_map().find(key.as_string());
    return found ? *found : Value();
  }
  if ((object.is_list() || object.is_string()) && is_integral(key)) {
    std::int64_t i = integral(key);
    if (object.is_list()) {
      const auto n = static_cast<std::int64_t>(object.as_list().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      return object.as_list()[static_cast<std::size_t>(i)];
    }
    const std::string& s = object.as_string();
    const auto offsets = py::char_offsets(s);
    const auto n = static_cast<std::int64_t>(offsets.size()) - 1;
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value();
    const auto u = static_cast<std::size_t>(i);
    return Value(s.substr(offsets[u], offsets[u + 1] - offsets[u]));
  }
  return Value();
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step,
            Position at, Budget& budget) {
  if (!object.is_list() && !object.is_string()) {
    if (object.is_undefined()) render_error("cannot slice an undefined value", at);
    render_error(fmt::format("'{}' object is not subscriptable", object.type_name()), at);
  }
  std::int64_t by = 1;
  if (!step.is_none() && !step.is_undefined()) {
    if (!is_integral(step)) render_error("slice indices must be integers or none", at);
    by = integral(step);
    if (by == 0) render_error("slice step cannot be zero", at);
  }
  std::vector<std::size_t> offsets;
  std::int64_t length = 0;
  if (object.is_list()) {
    length = static_cast<std::int64_t>(object.as_list().size());
  } else {
    offsets = py::char_offsets(object.as_string());
    length = static_cast<std::int64_t>(offsets.size()) - 1;
  }
  const std::int64_t from = clamp_index(start, length, by < 0, true, at);
  const std::int64_t to = clamp_index(stop, length, by < 0, false, at);
  List items;
  std::string text;
  for (std::int64_t i = from; by > 0 ? i < to : i > to; i += by) {
    const auto u = static_cast<std::size_t>(i);
    if (object.is_list()) {
      items.push_back(object.as_list()[u]);
    } else {
      text.append(object.as_string(), offsets[u], offsets[u + 1] - offsets[u]);
    }
  }
  if (object.is_list()) {
    budget.items(items.size(), at);
    return Value(std::move(items));
  }
  budget.bytes(text.size(), at);
  return Value(std::move(text));
}

bool contains(const Value& container, const Value& item, Position at) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string())
        render_error(
            fmt::format("'in <string>' requires string as left operand, not {}", item.type_name()),
            at);
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.as_list())
        if (equal(v, item)) return true;
      return false;
    case Value::Kind::kMap:
      return item.is_string() && container.as_map().find(item.as_string()) != nullptr;
    default:
      render_error(fmt::format("argument of type '{}' is not iterable", container.type_name()), at);
  }
}

Value binary(const std::string& op, const Value& a, const Value& b, Position at, Budget& budget) {
  if (op == "~") {
    std::string s = a.str() + b.str();
    budget.bytes(s.size(), at);
    return Value(std::move(s));
  }
  if (op == "==") return Value(equal(a, b));
  if (op == "!=") return Value(!equal(a, b));
  if (op == "in") return Value(contains(b, a, at));
  if (op == "not in") return Value(!contains(b, a, at));
  if (op == "<") return Value(compare(a, b, op, at) < 0);
  if (op == "<=") return Value(compare(a, b, op, at) <= 0);
  if (op == ">") return Value(compare(a, b, op, at) > 0);
  if (op == ">=") return Value(compare(a, b, op, at) >= 0);
  if (a.is_undefined() || b.is_undefined())
    render_error(fmt::format("an undefined value used with '{}'", op), at);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      budget.bytes(a.as_string().size() + b.as_string().size(), at);
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list()) {
      budget.items(a.as_list().size() + b.as_list().size(), at);
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && is_integral(b)) return repeat(a, integral(b), at, budget);
    if ((b.is_string() || b.is_list()) && is_integral(a)) return repeat(b, integral(a), at, budget);
  }
  if (!a.is_number() || !b.is_number()) type_error(op, a, b, at);
  if (is_integral(a) && is_integral(b) && op != "/") {
    const std::int64_t x = integral(a), y = integral(b);
    std::int64_t r = 0;
    if (op == "+" && !__builtin_add_overflow(x, y, &r)) return Value(r);
    if (op == "-" && !__builtin_sub_overflow(x, y, &r)) return Value(r);
    if (op == "*" && !__builtin_mul_overflow(x, y, &r)) return Value(r);
    if (op == "//" || op == "%") {
      if (y == 0) render_error("integer division or modulo by zero", at);
      if (x == INT64_MIN && y == -1) render_error("integer overflow", at);
      const std::int64_t q = floor_div(x, y);
      return Value(op == "//" ? q : x - q * y);
    }
    if (op == "**" && y >= 0) {
      std::int64_t p = 1;
      std::int64_t base = x;
      for (std::int64_t e = y; e > 0; e >>= 1) {
        if ((e & 1) && __builtin_mul_overflow(p, base, &p)) render_error("integer overflow", at);
        if (e > 1 && __builtin_mul_overflow(base, base, &base))
          render_error("integer overflow", at);
      }
      return Value(p);
    }
    if (op != "**") render_error("integer overflow", at);
  }
  const double x = a.as_number(), y = b.as_number();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "**") return Value(std::pow(x, y));
  if (y == 0) render_error("float division by zero", at);
  if (op == "/") return Value(x / y);
  if (op == "//") return Value(std::floor(x / y));
  if (op == "%") {
    const double m = std::fmod(x, y);
    return Value(m != 0 && ((m < 0) != (y < 0)) ? m + y : m);
  }
  type_error(op, a, b, at);
}

}  // namespace huddle::jinja
