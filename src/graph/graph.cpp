#include "graph/graph.h"

#include "core/error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <unordered_set>

namespace huddle {

std::string_view op_role_name(OpRole role) {
  switch (role) {
#define HUDDLE_ROLE_NAME(e, name) \
  case OpRole::e:                 \
    return name;
    HUDDLE_OP_ROLES(HUDDLE_ROLE_NAME)
#undef HUDDLE_ROLE_NAME
  }
  return "?";
}

std::optional<BlockKind> block_of(OpRole role) {
  switch (role) {
    case OpRole::Embed:
    case OpRole::AttnNorm:
    case OpRole::MlpNorm:
    case OpRole::AttnResidual:
    case OpRole::MlpResidual:
    case OpRole::FinalNorm:
      return BlockKind::Connection;
    case OpRole::AttnQ:
    case OpRole::AttnK:
    case OpRole::AttnV:
    case OpRole::AttnRope:
    case OpRole::AttnCore:
    case OpRole::AttnOut:
      return BlockKind::Attention;
    case OpRole::MlpUp:
    case OpRole::MlpGate:
    case OpRole::MlpAct:
    case OpRole::MlpDown:
      return BlockKind::Mlp;
    case OpRole::Head:
      return BlockKind::Head;
    case OpRole::Other:
      break;
  }
  return std::nullopt;
}

std::size_t weight_value_bytes(const Value& v) {
  return dtype_bytes(v.dtype, shape_numel(v.shape));
}

ValueId Graph::add_value(Value v) {
  values_.push_back(std::move(v));
  return static_cast<ValueId>(values_.size() - 1);
}

ValueId Graph::add_input(std::string name, Shape shape, DType dtype) {
  return add_value(Value{std::move(name), ValueKind::Input, dtype, std::move(shape), {}});
}

ValueId Graph::add_weight(std::string name, Shape shape, WeightRef ref, DType dtype) {
  return add_value(
      Value{std::move(name), ValueKind::Weight, dtype, std::move(shape), std::move(ref)});
}

ValueId Graph::add_op(OpKind kind, std::string name, std::vector<ValueId> inputs, OpAttrs attrs,
                      OpRole role, int layer) {
  std::vector<Shape> shapes;
  shapes.reserve(inputs.size());
  for (ValueId id : inputs) {
    if (id < 0 || id >= static_cast<ValueId>(values_.size())) {
      throw PlanError(fmt::format("op '{}': input value id {} is undefined", name, id));
    }
    shapes.push_back(values_[static_cast<std::size_t>(id)].shape);
  }
  Shape out_shape = infer_shape(kind, attrs, shapes, name);
  const ValueId out =
      add_value(Value{name, ValueKind::Activation, DType::F32, std::move(out_shape), {}});
  ops_.push_back(Op{kind, std::move(name), std::move(inputs), out, attrs, role, layer});
  return out;
}

void Graph::add_output(ValueId id) {
  HUDDLE_CHECK(id >= 0 && id < static_cast<ValueId>(values_.size()));
  outputs_.push_back(id);
}

void Graph::rebind_weight(ValueId id, WeightRef ref) {
  HUDDLE_CHECK(id >= 0 && id < static_cast<ValueId>(values_.size()));
  Value& v = values_[static_cast<std::size_t>(id)];
  HUDDLE_CHECK(v.kind == ValueKind::Weight, "'{}' is not a weight", v.name);
  v.weight = std::move(ref);
}

void Graph::set_weight_dtype(ValueId id, DType dtype) {
  HUDDLE_CHECK(id >= 0 && id < static_cast<ValueId>(values_.size()));
  Value& v = values_[static_cast<std::size_t>(id)];
  HUDDLE_CHECK(v.kind == ValueKind::Weight, "'{}' is not a weight", v.name);
  v.dtype = dtype;
}

const Value& Graph::value(ValueId id) const {
  HUDDLE_CHECK(id >= 0 && id < static_cast<ValueId>(values_.size()), "value id {}", id);
  return values_[static_cast<std::size_t>(id)];
}

std::optional<ValueId> Graph::find(std::string_view name) const {
  for (std::size_t i = 0; i < values_.size(); ++i) {
    if (values_[i].name == name) return static_cast<ValueId>(i);
  }
  return std::nullopt;
}

int Graph::num_cache_slots() const {
  int slots = 0;
  for (const Op& op : ops_) {
    if (op.kind == OpKind::Attention) slots = std::max(slots, op.attrs.cache_slot + 1);
  }
  return slots;
}

void Graph::validate() const {
  std::unordered_set<std::string_view> names;
  for (const Value& v : values_) {
    if (!names.insert(v.name).second)
      throw PlanError(fmt::format("duplicate value name '{}'", v.name));
  }
  std::vector<bool> defined(values_.size(), false);
  for (std::size_t i = 0; i < values_.size(); ++i) {
    defined[i] = values_[i].kind != ValueKind::Activation;
  }
  for (const Op& op : ops_) {
    std::vector<Shape> shapes;
    for (ValueId id : op.inputs) {
      if (id < 0 || id >= static_cast<ValueId>(values_.size()) ||
          !defined[static_cast<std::size_t>(id)]) {
        throw PlanError(fmt::format("op '{}' reads value {} before it is defined", op.name, id));
      }
      shapes.push_back(values_[static_cast<std::size_t>(id)].shape);
    }
    const Shape out = infer_shape(op.kind, op.attrs, shapes, op.name);
    if (op.output < 0 || op.output >= static_cast<ValueId>(values_.size())) {
      throw PlanError(fmt::format("op '{}' writes an undefined value", op.name));
    }
    if (values_[static_cast<std::size_t>(op.output)].shape != out) {
      throw PlanError(fmt::format("op '{}' output shape {} disagrees with inferred {}", op.name,
                                  shape_str(values_[static_cast<std::size_t>(op.output)].shape),
                                  shape_str(out)));
    }
    defined[static_cast<std::size_t>(op.output)] = true;
  }
  for (ValueId id : outputs_) {
    if (!defined[static_cast<std::size_t>(id)]) {
      throw PlanError(fmt::format("graph output '{}' is never computed", value(id).name));
    }
  }
}

nlohmann::json Graph::to_json() const {
  nlohmann::json values = nlohmann::json::array();
  for (const Value& v : values_) {
    nlohmann::json j = {{"name", v.name},
                        {"kind", v.kind == ValueKind::Input    ? "input"
                                 : v.kind == ValueKind::Weight ? "weight"
                                                               : "activation"},
                        {"dtype", dtype_name(v.dtype)},
                        {"shape", v.shape}};
    if (v.kind == ValueKind::Weight) {
      j["tensor"] = v.weight.tensor;
      if (v.weight.axis >= 0) j["slice"] = {v.weight.axis, v.weight.begin, v.weight.end};
      if (v.weight.axis2 >= 0) j["slice2"] = {v.weight.axis2, v.weight.begin2, v.weight.end2};
    }
    values.push_back(std::move(j));
  }
  nlohmann::json ops = nlohmann::json::array();
  for (const Op& op : ops_) {
    std::vector<std::string> inputs;
    for (ValueId id : op.inputs) inputs.push_back(value(id).name);
    nlohmann::json j = {{"op", op_name(op.kind)},
                        {"name", op.name},
                        {"role", op_role_name(op.role)},
                        {"layer", op.layer},
                        {"inputs", inputs}};
    if (!op.attrs.group.empty()) j["group"] = op.attrs.group;
    if (op.attrs.wire != WireFormat::F32) j["wire"] = wire_format_name(op.attrs.wire);
    if (op.attrs.chunks != 1) j["chunks"] = op.attrs.chunks;
    ops.push_back(std::move(j));
  }
  std::vector<std::string> outputs;
  for (ValueId id : outputs_) outputs.push_back(value(id).name);
  return {{"values", values}, {"ops", ops}, {"outputs", outputs}};
}

}  // namespace huddle
