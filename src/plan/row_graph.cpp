#include "plan/row_graph.h"

#include "core/palette.h"

#include <algorithm>

namespace huddle::rows {
namespace {

bool is_4d(const Shape& s) {
  return s.size() == 4 && std::all_of(s.begin(), s.end(), [](std::int64_t d) { return d >= 0; });
}

std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (std::int64_t d : s) n *= d;
  return n;
}

bool elementwise(OpKind k) {
  switch (k) {
    case OpKind::Sub:
    case OpKind::Div:
    case OpKind::Add:
    case OpKind::Mul:
    case OpKind::Relu:
    case OpKind::Clip:
    case OpKind::Sigmoid:
    case OpKind::HardSigmoid:
    case OpKind::HardSwish:
    case OpKind::BatchNorm:
      return true;
    default:
      return false;
  }
}

bool unary_activation(OpKind k) {
  switch (k) {
    case OpKind::Relu:
    case OpKind::Clip:
    case OpKind::Sigmoid:
    case OpKind::HardSigmoid:
    case OpKind::HardSwish:
      return true;
    default:
      return false;
  }
}

// A shape a column layer may have: concrete, rank 2 or 3 (rank 4 is split by rows).
bool column_shape(const Shape& s) {
  return (s.size() == 2 || s.size() == 3) &&
         std::all_of(s.begin(), s.end(), [](std::int64_t d) { return d >= 1; });
}

// The map of input `i` of row layer `op` (whose output is `out`).
RowMap map_of(const Graph& g, const Op& op, std::size_t i, const Shape& out) {
  const Shape& in = g.value(op.inputs[i]).shape;
  RowMap m;
  if (!is_4d(out)) {  // a column layer: a unary activation reads its columns, a linear all
    m.kind = unary_activation(op.kind) ? RowMap::Kind::Same : RowMap::Kind::Whole;
    m.in_rows = split_extent(in);
    return m;
  }
  if (!is_4d(in) || (in[2] != out[2] && op.kind != OpKind::Conv2d && op.kind != OpKind::MaxPool &&
                     op.kind != OpKind::AvgPool && op.kind != OpKind::Resize)) {
    m.kind = RowMap::Kind::Whole;
    m.in_rows = split_extent(in);
    return m;
  }
  m.in_rows = in[2];
  switch (op.kind) {
    case OpKind::Conv2d:
    case OpKind::MaxPool:
    case OpKind::AvgPool:
      m.kind = RowMap::Kind::Window;
      m.window = op.attrs.window;
      break;
    case OpKind::Resize:
      m.kind = RowMap::Kind::Resize;
      m.resize = op.attrs.resize;
      m.out_rows = out[2];
      break;
    default:
      m.kind = RowMap::Kind::Same;
  }
  return m;
}

double flops_per_row(const Graph& g, const Op& op, const Shape& out) {
  if (!is_4d(out)) {  // a column layer: per output column, over the M leading indices
    const double m = static_cast<double>(numel(out) / out.back());
    if (unary_activation(op.kind)) return m;
    return 2.0 * m * static_cast<double>(g.value(op.inputs[0]).shape.back());
  }
  const double row_elements = static_cast<double>(out[0] * out[1] * out[3]);
  if (op.kind == OpKind::Conv2d) {
    const Shape& w = g.value(op.inputs[1]).shape;  // [O, C/groups, kh, kw]
    return 2.0 * row_elements * static_cast<double>(w[1] * w[2] * w[3]);
  }
  if (op.kind == OpKind::MaxPool || op.kind == OpKind::AvgPool) {
    return row_elements * static_cast<double>(op.attrs.window.kernel_h * op.attrs.window.kernel_w);
  }
  return row_elements;
}

}  // namespace

std::int64_t split_extent(const Shape& shape) {
  if (shape.size() == 4) return shape[2];
  return shape.empty() ? 1 : shape.back();
}

kernels::RowSpan RowMap::input_rows(std::int64_t a, std::int64_t b) const {
  if (kind == Kind::Whole) return {0, in_rows};
  if (a >= b) return {};
  switch (kind) {
    case Kind::Same:
      return {a, b};
    case Kind::Window:
      return kernels::input_rows_for(window, a, b, in_rows);
    case Kind::Resize:
      return kernels::resize_input_rows(resize, in_rows, out_rows, a, b);
    case Kind::Whole:
      break;
  }
  return {0, in_rows};
}

