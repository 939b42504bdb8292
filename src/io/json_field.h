// JsonField: typed access to a parsed JSON document whose errors name the file and the JSON path
// of what is wrong ("cluster.json: devices[1].gflops: missing"). `Error` is the exception thrown
// (LoadError for input files, PlanError for plans); `root` names the document in errors about the
// whole of it ("plan: expected an object, ...").
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace huddle::io {

template <typename Error>
class JsonField {
 public:
  // `j`, `source` and `root` must outlive the field and every field taken from it.
  JsonField(const nlohmann::json& j, const std::string& source, const char* root)
      : JsonField(j, "", source, root) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("{}: {}: {}", source_, path_.empty() ? root_ : path_, what));
  }
  bool has(const std::string& key) const { return j_.is_object() && j_.contains(key); }
  JsonField at(const std::string& key) const {
    if (!j_.is_object()) fail(fmt::format("expected an object, got {}", j_.dump()));
    const std::string path = path_.empty() ? key : path_ + "." + key;
    if (!j_.contains(key)) JsonField(j_, path, source_, root_).fail("missing");
    return JsonField(j_.at(key), path, source_, root_);
  }
  // Element `i` of an array (check array_size() first).
  JsonField at(std::size_t i) const {
    return JsonField(j_.at(i), fmt::format("{}[{}]", path_, i), source_, root_);
  }
  std::size_t array_size() const {
    if (!j_.is_array()) fail(fmt::format("expected an array, got {}", j_.dump()));
    return j_.size();
  }
  std::string str() const {
    if (!j_.is_string()) fail(fmt::format("expected a string, got {}", j_.dump()));
    return j_.get<std::string>();
  }
  std::int64_t integer() const {
    if (!j_.is_number_integer()) fail(fmt::format("expected an integer, got {}", j_.dump()));
    return j_.get<std::int64_t>();
  }
  bool boolean() const {
    if (!j_.is_boolean()) fail(fmt::format("expected true or false, got {}", j_.dump()));
    return j_.get<bool>();
  }
  double number() const {
    if (!j_.is_number()) fail(fmt::format("expected a number, got {}", j_.dump()));
    const double v = j_.get<double>();
    if (!std::isfinite(v)) fail("must be finite");
    return v;
  }
  double positive() const {
    const double v = number();
    if (!(v > 0)) fail(fmt::format("must be > 0, got {}", v));
    return v;
  }
  double non_negative() const {
    const double v = number();
    if (!(v >= 0)) fail(fmt::format("must be >= 0, got {}", v));
    return v;
  }

 private:
  JsonField(const nlohmann::json& j, std::string path, const std::string& source, const char* root)
      : j_(j), path_(std::move(path)), source_(source), root_(root) {}

  const nlohmann::json& j_;
  std::string path_;
  const std::string& source_;
  const char* root_;
};

}  // namespace huddle::io
