#include "jinja/builtins.h"

#include "jinja/py_string.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace huddle::jinja {
namespace {

// The argument at `index` or named `name`; undefined when neither is given.
Value arg(const std::vector<Value>& args, const KeywordArgs& kwargs, std::size_t index,
          const char* name) {
  if (index < args.size()) return args[index];
  for (const auto& [key, value] : kwargs)
    if (key == name) return value;
  return Value();
}

bool given(const Value& v) {
  return !v.is_undefined();
}

// A view of v's text (v must outlive it); nullopt when v is absent or none.
std::optional<std::string_view> optional_text(const Value& v, const char* what, Position at) {
  if (!given(v) || v.is_none()) return std::nullopt;
  if (!v.is_string())
    render_error(fmt::format("{}: expected a string, got {}", what, v.type_name()), at);
  return std::string_view(v.as_string());
}

std::int64_t int_arg(const Value& v, std::int64_t fallback, const char* what, Position at) {
  if (!given(v) || v.is_none()) return fallback;
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  render_error(fmt::format("{}: expected an integer, got {}", what, v.type_name()), at);
}

Value str_value(std::string s, Position at, Budget& budget) {
  budget.bytes(s.size(), at);
  return Value(std::move(s));
}

std::size_t length(const Value& v, Position at) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return py::char_count(v.as_string());
    case Value::Kind::kList:
      return v.as_list().size();
    case Value::Kind::kMap:
      return v.as_map().size();
    default:
      render_error(fmt::format("object of type '{}' has no len()", v.type_name()), at);
  }
}

// item.a.b (a dotted attribute path, as selectattr and map take), integers index lists.
Value attribute_path(const Value& item, const std::string& path, Position at) {
  Value v = item;
  for (const std::string& part : py::split(path, std::string_view(".")))
    v = v.is_undefined() ? v : get_item(v, Value(part), at);
  return v;
}

Value sorted_keys(const Value& v) {
  if (v.is_list()) {
    List out;
    for (const Value& item : v.as_list()) out.push_back(sorted_keys(item));
    return Value(std::move(out));
  }
  if (!v.is_map()) return v;
  std::vector<std::pair<std::string, Value>> items = v.as_map().items();
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  Map m;
  for (auto& [k, item] : items) m.set(k, sorted_keys(item));
  return Value::map(std::move(m));
}

Value to_json(const Value& value, const std::vector<Value>& args, const KeywordArgs& kwargs,
              Position at, Budget& budget) {
  // Hugging Face's tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  const Value ensure_ascii = arg(args, kwargs, 0, "ensure_ascii");
  const Value indent = arg(args, kwargs, 1, "indent");
  const Value separators = arg(args, kwargs, 2, "separators");
  const Value sort_keys = arg(args, kwargs, 3, "sort_keys");
  if (ensure_ascii.truthy()) render_error("tojson: ensure_ascii=true is not supported", at);
  if (given(separators) && !separators.is_none())
    render_error("tojson: separators are not supported", at);
  const int spaces =
      static_cast<int>(std::clamp<std::int64_t>(int_arg(indent, -1, "tojson indent", at), -1, 64));
  try {
    return str_value((sort_keys.truthy() ? sorted_keys(value) : value).to_json(spaces), at, budget);
  } catch (const TemplateError&) {
    throw;
  } catch (const InputError& e) {
    render_error(e.what(), at);
  }
}

// The items' texts joined by `sep`, charged to the budget before the text is built.
Value join_texts(const std::vector<std::string>& parts, const std::string& sep, Position at,
                 Budget& budget) {
  std::size_t total = 0;
  for (const std::string& p : parts) total += p.size();
  if (!parts.empty()) {
    const std::size_t gaps = parts.size() - 1;
    total += sep.empty() ? 0 : std::min(gaps, SIZE_MAX / 2 / sep.size()) * sep.size();
  }
  budget.bytes(total, at);
  std::string out;
  out.reserve(total);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return Value(std::move(out));
}