bool row_splittable(const Graph& graph, const Op& op) {
  const Shape& out = graph.value(op.output).shape;
  if (!is_4d(out) || out[2] < 1) return false;
  switch (op.kind) {
    case OpKind::Conv2d:
    case OpKind::MaxPool:
    case OpKind::AvgPool:
    case OpKind::Resize:
      return is_4d(graph.value(op.inputs[0]).shape);
    case OpKind::Concat:
      return op.attrs.axis != 2;
    case OpKind::Slice: {
      const Shape& in = graph.value(op.inputs[0]).shape;
      return is_4d(in) && in[2] == out[2] && op.attrs.starts.size() == 4 &&
             op.attrs.starts[2] == 0 && op.attrs.steps[2] == 1;
    }
    default:
      break;
  }
  if (!elementwise(op.kind)) return false;
  // A weight operand is whole on every device: fine when broadcast along H, not when it has rows
  // of its own (it would need slicing per band).
  for (ValueId in : op.inputs) {
    const Value& v = graph.value(in);
    if (v.kind == ValueKind::Weight && op.kind != OpKind::BatchNorm && v.shape.size() == 4 &&
        v.shape[2] != 1) {
      return false;
    }
  }
  return true;
}

bool column_splittable(const Graph& graph, const Op& op, const std::vector<bool>& column_values) {
  if (!column_shape(graph.value(op.output).shape) || op.inputs.empty()) return false;
  const Value& x = graph.value(op.inputs[0]);
  if (x.kind == ValueKind::Weight) return false;
  if (unary_activation(op.kind)) {
    return op.inputs.size() == 1 && column_values[static_cast<std::size_t>(op.inputs[0])] &&
           x.shape == graph.value(op.output).shape;
  }
  if (op.kind != OpKind::Linear && op.kind != OpKind::MatMul) return false;
  if (!column_shape(x.shape) || op.inputs.size() < 2 || x.dtype != DType::F32) return false;
  // Every other operand is a weight: the matrix (2-D) and a linear's bias, sliced per device.
  for (std::size_t k = 1; k < op.inputs.size(); ++k) {
    if (graph.value(op.inputs[k]).kind != ValueKind::Weight) return false;
  }
  return graph.value(op.inputs[1]).shape.size() == 2;
}

namespace {

// Reshapes of a row layer's 4-D output into a value read only by column layers (as their operand
// 0) and not a graph output: per value, the reshape op that makes it (-1 where none).
std::vector<int> foldable_reshapes(const Graph& graph) {
  const std::size_t n = graph.values().size();
  std::vector<std::vector<std::size_t>> readers(n);
  for (std::size_t i = 0; i < graph.ops().size(); ++i) {
    for (ValueId in : graph.ops()[i].inputs) readers[static_cast<std::size_t>(in)].push_back(i);
  }
  std::vector<bool> row_value(n, false), column_value(n, false);
  std::vector<int> folded(n, -1);
  for (std::size_t i = 0; i < graph.ops().size(); ++i) {
    const Op& op = graph.ops()[i];
    const auto out = static_cast<std::size_t>(op.output);
    if (row_splittable(graph, op)) {
      row_value[out] = true;
    } else if (column_splittable(graph, op, column_value)) {
      column_value[out] = true;
    } else if (op.kind == OpKind::Reshape && row_value[static_cast<std::size_t>(op.inputs[0])] &&
               column_shape(graph.value(op.output).shape) && !readers[out].empty()) {
      bool fold = std::find(graph.outputs().begin(), graph.outputs().end(), op.output) ==
                  graph.outputs().end();
      for (std::size_t r : readers[out]) {
        const Op& reader = graph.ops()[r];
        fold = fold && (reader.kind == OpKind::Linear || reader.kind == OpKind::MatMul) &&
               reader.inputs[0] == op.output && column_splittable(graph, reader, column_value);
      }
      if (fold) folded[out] = static_cast<int>(i);
    }
  }
  return folded;
}

}  // namespace

