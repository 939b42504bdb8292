// Model: a Hugging Face model directory or a GGUF file (model/gguf_model.h) loaded for inference:
// its config, its forward Graph and its weights. Matrix weights (linear weights, embedding tables)
// are kept in their stored dtype as views of the memory-mapped checkpoint, or converted at load
// when LoadOptions ask (e.g. to Q8_0); norm scales and biases are F32 (model/weight_dtype.h).
#pragma once

#include "graph/graph.h"
#include "model/architecture.h"
#include "model/model_config.h"
#include "model/weight_dtype.h"

#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace huddle {

// Canonical checkpoint tensor name -> whole tensor (F32, or a weight dtype for matrices). Graph
// weight values refer to these names (plus an optional slice, see WeightRef).
using WeightMap = std::unordered_map<std::string, Tensor>;

// Returns the tensor a weight value refers to: the named tensor, sliced when the ref says so.
// PlanError if the tensor is absent or the slice does not fit (a block-quantised tensor's last
// axis may only be cut at multiples of its block; a k-quant matrix cut on blocks of 32 inside its
// super-blocks comes back as an owned Q8_0 copy of the slice).
Tensor resolve_weight(const WeightMap& weights, const WeightRef& ref);

class Model {
 public:
  // Loads DIR/config.json and the checkpoint (model.safetensors or a sharded index), or a GGUF
  // file (model/gguf_model.h). LoadError naming the file, tensor or field on any problem.
  static Model load(const std::filesystem::path& path, const LoadOptions& options = {});

  // The directory or GGUF file loaded.
  const std::filesystem::path& dir() const { return dir_; }
  const Architecture& architecture() const { return *architecture_; }
  const ModelConfig& config() const { return config_; }
  const Graph& graph() const { return graph_; }
  // Every tensor the graph uses, or only those LoadOptions::only_tensors names.
  const WeightMap& weights() const { return weights_; }
  const LoadOptions& load_options() const { return options_; }
  // Bytes of weight data in weights(), in the dtypes kept.
  std::size_t weight_bytes() const;
  // Elements per block of the model's block-quantised weights (32), 1 when it has none: tensor
  // parallel plans cut their columns at multiples of it (Plan::aligned_to_blocks).
  std::int64_t weight_block() const;
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
  LoadOptions options_;
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