Value join(const Value& value, const std::vector<Value>& args, const KeywordArgs& kwargs,
           Position at, Budget& budget) {
  const Value sep = arg(args, kwargs, 0, "d");
  const Value attribute = arg(args, kwargs, 1, "attribute");
  std::vector<std::string> parts;
  for (const Value& item : iterate(value, at))
    parts.push_back(given(attribute) ? attribute_path(item, attribute.str(), at).str()
                                     : item.str());
  return join_texts(parts, given(sep) ? sep.str() : "", at, budget);
}

// select/reject (attribute empty) and selectattr/rejectattr.
Value select_items(const Value& value, const std::vector<Value>& args, bool keep_matches,
                   bool by_attribute, Position at, Budget& budget) {
  std::size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.empty() || !args[0].is_string())
      render_error("selectattr: expected an attribute name", at);
    attribute = args[0].as_string();
    next = 1;
  }
  std::string test;
  if (next < args.size()) {
    if (!args[next].is_string()) render_error("select: the test must be named by a string", at);
    test = args[next].as_string();
    ++next;
  }
  const std::vector<Value> test_args(
      args.begin() + static_cast<std::ptrdiff_t>(std::min(next, args.size())), args.end());
  List out;
  for (const Value& item : iterate(value, at)) {
    const Value subject = by_attribute ? attribute_path(item, attribute, at) : item;
    const bool match = test.empty() ? subject.truthy() : call_test(test, subject, test_args, at);
    if (match == keep_matches) out.push_back(item);
  }
  budget.items(out.size(), at);
  return Value(std::move(out));
}

Value map_filter(const Value& value, const std::vector<Value>& args, const KeywordArgs& kwargs,
                 Position at, Budget& budget) {
  List out;
  const Value attribute = arg({}, kwargs, 0, "attribute");
  if (given(attribute)) {
    const Value fallback = arg({}, kwargs, 0, "default");
    for (const Value& item : iterate(value, at)) {
      Value v = attribute_path(item, attribute.str(), at);
      out.push_back(v.is_undefined() && given(fallback) ? fallback : v);
    }
  } else {
    if (args.empty() || !args[0].is_string())
      render_error("map: expected a filter name or attribute=", at);
    const std::vector<Value> rest(args.begin() + 1, args.end());
    for (const Value& item : iterate(value, at))
      out.push_back(call_filter(args[0].as_string(), item, rest, kwargs, at, budget));
  }
  budget.items(out.size(), at);
  return Value(std::move(out));
}

Value int_filter(const Value& value, const Value& fallback) {
  const Value otherwise = given(fallback) ? fallback : Value(0);
  if (value.is_int()) return value;
  if (value.is_bool()) return Value(std::int64_t{value.as_bool()});
  if (value.is_float()) {
    const double d = value.as_float();
    return std::isfinite(d) && std::fabs(d) < 9.2e18 ? Value(static_cast<std::int64_t>(d))
                                                     : otherwise;
  }
  if (value.is_string()) {
    const std::string s = py::strip(value.as_string(), py::Side::kBoth);
    char* end = nullptr;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size()) return Value(static_cast<std::int64_t>(i));
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d) && std::fabs(d) < 9.2e18)
      return Value(static_cast<std::int64_t>(d));
  }
  return otherwise;
}

Value float_filter(const Value& value, const Value& fallback) {
  const Value otherwise = given(fallback) ? fallback : Value(0.0);
  if (value.is_number()) return Value(value.as_number());
  if (value.is_string()) {
    const std::string s = py::strip(value.as_string(), py::Side::kBoth);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value(d);
  }
  return otherwise;
}

Value first_or_last(const Value& value, bool first, Position at) {
  if (value.is_undefined()) return Value();
  if (value.is_list()) {
    const List& l = value.as_list();
    if (l.empty()) return Value();
    return first ? l.front() : l.back();
  }
  const std::vector<Value> items = iterate(value, at);
  if (items.empty()) return Value();
  return first ? items.front() : items.back();
}

