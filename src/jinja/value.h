// Value: what a Jinja expression evaluates to, Python-like: undefined, none, bool, int, float,
// string (UTF-8), list, map (string keys, insertion order kept, as Python's dict) and function.
//
// Lists and maps are shared, as Python's are: copying a Value copies a reference, so a
// namespace() assigned in a loop body is the one the outer scope sees. Templates cannot mutate
// lists or maps except a namespace's attributes (`{% set ns.x = ... %}`), so sharing is safe.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace huddle::jinja {

class Value;
class Map;
using List = std::vector<Value>;
using KeywordArgs = std::vector<std::pair<std::string, Value>>;

// A callable global (raise_exception, namespace, range, strftime_now).
using Function = std::function<Value(const std::vector<Value>& args, const KeywordArgs& kwargs)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kMap, kFunction };
  struct Undefined {};

  Value() : v_(Undefined{}) {}
  Value(std::nullptr_t) : v_(nullptr) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(static_cast<std::int64_t>(i)) {}
  Value(std::int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(List list) : v_(std::make_shared<const List>(std::move(list))) {}
  Value(std::shared_ptr<Map> map) : v_(std::move(map)) {}
  Value(Function f) : v_(std::make_shared<const Function>(std::move(f))) {}

  static Value map(Map m);  // defined after Map
  // JSON to Value. nlohmann::json sorts object keys; ordered_json keeps them as written (as
  // Python's json.loads does), so parse with ordered_json where key order shows in the output.
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_map() const { return kind() == Kind::kMap; }
  bool is_function() const { return kind() == Kind::kFunction; }

  bool as_bool() const { return std::get<bool>(v_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  // A number as double (bool and int included).
  double as_number() const;
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(v_); }
  const Map& as_map() const { return *std::get<std::shared_ptr<Map>>(v_); }
  Map& mutable_map() const { return *std::get<std::shared_ptr<Map>>(v_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(v_); }

  // Python truthiness (undefined is false).
  bool truthy() const;
  // Python's str(): what {{ v }} prints (undefined prints "", none "None", lists their repr).
  std::string str() const;
  // Python's repr() (strings quoted).
  std::string repr() const;
  // Python json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=False); indent < 0: none.
  // InputError for undefined or functions (not JSON).
  std::string to_json(int indent = -1) const;
  // The Python type name, for messages ("str", "int", "list", "dict", "NoneType", ...).
  const char* type_name() const;

 private:
  std::variant<Undefined, std::nullptr_t, bool, std::int64_t, double, std::string,
               std::shared_ptr<const List>, std::shared_ptr<Map>, std::shared_ptr<const Function>>
      v_;
};

// Defined after Value: a container of Values instantiated while Value is incomplete would fix
// its traits (copy-assignable, constructible) as false for the whole translation unit (clang).
// A map with string keys in insertion order (Python dict).
class Map {
 public:
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);  // replaces in place, else appends
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  std::size_t size() const { return items_.size(); }
  bool is_namespace = false;  // made by namespace(): `set ns.attr = v` may assign to it

 private:
  std::vector<std::pair<std::string, Value>> items_;
};

inline Value Value::map(Map m) {
  return Value(std::make_shared<Map>(std::move(m)));
}

// Python ==: numbers across int/float/bool, lists element-wise, maps as sets of pairs.
bool equal(const Value& a, const Value& b);
// Python float repr ("1.0", "0.30000000000000004", "1e+20").
std::string float_repr(double d);

}  // namespace huddle::jinja
