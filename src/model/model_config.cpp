#include "model/model_config.h"

#include "core/error.h"
#include "io/strict_json.h"
#include "io/text_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace huddle {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  const std::optional<std::string> text = io::read_text_file(path);
  if (!text) throw LoadError(fmt::format("{}: cannot open (missing or unreadable)", path.string()));
  return io::parse_strict_json(*text, path.string());
}

ConfigReader::ConfigReader(const nlohmann::json& json, std::string source, std::string prefix)
    : json_(json), source_(std::move(source)), prefix_(std::move(prefix)) {
  if (!json_.is_object()) {
    if (prefix_.empty()) throw LoadError(fmt::format("{}: expected a JSON object", source_));
    throw LoadError(fmt::format("{}: field '{}' must be an object, is {}", source_,
                                prefix_.substr(0, prefix_.size() - 1), json_.dump()));
  }
}

ConfigReader ConfigReader::object(const std::string& key) const {
  if (!has(key)) throw LoadError(fmt::format("{}: missing field '{}'", source_, field(key)));
  return ConfigReader(json_.at(key), source_, field(key) + ".");
}

std::vector<std::string> ConfigReader::keys() const {
  std::vector<std::string> out;
  for (const auto& [key, value] : json_.items()) out.push_back(key);
  return out;
}

bool ConfigReader::has(const std::string& key) const {
  return json_.contains(key) && !json_.at(key).is_null();
}

bool ConfigReader::contains(const std::string& key) const {
  return json_.contains(key);
}

std::vector<std::string> ConfigReader::string_list(const std::string& key) const {
  if (!has(key)) return {};
  const nlohmann::json& v = json_.at(key);
  std::vector<std::string> out;
  if (v.is_array()) {
    for (const auto& x : v) {
      if (!x.is_string()) break;
      out.push_back(x.get<std::string>());
    }
    if (out.size() == v.size()) return out;
  }
  throw LoadError(fmt::format("{}: field '{}' must be a list of strings, is {}", source_,
                              field(key), v.dump()));
}

std::int64_t ConfigReader::integer(const std::string& key) const {
  if (!has(key)) throw LoadError(fmt::format("{}: missing field '{}'", source_, field(key)));
  const nlohmann::json& v = json_.at(key);
  if (!v.is_number_integer()) {
    throw LoadError(
        fmt::format("{}: field '{}' must be an integer, is {}", source_, field(key), v.dump()));
  }
  return v.get<std::int64_t>();
}

std::int64_t ConfigReader::integer_or(const std::string& key, std::int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

double ConfigReader::number_or(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = json_.at(key);
  if (!v.is_number()) {
    throw LoadError(
        fmt::format("{}: field '{}' must be a number, is {}", source_, field(key), v.dump()));
  }
  return v.get<double>();
}

std::string ConfigReader::string_or(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = json_.at(key);
  if (!v.is_string()) {
    throw LoadError(
        fmt::format("{}: field '{}' must be a string, is {}", source_, field(key), v.dump()));
  }
  return v.get<std::string>();
}

bool ConfigReader::boolean_or(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = json_.at(key);
  if (!v.is_boolean()) {
    throw LoadError(
        fmt::format("{}: field '{}' must be true or false, is {}", source_, field(key), v.dump()));
  }
  return v.get<bool>();
}

std::vector<std::int32_t> ConfigReader::int_list(const std::string& key) const {
  if (!has(key)) return {};
  const nlohmann::json& v = json_.at(key);
  std::vector<std::int32_t> out;
  auto take = [&](const nlohmann::json& x) {
    if (!x.is_number_integer()) {
      throw LoadError(
          fmt::format("{}: field '{}' must hold integers, has {}", source_, field(key), x.dump()));
    }
    out.push_back(x.get<std::int32_t>());
  };
  if (v.is_array()) {
    for (const auto& x : v) take(x);
  } else {
    take(v);
  }
  return out;
}

void ModelConfig::validate(const std::string& source) const {
  auto positive = [&](std::int64_t value, const char* field) {
    if (value <= 0)
      throw LoadError(fmt::format("{}: {} must be positive, is {}", source, field, value));
  };
  positive(vocab_size, "vocab_size");
  positive(hidden, "hidden size");
  positive(layers, "number of layers");
  positive(heads, "number of attention heads");
  positive(kv_heads, "number of key/value heads");
  positive(head_dim, "head dimension");
  positive(ffn, "intermediate (MLP) size");
  positive(max_positions, "max_position_embeddings");
  if (heads % kv_heads != 0) {
    throw LoadError(
        fmt::format("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                    source, heads, kv_heads));
  }
  if (!(norm_eps > 0.0f))
    throw LoadError(fmt::format("{}: the norm epsilon must be positive", source));
  if (sliding_window < 0) {
    throw LoadError(
        fmt::format("{}: sliding_window must be positive, is {}", source, sliding_window));
  }
}

}  // namespace huddle