bool is_lower_or_upper(const Value& v, bool lower) {
  if (!v.is_string()) return false;
  bool cased = false;
  for (const char c : v.as_string()) {
    if (c >= 'a' && c <= 'z') {
      if (!lower) return false;
      cased = true;
    } else if (c >= 'A' && c <= 'Z') {
      if (lower) return false;
      cased = true;
    }
  }
  return cased;
}

}  // namespace

Value call_filter(const std::string& name, const Value& value, const std::vector<Value>& args,
                  const KeywordArgs& kwargs, Position at, Budget& budget) {
  if (name == "trim") {
    return str_value(py::strip(value.str(), py::Side::kBoth,
                               optional_text(arg(args, kwargs, 0, "chars"), "trim", at)),
                     at, budget);
  }
  if (name == "tojson") return to_json(value, args, kwargs, at, budget);
  if (name == "length" || name == "count")
    return Value(static_cast<std::int64_t>(length(value, at)));
  if (name == "upper") return str_value(py::upper(value.str()), at, budget);
  if (name == "lower") return str_value(py::lower(value.str()), at, budget);
  if (name == "title") return str_value(py::title(value.str()), at, budget);
  if (name == "capitalize") return str_value(py::capitalize(value.str()), at, budget);
  if (name == "default" || name == "d") {
    const Value fallback = arg(args, kwargs, 0, "default_value");
    const bool boolean = arg(args, kwargs, 1, "boolean").truthy();
    if (value.is_undefined() || (boolean && !value.truthy()))
      return given(fallback) ? fallback : Value(std::string());
    return value;
  }
  if (name == "first") return first_or_last(value, true, at);
  if (name == "last") return first_or_last(value, false, at);
  if (name == "join") return join(value, args, kwargs, at, budget);
  if (name == "string") return str_value(value.str(), at, budget);
  if (name == "safe") return value;
  if (name == "list") {
    List out = iterate(value, at);
    budget.items(out.size(), at);
    return Value(std::move(out));
  }
  if (name == "items") {
    if (value.is_undefined()) return Value(List{});
    if (!value.is_map())
      render_error(fmt::format("items: expected a mapping, got {}", value.type_name()), at);
    List out;
    for (const auto& [k, v] : value.as_map().items()) out.push_back(Value(List{Value(k), v}));
    budget.items(out.size(), at);
    return Value(std::move(out));
  }
  if (name == "select") return select_items(value, args, true, false, at, budget);
  if (name == "reject") return select_items(value, args, false, false, at, budget);
  if (name == "selectattr") return select_items(value, args, true, true, at, budget);
  if (name == "rejectattr") return select_items(value, args, false, true, at, budget);
  if (name == "map") return map_filter(value, args, kwargs, at, budget);
  if (name == "int") return int_filter(value, arg(args, kwargs, 0, "default"));
  if (name == "float") return float_filter(value, arg(args, kwargs, 0, "default"));
  if (name == "abs") {
    if (value.is_int() && value.as_int() != INT64_MIN)
      return Value(static_cast<std::int64_t>(std::llabs(value.as_int())));
    if (value.is_number()) return Value(std::fabs(value.as_number()));
    render_error(fmt::format("bad operand type for abs(): '{}'", value.type_name()), at);
  }
  if (name == "replace") {
    const Value old_value = arg(args, kwargs, 0, "old");
    const Value new_value = arg(args, kwargs, 1, "new");
    const auto old = optional_text(old_value, "replace", at);
    const auto with = optional_text(new_value, "replace", at);
    if (!old || !with) render_error("replace: expected two strings", at);
    const std::int64_t count = int_arg(arg(args, kwargs, 2, "count"), -1, "replace count", at);
    const std::string text = value.str();
    // Charge the result's size before building it: replacing "" inserts at every character.
    std::size_t hits = 0;
    if (old->empty()) {
      hits = py::char_count(text) + 1;
    } else {
      for (std::size_t i = text.find(*old); i != std::string::npos;
           i = text.find(*old, i + old->size()))
        ++hits;
    }
    if (count >= 0) hits = std::min(hits, static_cast<std::size_t>(count));
    if (with->size() > old->size())
      budget.bytes(text.size() + std::min(hits, SIZE_MAX / 2 / with->size()) * with->size(), at);
    return str_value(py::replace(text, *old, *with, static_cast<long>(count)), at, budget);
  }
  if (name == "reverse") {
    std::vector<Value> items = iterate(value, at);
    std::reverse(items.begin(), items.end());
    if (value.is_string()) {
      std::string out;
      for (const Value& c : items) out += c.as_string();
      return str_value(std::move(out), at, budget);
    }
    budget.items(items.size(), at);
    return Value(List(std::move(items)));
  }
  if (name == "unique") {
    List out;
    for (const Value& item : iterate(value, at)) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& v) { return equal(v, item); }))
        out.push_back(item);
    }
    budget.items(out.size(), at);
    return Value(std::move(out));
  }
  render_error(fmt::format("no filter named '{}'", name), at);
}

