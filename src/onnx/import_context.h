// Internal to the ONNX importer: the state of one import (names -> graph values or constants)
// and typed access to the node being converted, its inputs and attributes. Every error it raises
// is a LoadError naming the file, the node and its op type.
#pragma once

#include "graph/graph.h"
#include "model/model.h"
#include "onnx/constant.h"

#include <onnx/onnx_pb.h>

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::onnx_import {

class ImportContext {
 public:
  ImportContext(std::string file, std::int64_t opset, Graph& graph, WeightMap& weights);

  std::int64_t opset() const { return opset_; }
  const std::string& file() const { return file_; }

  // Names defined before any node: graph inputs and initializers.
  void define_value(const std::string& name, ValueId id);
  void define_constant(const std::string& name, Constant c);

  // The node being converted (errors name it).
  void begin_node(const onnx::NodeProto& node);
  const onnx::NodeProto& node() const { return *node_; }
  [[noreturn]] void fail(std::string_view what) const;

  // Inputs of the node: absent when the name is empty or beyond the list (optional inputs).
  bool has_input(int i) const;
  bool is_constant(int i) const;
  const Constant& constant(int i) const;  // fails when not a load-time constant
  // A graph value for input i; a float constant becomes a weight on first use.
  ValueId value(int i);
  Shape shape(int i) const;  // of a value or a constant
  // Integer list from a constant input (fails when not constant integers).
  std::vector<std::int64_t> ints_input(int i) const;

  // Attributes. Each converter lists the attributes it understands; any other is refused, so a
  // setting Huddle would ignore can never change the answer silently.
  void allow_attrs(std::initializer_list<std::string_view> known) const;
  bool has_attr(std::string_view name) const;
  std::int64_t attr_int(std::string_view name, std::int64_t fallback) const;
  float attr_float(std::string_view name, float fallback) const;
  std::string attr_string(std::string_view name, const std::string& fallback) const;
  std::vector<std::int64_t> attr_ints(std::string_view name,
                                      const std::vector<std::int64_t>& fallback) const;
  std::vector<float> attr_floats(std::string_view name) const;
  const onnx::TensorProto* attr_tensor(std::string_view name) const;

  // Outputs. Outputs a converter does not set may not be read by later nodes (checked).
  int num_outputs() const { return node_->output_size(); }
  const std::string& output(int i) const { return node_->output(i); }
  void set_value(int i, ValueId id);
  void set_constant(int i, Constant c);
  // Appends an op named `name` (default: output 0's name); shape errors become LoadErrors.
  ValueId add_op(OpKind kind, std::vector<ValueId> inputs, OpAttrs attrs = {},
                 const std::string& name = "");
  // Adds a weight holding `values` (a folded constant) named `name`.
  ValueId add_weight(const std::string& name, Shape shape, std::vector<float> values);
  // Marks the unset outputs of the node as unusable by later nodes.
  void end_node();

  // Lookup by name for the graph's outputs (nullopt for constants and undefined names).
  std::optional<ValueId> find_value(const std::string& name) const;
  bool is_constant_name(const std::string& name) const { return constants_.contains(name); }

  Graph& graph() { return graph_; }

 private:
  const onnx::AttributeProto* attr(std::string_view name) const;
  const std::string& input_name(int i) const;
  void check_defined(const std::string& name) const;

  std::string file_;
  std::int64_t opset_;
  Graph& graph_;
  WeightMap& weights_;
  const onnx::NodeProto* node_ = nullptr;
  std::map<std::string, ValueId> values_;
  std::map<std::string, Constant> constants_;
  std::map<std::string, std::string> unusable_;  // output name -> why
};

}  // namespace huddle::onnx_import
