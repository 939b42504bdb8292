// Model: a Hugging Face model directory or a GGUF file (model/gguf_model.h) loaded for inference:
// its config, its forward Graph and its weights (F32 views of the memory-mapped checkpoint;
// half-precision and quantised tensors are widened once).
#pragma once

#include "graph/graph.h"
#include "model/architecture.h"
#include "model/model_config.h"

#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace huddle {

// Canonical checkpoint tensor name -> whole F32 tensor. Graph weight values refer to these names
// (plus an optional slice, see WeightRef).
using WeightMap = std::unordered_map<std::string, Tensor>;

// Returns the tensor a weight value refers to: the named tensor, sliced when the ref says so.
// PlanError if the tensor is absent or the slice does not fit.
Tensor resolve_weight(const WeightMap& weights, const WeightRef& ref);

class Model {
 public:
  // Loads DIR/config.json and the checkpoint (model.safetensors or a sharded index), or a GGUF
  // file (model/gguf_model.h). LoadError naming the file, tensor or field on any problem.
  static Model load(const std::filesystem::path& path);

  // The directory or GGUF file loaded.
  const std::filesystem::path& dir() const { return dir_; }
  const Architecture& architecture() const { return *architecture_; }
  const ModelConfig& config() const { return config_; }
  const Graph& graph() const { return graph_; }
  const WeightMap& weights() const { return weights_; }
  // Bytes of F32 weight data the graph uses.
  std::size_t weight_bytes() const;
  // config.json as read, or as built from GGUF metadata (so another device can rebuild the same
  // graph).
  const std::string& config_text() const { return config_text_; }
  // Canonical names of every tensor the checkpoint provides (whether the graph uses it or not).
  const std::vector<std::string>& tensor_names() const { return tensor_names_; }

 private:
  std::filesystem::path dir_;
  const Architecture* architecture_ = nullptr;
  ModelConfig config_;
  Graph graph_;
  WeightMap weights_;
  std::string config_text_;
  std::vector<std::string> tensor_names_;
};

// Builds a model's graph from its config.json text and the canonical tensor names its checkpoint
// provides — what a worker does with the primary's description. LoadError naming `source`.
struct ModelDescription {
  const Architecture* architecture = nullptr;
  ModelConfig config;
  Graph graph;
};
ModelDescription describe_model(const std::string& config_text,
                                const std::vector<std::string>& tensor_names,
                                const std::string& source);

}  // namespace huddle