bool call_test(const std::string& name, const Value& value, const std::vector<Value>& args,
               Position at) {
  const Value other = args.empty() ? Value() : args[0];
  Budget scratch{RenderLimits{}};
  if (name == "defined") return !value.is_undefined();
  if (name == "undefined") return value.is_undefined();
  if (name == "none") return value.is_none();
  if (name == "boolean") return value.is_bool();
  if (name == "true") return value.is_bool() && value.as_bool();
  if (name == "false") return value.is_bool() && !value.as_bool();
  if (name == "integer") return value.is_int();
  if (name == "float") return value.is_float();
  if (name == "number") return value.is_number();
  if (name == "string") return value.is_string();
  if (name == "mapping") return value.is_map();
  if (name == "iterable" || name == "sequence")
    return value.is_string() || value.is_list() || value.is_map() || value.is_undefined();
  if (name == "callable") return value.is_function();
  if (name == "lower") return is_lower_or_upper(value, true);
  if (name == "upper") return is_lower_or_upper(value, false);
  if (name == "even" || name == "odd" || name == "divisibleby") {
    if (!value.is_int())
      render_error(fmt::format("'{}' test on a {}", name, value.type_name()), at);
    const std::int64_t by = name == "divisibleby" ? int_arg(other, 0, "divisibleby", at) : 2;
    if (by == 0) render_error("divisibleby 0", at);
    const std::int64_t r = value.as_int() % by;
    return name == "odd" ? r != 0 : r == 0;
  }
  if (name == "sameas") {
    // Python's `is`: none, booleans and (small) integers are the same objects when equal.
    const bool scalar = value.is_none() || value.is_bool() || value.is_int();
    return scalar && value.kind() == other.kind() && equal(value, other);
  }
  if (name == "in") return contains(other, value, at);
  static const std::pair<const char*, const char*> kComparisons[] = {
      {"eq", "=="}, {"equalto", "=="},    {"==", "=="}, {"ne", "!="}, {"!=", "!="},
      {"lt", "<"},  {"lessthan", "<"},    {"<", "<"},   {"le", "<="}, {"<=", "<="},
      {"gt", ">"},  {"greaterthan", ">"}, {">", ">"},   {"ge", ">="}, {">=", ">="}};
  for (const auto& [test, op] : kComparisons)
    if (name == test) return binary(op, value, other, at, scratch).truthy();
  render_error(fmt::format("no test named '{}'", name), at);
}

