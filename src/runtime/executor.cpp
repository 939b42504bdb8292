#include "runtime/executor.h"

#include "core/error.h"
#include "kernels/kernels.h"

#include <fmt/format.h>

#include <cstring>
#include <numeric>

namespace huddle {
namespace {

Shape resolve(const Shape& shape, std::int64_t tokens) {
  Shape out = shape;
  for (std::int64_t& d : out) {
    if (d == kTokens) d = tokens;
  }
  return out;
}

bool is_elementwise(OpKind kind) {
  return kind == OpKind::Add || kind == OpKind::Mul || kind == OpKind::GeluTanh ||
         kind == OpKind::GeluErf || kind == OpKind::Silu || kind == OpKind::Rope;
}

}  // namespace

Executor::Executor(const Graph& graph, const WeightMap& weights, std::int64_t max_positions)
    : graph_(graph), max_positions_(max_positions) {
  const std::size_t n = graph.values().size();
  bound_weights_.resize(n);
  last_use_.assign(n, 0);
  is_output_.assign(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const Value& v = graph.values()[i];
    if (v.kind != ValueKind::Weight) continue;
    Tensor t = resolve_weight(weights, v.weight);
    if (t.shape() != v.shape) {
      throw PlanError(fmt::format("weight '{}' is bound to a tensor of shape {}, graph expects {}",
                                  v.name, shape_str(t.shape()), shape_str(v.shape)));
    }
    bound_weights_[i] = std::move(t);
  }
  for (std::size_t op = 0; op < graph.ops().size(); ++op) {
    for (ValueId id : graph.ops()[op].inputs) last_use_[static_cast<std::size_t>(id)] = op;
  }
  for (ValueId id : graph.outputs()) is_output_[static_cast<std::size_t>(id)] = true;
  caches_.resize(static_cast<std::size_t>(graph.num_cache_slots()));
}

Tensor Executor::forward(std::span<const std::int32_t> ids, bool all_rows) {
  const auto tokens = static_cast<std::int64_t>(ids.size());
  if (tokens == 0) throw InputError("no input tokens");
  if (position_ + tokens > max_positions_) {
    throw InputError(fmt::format("{} tokens after {} already processed exceed the model's context of "
                                 "{} positions",
                                 tokens, position_, max_positions_));
  }
  std::vector<Tensor> values(graph_.values().size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const Value& v = graph_.values()[i];
    if (v.kind == ValueKind::Weight) {
      values[i] = bound_weights_[i];
    } else if (v.kind == ValueKind::Input) {
      Tensor t = Tensor::empty(DType::I32, {tokens});
      if (v.name == "ids") {
        std::memcpy(t.i32(), ids.data(), ids.size_bytes());
      } else if (v.name == "positions") {
        std::iota(t.i32(), t.i32() + tokens, static_cast<std::int32_t>(position_));
      } else if (v.name == "token_types") {
        std::fill(t.i32(), t.i32() + tokens, 0);
      } else {
        throw PlanError(fmt::format("graph input '{}' is not one the executor provides", v.name));
      }
      values[i] = std::move(t);
    }
  }

  const auto& ops = graph_.ops();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const auto start = std::chrono::steady_clock::now();
    Tensor out = run_op(op, values, all_rows, i);
    if (observer_) observer_(op, out, std::chrono::steady_clock::now() - start);
    values[static_cast<std::size_t>(op.output)] = std::move(out);
    for (ValueId id : op.inputs) {  // free activations nobody reads any more
      const auto u = static_cast<std::size_t>(id);
      if (last_use_[u] == i && !is_output_[u] && graph_.values()[u].kind == ValueKind::Activation) {
        values[u] = Tensor();
      }
    }
  }
  position_ += tokens;
  return values[static_cast<std::size_t>(graph_.outputs().front())];
}

Tensor Executor::reusable_or_new(const Op& op, std::size_t op_index, std::vector<Tensor>& values,
                                 Shape shape) {
  for (ValueId id : op.inputs) {
    const auto u = static_cast<std::size_t>(id);
    const Tensor& t = values[u];
    if (graph_.values()[u].kind == ValueKind::Activation && last_use_[u] == op_index &&
        !is_output_[u] && t.contiguous() && t.shape() == shape && t.dtype() == DType::F32) {
      return t;
    }
  }
  return Tensor::empty(DType::F32, std::move(shape));
}

