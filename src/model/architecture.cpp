#include "model/architecture.h"

#include "core/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace huddle {

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> all = {gpt2_architecture(),    bert_architecture(),
                                                llama_architecture(),   qwen2_architecture(),
                                                mistral_architecture(), phi3_architecture()};
  return all;
}

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& a : architectures()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const Architecture& architecture_for_config(const nlohmann::json& config,
                                            const std::string& source) {
  if (!config.is_object()) throw LoadError(fmt::format("{}: expected a JSON object", source));
  auto contains = [](const std::vector<std::string>& list, const std::string& s) {
    return std::find(list.begin(), list.end(), s) != list.end();
  };
  std::string model_type;
  if (config.contains("model_type") && config["model_type"].is_string()) {
    model_type = config["model_type"].get<std::string>();
    for (const Architecture& a : architectures()) {
      if (contains(a.model_types, model_type)) return a;
    }
  }
  std::vector<std::string> classes;
  if (config.contains("architectures") && config["architectures"].is_array()) {
    for (const auto& c : config["architectures"]) {
      if (!c.is_string()) continue;
      classes.push_back(c.get<std::string>());
      for (const Architecture& a : architectures()) {
        if (contains(a.hf_classes, classes.back())) return a;
      }
    }
  }
  std::vector<std::string> supported;
  for (const Architecture& a : architectures()) supported.push_back(a.name);
  if (model_type.empty() && classes.empty()) {
    throw LoadError(
        fmt::format("{}: neither 'model_type' nor 'architectures' is given; supported "
                    "architectures: {}",
                    source, fmt::join(supported, ", ")));
  }
  throw LoadError(
      fmt::format("{}: unsupported architecture (model_type '{}', architectures [{}]); "
                  "supported: {}",
                  source, model_type, fmt::join(classes, ", "), fmt::join(supported, ", ")));
}

}  // namespace huddle
