#include "onnx/import_context.h"

#include "core/error.h"

#include <fmt/format.h>

#include <cmath>

namespace huddle::onnx_import {

ImportContext::ImportContext(std::string file, std::int64_t opset, Graph& graph, WeightMap& weights)
    : file_(std::move(file)), opset_(opset), graph_(graph), weights_(weights) {}

void ImportContext::define_value(const std::string& name, ValueId id) {
  values_[name] = id;
}

void ImportContext::define_constant(const std::string& name, Constant c) {
  constants_[name] = std::move(c);
}

void ImportContext::begin_node(const onnx::NodeProto& node) {
  node_ = &node;
}

void ImportContext::fail(std::string_view what) const {
  if (!node_) throw LoadError(fmt::format("{}: {}", file_, what));
  const std::string name = !node_->name().empty()     ? node_->name()
                           : node_->output_size() > 0 ? node_->output(0)
                                                      : std::string("?");
  throw LoadError(fmt::format("{}: node '{}' ({}): {}", file_, name, node_->op_type(), what));
}

const std::string& ImportContext::input_name(int i) const {
  static const std::string empty;
  if (i < 0 || i >= node_->input_size()) return empty;
  return node_->input(i);
}

bool ImportContext::has_input(int i) const {
  return !input_name(i).empty();
}

void ImportContext::check_defined(const std::string& name) const {
  if (values_.contains(name) || constants_.contains(name)) return;
  const auto why = unusable_.find(name);
  if (why != unusable_.end()) fail(fmt::format("input '{}': {}", name, why->second));
  fail(fmt::format("input '{}' is not defined by an earlier node, initializer or graph input",
                   name));
}

bool ImportContext::is_constant(int i) const {
  return has_input(i) && constants_.contains(input_name(i));
}

const Constant& ImportContext::constant(int i) const {
  if (!has_input(i)) fail(fmt::format("input {} is required", i));
  check_defined(input_name(i));
  const auto it = constants_.find(input_name(i));
  if (it == constants_.end())
    fail(fmt::format("input '{}' must be a constant (an initializer or computed from constants)",
                     input_name(i)));
  return it->second;
}

std::vector<std::int64_t> ImportContext::ints_input(int i) const {
  const Constant& c = constant(i);
  if (!c.is_int) fail(fmt::format("input '{}' must hold integers", input_name(i)));
  return c.i;
}

ValueId ImportContext::value(int i) {
  if (!has_input(i)) fail(fmt::format("input {} is required", i));
  const std::string& name = input_name(i);
  check_defined(name);
  if (const auto it = values_.find(name); it != values_.end()) return it->second;
  const Constant& c = constants_.at(name);
  if (c.is_int)
    fail(fmt::format("input '{}' holds integers; only float32 tensors are computed", name));
  for (std::int64_t d : c.shape) {
    if (d <= 0) fail(fmt::format("input '{}' is empty ({})", name, shape_str(c.shape)));
  }
  const ValueId id = add_weight(name, c.shape, c.f);
  values_[name] = id;
  return id;
}

ValueId ImportContext::add_weight(const std::string& name, Shape shape, std::vector<float> values) {
  if (weights_.contains(name) || graph_.find(name))
    fail(fmt::format("tensor name '{}' is defined twice", name));
  weights_[name] = Tensor::from_f32(shape, values);
  return graph_.add_weight(name, shape, WeightRef{name, shape});
}

Shape ImportContext::shape(int i) const {
  if (!has_input(i)) fail(fmt::format("input {} is required", i));
  const std::string& name = input_name(i);
  check_defined(name);
  if (const auto it = values_.find(name); it != values_.end())
    return graph_.value(it->second).shape;
  return constants_.at(name).shape;
}

const onnx::AttributeProto* ImportContext::attr(std::string_view name) const {
  for (const auto& a : node_->attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

void ImportContext::allow_attrs(std::initializer_list<std::string_view> known) const {
  for (const auto& a : node_->attribute()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || a.name() == k;
    if (!ok) fail(fmt::format("attribute '{}' is not supported", a.name()));
  }
}

bool ImportContext::has_attr(std::string_view name) const {
  return attr(name) != nullptr;
}

std::int64_t ImportContext::attr_int(std::string_view name, std::int64_t fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INT)
    fail(fmt::format("attribute '{}' must be an int", name));
  return a->i();
}

float ImportContext::attr_float(std::string_view name, float fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::FLOAT)
    fail(fmt::format("attribute '{}' must be a float", name));
  if (!std::isfinite(a->f())) fail(fmt::format("attribute '{}' is not finite", name));
  return a->f();
}

std::string ImportContext::attr_string(std::string_view name, const std::string& fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::STRING)
    fail(fmt::format("attribute '{}' must be a string", name));
  return a->s();
}

std::vector<std::int64_t> ImportContext::attr_ints(
    std::string_view name, const std::vector<std::int64_t>& fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INTS)
    fail(fmt::format("attribute '{}' must be a list of ints", name));
  return {a->ints().begin(), a->ints().end()};
}

std::vector<float> ImportContext::attr_floats(std::string_view name) const {
  const auto* a = attr(name);
  if (!a) return {};
  if (a->type() != onnx::AttributeProto::FLOATS)
    fail(fmt::format("attribute '{}' must be a list of floats", name));
  return {a->floats().begin(), a->floats().end()};
}

const onnx::TensorProto* ImportContext::attr_tensor(std::string_view name) const {
  const auto* a = attr(name);
  if (!a) return nullptr;
  if (a->type() != onnx::AttributeProto::TENSOR)
    fail(fmt::format("attribute '{}' must be a tensor", name));
  return &a->t();
}

void ImportContext::set_value(int i, ValueId id) {
  const std::string& name = output(i);
  if (values_.contains(name) || constants_.contains(name))
    fail(fmt::format("output '{}' is defined twice", name));
  values_[name] = id;
}

void ImportContext::set_constant(int i, Constant c) {
  const std::string& name = output(i);
  if (values_.contains(name) || constants_.contains(name))
    fail(fmt::format("output '{}' is defined twice", name));
  constants_[name] = std::move(c);
}

ValueId ImportContext::add_op(OpKind kind, std::vector<ValueId> inputs, OpAttrs attrs,
                              const std::string& name) {
  const std::string op_name = name.empty() ? output(0) : name;
  if (op_name.empty()) fail("output 0 has no name");
  if (graph_.find(op_name)) fail(fmt::format("tensor name '{}' is defined twice", op_name));
  try {
    return graph_.add_op(kind, op_name, std::move(inputs), std::move(attrs));
  } catch (const PlanError& e) {
    fail(e.what());
  }
}

void ImportContext::end_node() {
  for (int i = 0; i < node_->output_size(); ++i) {
    const std::string& name = node_->output(i);
    if (name.empty() || values_.contains(name) || constants_.contains(name)) continue;
    unusable_[name] = fmt::format("output {} of node '{}' ({}) is not supported", i, node_->name(),
                                  node_->op_type());
  }
}

std::optional<ValueId> ImportContext::find_value(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

}  // namespace huddle::onnx_import
