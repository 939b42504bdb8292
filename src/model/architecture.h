// Architecture: everything Huddle knows about one model family, in one file per family
// (model/arch/<name>.cpp). Adding a family = one more file + one line in architecture.cpp;
// docs/adding-an-architecture.md has the checklist.
#pragma once

#include "graph/graph.h"
#include "model/model_config.h"

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace huddle {

// Answers "does the checkpoint hold this canonical tensor?" while a graph is built (tied heads).
using HasTensor = std::function<bool(const std::string& canonical_name)>;

struct Architecture {
  std::string name;                      // builder name, e.g. "llama"
  std::vector<std::string> model_types;  // config.json "model_type" values it accepts
  std::vector<std::string> hf_classes;   // config.json "architectures" entries it accepts

  // config.json -> ModelConfig. Field errors name the file and field.
  std::function<ModelConfig(const ConfigReader&)> parse_config;
  // Checkpoint tensor name -> canonical name used by the graph; nullopt for tensors not needed
  // (GPT-2's attn.bias buffers, BERT's pooler and cls heads).
  std::function<std::optional<std::string>(std::string_view)> canonical_name;
  // Builds the forward graph. Weights are declared with their full checkpoint shapes, which the
  // loader checks against the checkpoint.
  std::function<Graph(const ModelConfig&, const HasTensor&)> build_graph;
  // ModelConfig -> config.json as the hub writes it (for `huddle synth`).
  std::function<nlohmann::json(const ModelConfig&)> config_json;
  // Canonical name -> name written in synthesized checkpoints (hub naming, e.g. "transformer.").
  std::function<std::string(const std::string&)> checkpoint_name;
  // Named presets at real sizes for `huddle synth --preset`.
  std::vector<std::pair<std::string, ModelConfig>> presets;
};

// All known architectures.
const std::vector<Architecture>& architectures();
// By builder name ("gpt2"); nullptr if unknown.
const Architecture* find_architecture(std::string_view name);
// Picks the architecture for a config.json (model_type first, then "architectures");
// LoadError naming the file, what it says, and what is supported.
const Architecture& architecture_for_config(const nlohmann::json& config,
                                            const std::string& source);

// One entry per architecture file.
Architecture gpt2_architecture();
Architecture bert_architecture();
Architecture llama_architecture();
Architecture qwen2_architecture();
Architecture mistral_architecture();
Architecture phi3_architecture();

}  // namespace huddle
