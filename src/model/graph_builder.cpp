#include "model/graph_builder.h"

#include <fmt/format.h>

namespace huddle {

ValueId GraphBuilder::weight(const std::string& tensor, Shape shape) {
  if (auto existing = graph_.find(tensor)) return *existing;  // tied weights are declared once
  return graph_.add_weight(tensor, shape, WeightRef{tensor, shape, -1, 0, 0});
}

ValueId GraphBuilder::weight_slice(const std::string& tensor, Shape tensor_shape, int axis,
                                   std::int64_t begin, std::int64_t end) {
  Shape shape = tensor_shape;
  shape[static_cast<std::size_t>(axis)] = end - begin;
  const std::string name = fmt::format("{}[{}:{}:{}]", tensor, axis, begin, end);
  return graph_.add_weight(name, std::move(shape),
                           WeightRef{tensor, std::move(tensor_shape), axis, begin, end});
}

ValueId GraphBuilder::input(const std::string& name, DType dtype) {
  return graph_.add_input(name, {kTokens}, dtype);
}

void GraphBuilder::begin_block(int layer) {
  layer_ = layer;
}

std::string GraphBuilder::qualified(const std::string& name) const {
  return layer_ < 0 ? name : fmt::format("blk.{}.{}", layer_, name);
}

ValueId GraphBuilder::op(OpKind kind, const std::string& name, std::vector<ValueId> inputs,
                         OpAttrs attrs, OpRole role) {
  return graph_.add_op(kind, qualified(name), std::move(inputs), attrs, role, layer_);
}

ValueId GraphBuilder::embedding(const std::string& name, ValueId ids, ValueId table, OpRole role) {
  return op(OpKind::Embedding, name, {ids, table}, {}, role);
}

ValueId GraphBuilder::add(const std::string& name, ValueId a, ValueId b, OpRole role) {
  return op(OpKind::Add, name, {a, b}, {}, role);
}

ValueId GraphBuilder::mul(const std::string& name, ValueId a, ValueId b, OpRole role) {
  return op(OpKind::Mul, name, {a, b}, {}, role);
}

ValueId GraphBuilder::layer_norm(const std::string& name, ValueId x, ValueId w, ValueId b,
                                 float eps, OpRole role) {
  OpAttrs attrs;
  attrs.eps = eps;
  return op(OpKind::LayerNorm, name, {x, w, b}, attrs, role);
}

ValueId GraphBuilder::rms_norm(const std::string& name, ValueId x, ValueId w, float eps,
                               OpRole role) {
  OpAttrs attrs;
  attrs.eps = eps;
  return op(OpKind::RmsNorm, name, {x, w}, attrs, role);
}

ValueId GraphBuilder::linear(const std::string& name, ValueId x, ValueId w, ValueId bias,
                             kernels::WeightLayout layout, OpRole role) {
  OpAttrs attrs;
  attrs.weight_layout = layout;
  std::vector<ValueId> inputs = {x, w};
  if (bias >= 0) inputs.push_back(bias);
  return op(OpKind::Linear, name, std::move(inputs), attrs, role);
}

ValueId GraphBuilder::activation(const std::string& name, OpKind kind, ValueId x, OpRole role) {
  return op(kind, name, {x}, {}, role);
}

ValueId GraphBuilder::rope(const std::string& name, ValueId x, ValueId positions, int heads,
                           int head_dim, const kernels::RopeSpec& spec, OpRole role) {
  OpAttrs attrs;
  attrs.heads = heads;
  attrs.head_dim = head_dim;
  attrs.rope = spec;
  return op(OpKind::Rope, name, {x, positions}, attrs, role);
}

ValueId GraphBuilder::attention(const std::string& name, ValueId q, ValueId k, ValueId v, int heads,
                                int kv_heads, int head_dim, bool causal, std::int64_t window) {
  OpAttrs attrs;
  attrs.heads = heads;
  attrs.kv_heads = kv_heads;
  attrs.head_dim = head_dim;
  attrs.causal = causal;
  attrs.sliding_window = window;
  attrs.cache_slot = layer_;
  return op(OpKind::Attention, name, {q, k, v}, attrs, OpRole::AttnCore);
}

ValueId GraphBuilder::last_row(const std::string& name, ValueId x) {
  return op(OpKind::LastRow, name, {x}, {}, OpRole::Head);
}

Graph GraphBuilder::finish() {
  graph_.validate();
  return std::move(graph_);
}

}  // namespace huddle
