// Shape inference for the ops of imported graphs (ONNX CNNs): concrete N-D shapes, NCHW images.
#include "core/error.h"
#include "graph/graph.h"
#include "kernels/tensor_ops.h"

#include <fmt/format.h>

#include <algorithm>

namespace huddle {
namespace {

[[noreturn]] void fail(std::string_view op, std::string_view what) {
  throw PlanError(fmt::format("op '{}': {}", op, what));
}

void expect_concrete(const Shape& s, std::string_view op, std::string_view which) {
  if (s.size() > static_cast<std::size_t>(kernels::kMaxRank))
    fail(op, fmt::format("{} has rank {}, more than {}", which, s.size(), kernels::kMaxRank));
  for (std::int64_t d : s) {
    if (d <= 0) fail(op, fmt::format("{} needs positive dimensions, has {}", which, shape_str(s)));
  }
}

void require_rank(const Shape& s, std::size_t rank, std::string_view op, std::string_view which) {
  if (s.size() != rank)
    fail(op, fmt::format("{} must have rank {}, has shape {}", which, rank, shape_str(s)));
}

void expect_vector(const Shape& s, std::int64_t n, std::string_view op, std::string_view which) {
  if (s.size() != 1 || s[0] != n)
    fail(op, fmt::format("{} must have shape [{}], has {}", which, n, shape_str(s)));
}

void check_window(const kernels::Window2d& w, std::string_view op) {
  if (w.kernel_h < 1 || w.kernel_w < 1 || w.stride_h < 1 || w.stride_w < 1 || w.dilation_h < 1 ||
      w.dilation_w < 1 || w.pad_top < 0 || w.pad_left < 0 || w.pad_bottom < 0 || w.pad_right < 0 ||
      w.kernel_h > (1 << 20) || w.kernel_w > (1 << 20) || w.dilation_h > (1 << 20) ||
      w.dilation_w > (1 << 20) || w.pad_top > (1 << 20) || w.pad_bottom > (1 << 20) ||
      w.pad_left > (1 << 20) || w.pad_right > (1 << 20)) {
    fail(op, fmt::format("window kernel {}x{} stride {}x{} dilation {}x{} pads {},{},{},{} invalid",
                         w.kernel_h, w.kernel_w, w.stride_h, w.stride_w, w.dilation_h, w.dilation_w,
                         w.pad_top, w.pad_left, w.pad_bottom, w.pad_right));
  }
}

// Checks a banded op's band (attrs banded, band, out_rows) against its input x (holding rows
// [band.in_begin, + x[2])) and returns the output height of the band; for an op that is not
// banded, `whole_rows` (the output height of the whole input).
std::int64_t band_rows(const OpAttrs& a, const Shape& x, std::int64_t whole_rows,
                       std::string_view op, const kernels::RowSpan& need) {
  if (!a.banded) return whole_rows;
  const kernels::RowBand& b = a.band;
  if (whole_rows != a.out_rows || b.out_begin < 0 || b.out_end <= b.out_begin ||
      b.out_end > a.out_rows) {
    fail(op, fmt::format("band of output rows [{}, {}) of {} does not fit an output of {} rows",
                         b.out_begin, b.out_end, a.out_rows, whole_rows));
  }
  if (need.begin < b.in_begin || need.end > b.in_begin + x[2]) {
    fail(op,
         fmt::format("band of output rows [{}, {}) reads input rows [{}, {}); the input "
                     "holds [{}, {})",
                     b.out_begin, b.out_end, need.begin, need.end, b.in_begin, b.in_begin + x[2]));
  }
  return b.out_end - b.out_begin;
}

Shape window_shape(const Shape& x, std::int64_t channels, const OpAttrs& a, std::string_view op) {
  const kernels::Window2d& w = a.window;
  check_window(w, op);
  const std::int64_t in_h = a.banded ? a.band.in_height : x[2];
  const std::int64_t ho = kernels::window_out_h(w, in_h), wo = kernels::window_out_w(w, x[3]);
  if (ho <= 0 || wo <= 0) {
    fail(op, fmt::format("a {}x{} window (dilation {}x{}) does not fit the input {} with its "
                         "padding",
                         w.kernel_h, w.kernel_w, w.dilation_h, w.dilation_w, shape_str(x)));
  }
  const kernels::RowSpan need =
      a.banded ? kernels::input_rows_for(w, a.band.out_begin, a.band.out_end, in_h)
               : kernels::RowSpan{};
  return {x[0], channels, band_rows(a, x, ho, op, need), wo};
}

Shape infer_channels_last(OpKind kind, const OpAttrs& a, const std::vector<Shape>& in,
                          std::string_view op) {
  const bool windowed = kind == OpKind::Conv2d || kind == OpKind::MaxPool ||
                        kind == OpKind::AvgPool || kind == OpKind::GlobalAvgPool;
  if (!windowed) fail(op, fmt::format("{} has no channels-last form", op_name(kind)));
  require_rank(in[0], 4, op, "x");
  // The NCHW op's shape, permuted: x [N,H,W,C] is the NCHW tensor [N,C,H,W] stored channels-last.
  std::vector<Shape> nchw = in;
  nchw[0] = {in[0][0], in[0][3], in[0][1], in[0][2]};
  OpAttrs plain = a;
  plain.channels_last = false;
  plain.residual = false;
  if (a.residual) {
    if (kind != OpKind::Conv2d || in.size() < 3) fail(op, "only a conv2d adds a residual input");
    nchw.pop_back();
  }
  const Shape y = infer_imported_shape(kind, plain, nchw, op);
  const Shape out{y[0], y[2], y[3], y[1]};
  if (a.residual && in.back() != out)
    fail(op, fmt::format("residual {} does not match the output {}", shape_str(in.back()),
                         shape_str(out)));
  return out;
}

}  // namespace

Shape infer_imported_shape(OpKind kind, const OpAttrs& a, const std::vector<Shape>& in,
                           std::string_view op) {
  for (std::size_t i = 0; i < in.size(); ++i)
    expect_concrete(in[i], op, fmt::format("input {}", i));
  if (a.channels_last) return infer_channels_last(kind, a, in, op);
  switch (kind) {
    case OpKind::Add:
    case OpKind::Mul:
    case OpKind::Sub:
    case OpKind::Div: {
      Shape out;
      if (!kernels::broadcast_shapes(in[0], in[1], out)) {
        fail(op, fmt::format("operands {} and {} do not broadcast", shape_str(in[0]),
                             shape_str(in[1])));
      }
      return out;
    }
    case OpKind::Relu:
    case OpKind::Sigmoid:
    case OpKind::HardSwish:
      return in[0];
    case OpKind::Clip:
      if (!(a.act.a <= a.act.b)) fail(op, fmt::format("clip min {} > max {}", a.act.a, a.act.b));
      return in[0];
    case OpKind::HardSigmoid:
      return in[0];
    case OpKind::Conv2d: {
      if (a.residual) fail(op, "a conv2d adds a residual only channels-last");
      if (in.size() != 2 && in.size() != 3) fail(op, "conv2d takes x, w and an optional bias");
      require_rank(in[0], 4, op, "x");
      require_rank(in[1], 4, op, "weight");
      const std::int64_t g = a.groups;
      if (g < 1 || in[0][1] % g != 0 || in[1][0] % g != 0 || in[1][1] * g != in[0][1]) {
        fail(op, fmt::format("weight {} with {} groups does not fit input {}", shape_str(in[1]), g,
                             shape_str(in[0])));
      }
      if (in[1][2] != a.window.kernel_h || in[1][3] != a.window.kernel_w)
        fail(op, fmt::format("weight {} disagrees with kernel {}x{}", shape_str(in[1]),
                             a.window.kernel_h, a.window.kernel_w));
      if (in.size() == 3) expect_vector(in[2], in[1][0], op, "bias");
      if (a.window.ceil_mode) fail(op, "conv2d has no ceil mode");
      return window_shape(in[0], in[1][0], a, op);
    }
    case OpKind::BatchNorm:
      if (in[0].size() < 2)
        fail(op, fmt::format("x {} has no channel dimension", shape_str(in[0])));
      for (std::size_t i = 1; i < 5; ++i)
        expect_vector(in[i], in[0][1], op, "batch-norm parameter");
      if (!(a.eps >= 0.0f)) fail(op, "eps must be non-negative");
      return in[0];
    case OpKind::MaxPool:
    case OpKind::AvgPool:
      require_rank(in[0], 4, op, "x");
      if (a.window.pad_top >= a.window.kernel_h || a.window.pad_bottom >= a.window.kernel_h ||
          a.window.pad_left >= a.window.kernel_w || a.window.pad_right >= a.window.kernel_w) {
        fail(op, "pool padding must be smaller than the kernel");
      }
      return window_shape(in[0], in[0][1], a, op);
    case OpKind::GlobalAvgPool:
      require_rank(in[0], 4, op, "x");
      return {in[0][0], in[0][1], 1, 1};
    case OpKind::Resize:
      require_rank(in[0], 4, op, "x");
      if (a.shape.size() != 2 || a.shape[0] <= 0 || a.shape[1] <= 0 || a.shape[0] > (1 << 24) ||
          a.shape[1] > (1 << 24))
        fail(op, "resize needs a positive output height and width (attr shape)");
      if (!(a.resize.scale_h > 0.0f) || !(a.resize.scale_w > 0.0f))
        fail(op, "scales must be positive");
      if (a.banded) {
        const kernels::RowSpan need = kernels::resize_input_rows(
            a.resize, a.band.in_height, a.shape[0], a.band.out_begin, a.band.out_end);
        return {in[0][0], in[0][1], band_rows(a, in[0], a.shape[0], op, need), a.shape[1]};
      }
      return {in[0][0], in[0][1], a.shape[0], a.shape[1]};
    case OpKind::Concat: {
      if (in.empty()) fail(op, "concat needs inputs");
      const auto rank = static_cast<int>(in[0].size());
      if (a.axis < 0 || a.axis >= rank) fail(op, fmt::format("axis {} out of range", a.axis));
      Shape out = in[0];
      for (std::size_t i = 1; i < in.size(); ++i) {
        bool ok = in[i].size() == in[0].size();
        for (int d = 0; ok && d < rank; ++d) {
          ok = d == a.axis ||
               in[i][static_cast<std::size_t>(d)] == in[0][static_cast<std::size_t>(d)];
        }
        if (!ok)
          fail(op, fmt::format("input {} {} does not fit {} along axis {}", i, shape_str(in[i]),
                               shape_str(in[0]), a.axis));
        out[static_cast<std::size_t>(a.axis)] += in[i][static_cast<std::size_t>(a.axis)];
      }
      return out;
    }
    case OpKind::Slice: {
      const std::size_t rank = in[0].size();
      if (a.starts.size() != rank || a.steps.size() != rank || a.shape.size() != rank)
        fail(op, "slice needs starts, steps and an output shape per dimension");
      for (std::size_t d = 0; d < rank; ++d) {
        const std::int64_t first = a.starts[d];
        const std::int64_t last = first + (a.shape[d] - 1) * a.steps[d];
        if (a.steps[d] == 0 || a.shape[d] <= 0 || first < 0 || first >= in[0][d] || last < 0 ||
            last >= in[0][d]) {
          fail(op, fmt::format("slice of dimension {} (start {}, step {}, count {}) leaves {}", d,
                               first, a.steps[d], a.shape[d], shape_str(in[0])));
        }
      }
      return a.shape;
    }
    case OpKind::Reshape:
      expect_concrete(a.shape, op, "target shape");
      if (shape_numel(a.shape) != shape_numel(in[0]))
        fail(op, fmt::format("cannot reshape {} to {}", shape_str(in[0]), shape_str(a.shape)));
      return a.shape;
    case OpKind::Transpose: {
      const std::size_t rank = in[0].size();
      if (a.perm.size() != rank) fail(op, "perm must name every dimension");
      Shape out(rank);
      std::vector<bool> seen(rank, false);
      for (std::size_t i = 0; i < rank; ++i) {
        const std::int64_t p = a.perm[i];
        if (p < 0 || p >= static_cast<std::int64_t>(rank) || seen[static_cast<std::size_t>(p)])
          fail(op, "perm is not a permutation");
        seen[static_cast<std::size_t>(p)] = true;
        out[i] = in[0][static_cast<std::size_t>(p)];
      }
      return out;
    }
    case OpKind::MatMul: {
      if (in[0].size() < 2 || in[1].size() < 2) fail(op, "matmul operands need rank >= 2");
      if (in[0].back() != in[1][in[1].size() - 2])
        fail(op, fmt::format("cannot multiply {} by {}", shape_str(in[0]), shape_str(in[1])));
      const Shape ba(in[0].begin(), in[0].end() - 2), bb(in[1].begin(), in[1].end() - 2);
      Shape out;
      if (!kernels::broadcast_shapes(ba, bb, out))
        fail(op, fmt::format("batch dimensions of {} and {} do not broadcast", shape_str(in[0]),
                             shape_str(in[1])));
      out.push_back(in[0][in[0].size() - 2]);
      out.push_back(in[1].back());
      return out;
    }
    case OpKind::Softmax:
      if (a.axis < 0 || a.axis >= static_cast<int>(in[0].size()))
        fail(op, fmt::format("axis {} out of range for {}", a.axis, shape_str(in[0])));
      return in[0];
    default:
      break;
  }
  fail(op, fmt::format("{} is not an imported-graph op", op_name(kind)));
}

}  // namespace huddle
