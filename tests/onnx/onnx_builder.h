// Test helper: builds small ONNX models in memory (libonnx's protobuf classes) and saves them.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace huddle::testing {

class OnnxBuilder {
 public:
  explicit OnnxBuilder(std::int64_t opset = 13) {
    model_.set_ir_version(8);
    model_.set_producer_name("huddle-test");
    model_.add_opset_import()->set_version(opset);
    graph_ = model_.mutable_graph();
    graph_->set_name("test");
  }
  void input(const std::string& name, const std::vector<std::int64_t>& shape) {
    auto* vi = graph_->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (std::int64_t d : shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void output(const std::string& name) { graph_->add_output()->set_name(name); }
  void init(const std::string& name, const std::vector<std::int64_t>& shape,
            const std::vector<float>& values) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (std::int64_t d : shape) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
  }
  void init_ints(const std::string& name, const std::vector<std::int64_t>& values) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(values.size()));
    for (std::int64_t v : values) t->add_int64_data(v);
  }
  onnx::NodeProto* node(const std::string& type, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    auto* n = graph_->add_node();
    n->set_op_type(type);
    n->set_name(name.empty() ? type + "_" + std::to_string(graph_->node_size()) : name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  static void attr_int(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_float(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr_ints(onnx::NodeProto* n, const std::string& name,
                        const std::vector<std::int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (std::int64_t x : v) a->add_ints(x);
  }
  static void attr_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  std::filesystem::path save(const std::filesystem::path& path) const {
    std::ofstream out(path, std::ios::binary);
    model_.SerializeToOstream(&out);
    return path;
  }
  onnx::ModelProto& model() { return model_; }

 private:
  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
};

}  // namespace huddle::testing