RowGraph build_row_graph(const Graph& graph) {
  RowGraph rg;
  std::vector<int> layer_of_value(graph.values().size(), -1);
  std::vector<bool> column_values(graph.values().size(), false);
  const std::vector<int> folded = foldable_reshapes(graph);
  for (std::size_t i = 0; i < graph.ops().size(); ++i) {
    const Op& op = graph.ops()[i];
    if (folded[static_cast<std::size_t>(op.output)] >= 0) {
      rg.folded.push_back(i);
      continue;
    }
    const bool columns = !row_splittable(graph, op) && column_splittable(graph, op, column_values);
    if (columns || row_splittable(graph, op)) {
      const Shape& out = graph.value(op.output).shape;
      RowLayer layer;
      layer.op = i;
      layer.name = op.name;
      layer.kind = op.kind;
      layer.columns = columns;
      layer.rows = split_extent(out);
      layer.bytes_per_row = numel(out) / layer.rows * static_cast<std::int64_t>(sizeof(float));
      column_values[static_cast<std::size_t>(op.output)] = columns;
      layer.flops_per_row = flops_per_row(graph, op, out);
      for (std::size_t k = 0; k < op.inputs.size(); ++k) {
        const Value& v = graph.value(op.inputs[k]);
        if (v.kind == ValueKind::Weight) continue;
        RowInput in;
        in.value = op.inputs[k];
        in.map = map_of(graph, op, k, out);
        if (const int r = folded[static_cast<std::size_t>(in.value)]; r >= 0) {
          in.reshape = r;  // read the reshape's input whole instead
          in.value = graph.ops()[static_cast<std::size_t>(r)].inputs[0];
          in.map.in_rows = split_extent(graph.value(in.value).shape);
        }
        in.producer = layer_of_value[static_cast<std::size_t>(in.value)];
        const std::int64_t bytes =
            numel(graph.value(in.value).shape) * static_cast<std::int64_t>(sizeof(float));
        in.bytes_per_row = in.map.kind == RowMap::Kind::Whole ? bytes : bytes / in.map.in_rows;
        layer.inputs.push_back(in);
      }
      const int index = static_cast<int>(rg.layers.size());
      layer_of_value[static_cast<std::size_t>(op.output)] = index;
      rg.layers.push_back(std::move(layer));
      rg.consumers.emplace_back();
      for (const RowInput& in : rg.layers.back().inputs) {
        if (in.producer >= 0) {
          auto& c = rg.consumers[static_cast<std::size_t>(in.producer)];
          if (c.empty() || c.back() != index) c.push_back(index);
        }
      }
    } else {
      TailOp t;
      t.op = i;
      for (ValueId in : op.inputs) {
        const int producer = layer_of_value[static_cast<std::size_t>(in)];
        if (producer >= 0 &&
            std::find(t.row_inputs.begin(), t.row_inputs.end(), producer) == t.row_inputs.end()) {
          t.row_inputs.push_back(producer);
        }
      }
      const Shape& out = graph.value(op.output).shape;
      t.flops = static_cast<double>(numel(out));
      if (op.kind == OpKind::Linear || op.kind == OpKind::MatMul) {
        const Shape& a = graph.value(op.inputs[0]).shape;
        t.flops *= 2.0 * static_cast<double>(a.back());
      }
      rg.tail.push_back(std::move(t));
    }
  }
  for (ValueId o : graph.outputs()) {
    const int l = layer_of_value[static_cast<std::size_t>(o)];
    if (l >= 0) rg.output_layers.push_back(l);
  }
  return rg;
}

namespace {

// Whether every channel of a [1, C, H, W] f32 tensor takes at most 256 values.
bool channels_fit_palette(const Tensor& t) {
  if (t.dtype() != DType::F32 || t.shape().size() != 4 || t.shape()[0] != 1) return false;
  const Tensor x = t.contiguous() ? t : t.clone();
  const std::int64_t plane = x.shape()[2] * x.shape()[3];
  std::vector<std::byte> scratch;
  for (std::int64_t c = 0; c < x.shape()[1]; ++c) {
    scratch.clear();
    const std::span<const float> values(x.f32() + c * plane, static_cast<std::size_t>(plane));
    if (!encode_palette(values, 1, scratch)) return false;
  }
  return true;
}

}  // namespace

RowGraph with_palette_inputs(const RowGraph& rg, const Graph& graph,
                             const std::map<std::string, Tensor>& inputs) {
  RowGraph out = rg;
  std::map<ValueId, bool> fits;  // per graph input read by a row layer
  for (RowLayer& layer : out.layers) {
    for (RowInput& in : layer.inputs) {
      if (in.producer >= 0 || in.map.kind == RowMap::Kind::Whole) continue;
      const Value& v = graph.value(in.value);
      if (v.kind != ValueKind::Input) continue;
      const auto [it, fresh] = fits.try_emplace(in.value, false);
      if (fresh) {
        const auto tensor = inputs.find(v.name);
        it->second = tensor != inputs.end() && channels_fit_palette(tensor->second);
      }
      if (it->second) in.bytes_per_row /= 4;
    }
  }
  return out;
}

}  // namespace huddle::rows
