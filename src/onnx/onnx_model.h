// OnnxModel: an ONNX file (opset 11-17) imported into Huddle's Graph IR with its weights.
//
// The import reads the protobuf with libonnx's generated schema (onnx_proto), evaluates constant
// subgraphs (Constant, Concat of constants, Shape of a known shape, ...), converts every node to
// Graph ops with shapes inferred by Huddle (no value_info needed), then, unless asked not to,
// folds BatchNormalization into the preceding Conv and fuses the following activation
// (onnx/fuse.h). An operator, attribute or opset Huddle does not support is refused with a
// LoadError naming the file, the node and its op type; nothing is approximated.
#pragma once

#include "graph/graph.h"
#include "model/model.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace huddle::onnx_import {

struct ImportOptions {
  // Shapes for graph inputs whose dimensions are symbolic in the file (e.g. a dynamic batch).
  // A given shape must agree with every concrete dimension of the file. Symbolic dimensions
  // without a given shape are 1 for the first (batch) dimension; elsewhere they are refused.
  std::map<std::string, Shape> input_shapes;
  bool fuse = true;  // fold BatchNorm into Conv and fuse activations
};

struct TensorInfo {
  std::string name;
  Shape shape;
};

// Whether `model` names an ONNX file (".onnx") rather than a Hugging Face model directory.
bool is_onnx_path(const std::string& model);

// The bytes of an ONNX file (LoadError naming it when it cannot be read).
std::string read_onnx_file(const std::filesystem::path& path);

class OnnxModel {
 public:
  // LoadError naming the file (and node) for an unreadable, corrupt or unsupported model;
  // InputError for an input shape in `options` that does not fit the model.
  static OnnxModel load(const std::filesystem::path& path, const ImportOptions& options = {});
  // The same from the file's bytes (a worker that was sent the model); `path` names it in errors.
  static OnnxModel load_bytes(const std::string& bytes, const std::filesystem::path& path,
                              const ImportOptions& options = {});

  const std::filesystem::path& path() const { return path_; }
  const Graph& graph() const { return graph_; }
  const WeightMap& weights() const { return weights_; }
  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  std::int64_t opset() const { return opset_; }
  // ONNX op type -> nodes of that type in the file.
  const std::map<std::string, int>& op_counts() const { return op_counts_; }
  // Elements of all float initializers in the file (the model's parameter count).
  std::int64_t parameter_count() const { return parameters_; }
  std::string producer() const { return producer_; }

 private:
  std::filesystem::path path_;
  Graph graph_;
  WeightMap weights_;
  std::vector<TensorInfo> inputs_, outputs_;
  std::int64_t opset_ = 0;
  std::map<std::string, int> op_counts_;
  std::int64_t parameters_ = 0;
  std::string producer_;
};

}  // namespace huddle::onnx_import