std::optional<Value> call_method(const Value& object, const std::string& name,
                                 const std::vector<Value>& args, const KeywordArgs& kwargs,
                                 Position at, Budget& budget) {
  if (object.is_map()) {
    const Map& m = object.as_map();
    if (name == "get") {
      const Value key = arg(args, kwargs, 0, "key");
      const Value* found = key.is_string() ? m.find(key.as_string()) : nullptr;
      if (found) return *found;
      const Value fallback = arg(args, kwargs, 1, "default");
      return given(fallback) ? fallback : Value(nullptr);
    }
    if (name == "items" || name == "keys" || name == "values") {
      List out;
      for (const auto& [k, v] : m.items())
        out.push_back(name == "items" ? Value(List{Value(k), v}) : name == "keys" ? Value(k) : v);
      budget.items(out.size(), at);
      return Value(std::move(out));
    }
    return std::nullopt;
  }
  if (!object.is_string()) return std::nullopt;
  const std::string& s = object.as_string();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const py::Side side = name == "strip"    ? py::Side::kBoth
                          : name == "lstrip" ? py::Side::kLeft
                                             : py::Side::kRight;
    return str_value(
        py::strip(s, side, optional_text(arg(args, kwargs, 0, "chars"), name.c_str(), at)), at,
        budget);
  }
  if (name == "startswith" || name == "endswith") {
    const Value what = arg(args, kwargs, 0, "prefix");
    std::vector<Value> options = what.is_list() ? what.as_list() : std::vector<Value>{what};
    for (const Value& o : options) {
      if (!o.is_string()) render_error(fmt::format("{}: expected a string", name), at);
      const std::string& p = o.as_string();
      if (name == "startswith" ? s.starts_with(p) : s.ends_with(p)) return Value(true);
    }
    return Value(false);
  }
  if (name == "split" || name == "rsplit") {
    const Value sep_value = arg(args, kwargs, 0, "sep");
    const auto sep = optional_text(sep_value, name.c_str(), at);
    if (sep && sep->empty()) render_error("empty separator", at);
    const std::int64_t max_split = int_arg(arg(args, kwargs, 1, "maxsplit"), -1, "maxsplit", at);
    std::vector<std::string> parts;
    if (name == "rsplit" && max_split >= 0) {
      if (!sep) render_error("rsplit with maxsplit needs a separator", at);
      std::string rest = s;
      std::int64_t done = 0;
      while (done < max_split) {
        const std::size_t found = rest.rfind(*sep);
        if (found == std::string::npos) break;
        parts.insert(parts.begin(), rest.substr(found + sep->size()));
        rest.resize(found);
        ++done;
      }
      parts.insert(parts.begin(), rest);
    } else {
      parts = py::split(s, sep, static_cast<long>(max_split));
    }
    List out;
    for (std::string& p : parts) out.emplace_back(std::move(p));
    budget.items(out.size(), at);
    budget.bytes(s.size(), at);
    return Value(std::move(out));
  }
  if (name == "replace") return call_filter("replace", object, args, kwargs, at, budget);
  if (name == "upper") return str_value(py::upper(s), at, budget);
  if (name == "lower") return str_value(py::lower(s), at, budget);
  if (name == "title") return str_value(py::title(s), at, budget);
  if (name == "capitalize") return str_value(py::capitalize(s), at, budget);
  if (name == "find" || name == "count") {
    const Value sub_value = arg(args, kwargs, 0, "sub");
    const auto sub = optional_text(sub_value, name.c_str(), at);
    if (!sub) render_error(fmt::format("{}: expected a string", name), at);
    if (name == "find") {
      const std::size_t found = s.find(*sub);
      return Value(found == std::string::npos ? std::int64_t{-1}
                                              : static_cast<std::int64_t>(py::char_count(
                                                    std::string_view(s).substr(0, found))));
    }
    if (sub->empty()) return Value(static_cast<std::int64_t>(py::char_count(s) + 1));
    std::int64_t n = 0;
    for (std::size_t at_byte = s.find(*sub); at_byte != std::string::npos;
         at_byte = s.find(*sub, at_byte + sub->size()))
      ++n;
    return Value(n);
  }
  if (name == "join") {
    std::vector<std::string> parts;
    for (const Value& item : iterate(arg(args, kwargs, 0, "iterable"), at)) {
      if (!item.is_string())
        render_error(fmt::format("join: expected str, got {}", item.type_name()), at);
      parts.push_back(item.as_string());
    }
    return join_texts(parts, s, at, budget);
  }
  return std::nullopt;
}

}  // namespace huddle::jinja
