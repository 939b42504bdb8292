// The operations of expressions, with Python's semantics: attribute and item access, slices,
// arithmetic, comparisons, `in`, iteration; and the render budget they charge.
#pragma once

#include "jinja/error.h"
#include "jinja/value.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace huddle::jinja {

// Bounds on one render, so that a hostile template cannot hang or exhaust the server.
struct RenderLimits {
  std::size_t max_output_bytes = std::size_t{8} << 20;
  // Bytes of every string and list made while rendering, all told (bounds the time spent on
  // building ever-longer strings in a loop).
  std::size_t max_work_bytes = std::size_t{256} << 20;
  // Loop iterations and items of lists made, all told.
  std::int64_t max_iterations = 1'000'000;
  int max_call_depth = 32;  // macro calls inside macro calls
};

// Counts what a render has made against its limits; TemplateError (kLimit) past one.
class Budget {
 public:
  explicit Budget(const RenderLimits& limits) : limits_(limits) {}
  void bytes(std::size_t n, Position at);
  void items(std::size_t n, Position at);
  const RenderLimits& limits() const { return limits_; }

 private:
  RenderLimits limits_;
  std::size_t bytes_ = 0;
  std::int64_t items_ = 0;
};

// TemplateError (kRender) at `at`.
[[noreturn]] void render_error(const std::string& message, Position at);

// The items `for` walks: a list's items, a map's keys, a string's characters; undefined: none.
std::vector<Value> iterate(const Value& v, Position at);
// obj.name: a map's item; undefined when missing (and for none); an error on undefined.
Value get_attr(const Value& object, const std::string& name, Position at);
// obj[key]: list and string by (negative) index, map by key; undefined when missing.
Value get_item(const Value& object, const Value& key, Position at);
// obj[start:stop:step] of a list or string (null Values: omitted).
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step,
            Position at, Budget& budget);
// a OP b for + - * / // % ** ~ == != < <= > >= in "not in".
Value binary(const std::string& op, const Value& a, const Value& b, Position at, Budget& budget);
// `in`: substring, list membership, map key.
bool contains(const Value& container, const Value& item, Position at);

}  // namespace huddle::jinja