Tensor Executor::run_op(const Op& op, std::vector<Tensor>& values, bool all_rows,
                        std::size_t op_index) {
  auto in = [&](std::size_t i) -> const Tensor& {
    return values[static_cast<std::size_t>(op.inputs[i])];
  };
  // Rows follow the first input (ids for embeddings): [T] normally, [1] after LastRow.
  const Shape out_shape = resolve(graph_.value(op.output).shape, in(0).dim(0));
  Tensor out;
  if (is_elementwise(op.kind)) {
    out = reusable_or_new(op, op_index, values, out_shape);
  } else if (op.kind != OpKind::LastRow && op.kind != OpKind::Attention) {
    out = Tensor::empty(DType::F32, out_shape);
  }
  switch (op.kind) {
    case OpKind::Embedding:
      kernels::embedding(std::span(in(0).i32(), static_cast<std::size_t>(in(0).numel())), in(1), out);
      break;
    case OpKind::Add:
      kernels::add(in(0), in(1), out);
      break;
    case OpKind::Mul:
      kernels::mul(in(0), in(1), out);
      break;
    case OpKind::LayerNorm:
      kernels::layer_norm(in(0), in(1), in(2), op.attrs.eps, out);
      break;
    case OpKind::RmsNorm:
      kernels::rms_norm(in(0), in(1), op.attrs.eps, out);
      break;
    case OpKind::Linear:
      kernels::linear(in(0), in(1), op.attrs.weight_layout, op.inputs.size() == 3 ? &in(2) : nullptr, out);
      break;
    case OpKind::GeluTanh:
      kernels::gelu_tanh(in(0), out);
      break;
    case OpKind::GeluErf:
      kernels::gelu_erf(in(0), out);
      break;
    case OpKind::Silu:
      kernels::silu(in(0), out);
      break;
    case OpKind::Rope: {
      if (out.raw() != in(0).raw()) std::memcpy(out.raw(), in(0).raw(), out.nbytes());
      const Tensor& pos = in(1);
      kernels::rope(out, std::span(pos.i32(), static_cast<std::size_t>(pos.numel())), op.attrs.heads,
                    op.attrs.head_dim, op.attrs.rope_theta);
      break;
    }
    case OpKind::Attention:
      out = attention(op, in(0), in(1), in(2));
      break;
    case OpKind::LastRow:
      out = all_rows ? in(0) : in(0).rows(in(0).dim(0) - 1, in(0).dim(0));
      break;
  }
  return out;
}

Tensor Executor::attention(const Op& op, const Tensor& q, const Tensor& k, const Tensor& v) {
  const std::int64_t tokens = q.dim(0);
  const std::int64_t kv_width = k.dim(1);
  KvCache& cache = caches_[static_cast<std::size_t>(op.attrs.cache_slot)];
  if (!cache.k.defined() || cache.k.numel() == 0 || cache.k.dim(1) != kv_width) {
    cache.k = Tensor::empty(DType::F32, {max_positions_, kv_width});
    cache.v = Tensor::empty(DType::F32, {max_positions_, kv_width});
  }
  const std::size_t row_bytes = static_cast<std::size_t>(kv_width) * sizeof(float);
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::memcpy(cache.k.f32() + (position_ + t) * kv_width, k.f32() + t * k.row_stride(), row_bytes);
    std::memcpy(cache.v.f32() + (position_ + t) * kv_width, v.f32() + t * v.row_stride(), row_bytes);
  }
  const std::int64_t keys = position_ + tokens;
  Tensor out = Tensor::empty(DType::F32, q.shape());
  kernels::attention(q, cache.k.rows(0, keys), cache.v.rows(0, keys), op.attrs.heads, op.attrs.kv_heads,
                     op.attrs.head_dim, position_, op.attrs.causal, out);
  return out;
}

}  // namespace huddle
