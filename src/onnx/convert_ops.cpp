// ONNX operators -> Graph ops. Each converter reads its node through ImportContext, refuses
// attributes and inputs it does not support (LoadError naming the node), and defines the node's
// outputs. Conventions: ONNX pads are [top, left, bottom, right] for 2-D windows; negative axes
// count from the end.
#include "onnx/converters.h"

#include "core/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

namespace huddle::onnx_import {
namespace {

int normalize_axis(ImportContext& ctx, std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) ctx.fail(fmt::format("axis {} is out of range for rank {}", axis, r));
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

std::vector<std::int64_t> pair_attr(ImportContext& ctx, std::string_view name,
                                    std::vector<std::int64_t> fallback, std::size_t n) {
  std::vector<std::int64_t> v = ctx.attr_ints(name, fallback);
  if (v.size() != n)
    ctx.fail(fmt::format("attribute '{}' has {} values, a 2-D window needs {}", name, v.size(), n));
  return v;
}

// Window attributes of Conv / MaxPool / AveragePool over x [N, C, H, W].
kernels::Window2d window_attrs(ImportContext& ctx, const Shape& x,
                               const std::vector<std::int64_t>& kernel) {
  if (x.size() != 4)
    ctx.fail(fmt::format("only 2-D images (rank-4 NCHW input) are supported, input is {}",
                         shape_str(x)));
  kernels::Window2d w;
  w.kernel_h = kernel[0];
  w.kernel_w = kernel[1];
  const auto strides = pair_attr(ctx, "strides", {1, 1}, 2);
  const auto dil = pair_attr(ctx, "dilations", {1, 1}, 2);
  w.stride_h = strides[0];
  w.stride_w = strides[1];
  w.dilation_h = dil[0];
  w.dilation_w = dil[1];
  if (w.stride_h < 1 || w.stride_w < 1 || w.dilation_h < 1 || w.dilation_w < 1 || w.kernel_h < 1 ||
      w.kernel_w < 1 || w.stride_h > (1 << 20) || w.stride_w > (1 << 20))
    ctx.fail("kernel, strides and dilations must be positive");
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    const auto pads = pair_attr(ctx, "pads", {0, 0, 0, 0}, 4);
    w.pad_top = pads[0];
    w.pad_left = pads[1];
    w.pad_bottom = pads[2];
    w.pad_right = pads[3];
  } else if (auto_pad == "VALID") {
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (ctx.has_attr("pads")) ctx.fail("auto_pad and pads are both set");
    auto total = [&](std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d) {
      const std::int64_t out = (in + s - 1) / s;
      return std::max<std::int64_t>(0, (out - 1) * s + (k - 1) * d + 1 - in);
    };
    const std::int64_t th = total(x[2], w.kernel_h, w.stride_h, w.dilation_h);
    const std::int64_t tw = total(x[3], w.kernel_w, w.stride_w, w.dilation_w);
    const bool upper = auto_pad == "SAME_UPPER";
    w.pad_top = upper ? th / 2 : th - th / 2;
    w.pad_bottom = th - w.pad_top;
    w.pad_left = upper ? tw / 2 : tw - tw / 2;
    w.pad_right = tw - w.pad_left;
  } else {
    ctx.fail(fmt::format("auto_pad '{}' is not supported", auto_pad));
  }
  return w;
}

void conv(ImportContext& ctx) {
  ctx.allow_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  const Shape x = ctx.shape(0);
  if (!ctx.is_constant(1)) ctx.fail("the weight must be a constant");
  const Shape ws = ctx.shape(1);
  if (ws.size() != 4)
    ctx.fail(fmt::format("only 2-D convolutions are supported (weight {})", shape_str(ws)));
  const auto kernel = pair_attr(ctx, "kernel_shape", {ws[2], ws[3]}, 2);
  if (kernel[0] != ws[2] || kernel[1] != ws[3])
    ctx.fail(fmt::format("kernel_shape {} disagrees with the weight {}", fmt::join(kernel, "x"),
                         shape_str(ws)));
  OpAttrs a;
  a.window = window_attrs(ctx, x, kernel);
  a.groups = ctx.attr_int("group", 1);
  std::vector<ValueId> in{ctx.value(0), ctx.value(1)};
  if (ctx.has_input(2)) in.push_back(ctx.value(2));
  ctx.set_value(0, ctx.add_op(OpKind::Conv2d, std::move(in), a));
}

void batch_norm(ImportContext& ctx) {
  ctx.allow_attrs({"epsilon", "momentum", "training_mode", "spatial"});
  if (ctx.attr_int("training_mode", 0) != 0) ctx.fail("training mode is not supported");
  if (ctx.attr_int("spatial", 1) != 1) ctx.fail("spatial=0 is not supported");
  if (ctx.num_outputs() > 1) {
    for (int i = 1; i < ctx.num_outputs(); ++i)
      if (!ctx.output(i).empty()) ctx.fail("running-statistics outputs are not supported");
  }
  OpAttrs a;
  a.eps = ctx.attr_float("epsilon", 1e-5f);
  std::vector<ValueId> in{ctx.value(0)};
  for (int i = 1; i < 5; ++i) {
    if (!ctx.is_constant(i)) ctx.fail("scale, bias, mean and var must be constants");
    in.push_back(ctx.value(i));
  }
  ctx.set_value(0, ctx.add_op(OpKind::BatchNorm, std::move(in), a));
}

template <OpKind K>
void unary(ImportContext& ctx) {
  ctx.allow_attrs({});
  ctx.set_value(0, ctx.add_op(K, {ctx.value(0)}));
}

void hard_sigmoid(ImportContext& ctx) {
  ctx.allow_attrs({"alpha", "beta"});
  OpAttrs a;
  a.act = {kernels::Activation::HardSigmoid, ctx.attr_float("alpha", 0.2f),
           ctx.attr_float("beta", 0.5f)};
  ctx.set_value(0, ctx.add_op(OpKind::HardSigmoid, {ctx.value(0)}, a));
}

float scalar_input(ImportContext& ctx, int i, float fallback) {
  if (!ctx.has_input(i)) return fallback;
  const Constant& c = ctx.constant(i);
  if (c.numel() != 1) ctx.fail(fmt::format("input {} must be a scalar", i));
  return static_cast<float>(c.at(0));
}

void clip(ImportContext& ctx) {
  ctx.allow_attrs({});
  OpAttrs a;
  a.act = {kernels::Activation::Clip, scalar_input(ctx, 1, -std::numeric_limits<float>::infinity()),
           scalar_input(ctx, 2, std::numeric_limits<float>::infinity())};
  ctx.set_value(0, ctx.add_op(OpKind::Clip, {ctx.value(0)}, a));
}

template <OpKind K>
void binary(ImportContext& ctx) {
  ctx.allow_attrs({});
  ctx.set_value(0, ctx.add_op(K, {ctx.value(0), ctx.value(1)}));
}

void concat(ImportContext& ctx) {
  ctx.allow_attrs({"axis"});
  if (!ctx.has_attr("axis")) ctx.fail("attribute 'axis' is required");
  std::vector<ValueId> in;
  for (int i = 0; i < ctx.node().input_size(); ++i) in.push_back(ctx.value(i));
  if (in.empty()) ctx.fail("concat needs inputs");
  OpAttrs a;
  a.axis = normalize_axis(ctx, ctx.attr_int("axis", 0), ctx.shape(0).size());
  ctx.set_value(0, ctx.add_op(OpKind::Concat, std::move(in), a));
}

// One slice op for output `out` of the node: dimension `axis`, [begin, begin + count).
ValueId slice_axis(ImportContext& ctx, ValueId x, const Shape& s, int axis, std::int64_t begin,
                   std::int64_t count, const std::string& name) {
  OpAttrs a;
  a.starts.assign(s.size(), 0);
  a.steps.assign(s.size(), 1);
  a.shape = s;
  a.starts[static_cast<std::size_t>(axis)] = begin;
  a.shape[static_cast<std::size_t>(axis)] = count;
  return ctx.add_op(OpKind::Slice, {x}, a, name);
}

void split(ImportContext& ctx) {
  ctx.allow_attrs({"axis", "split"});
  const Shape s = ctx.shape(0);
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", 0), s.size());
  const std::int64_t dim = s[static_cast<std::size_t>(axis)];
  std::vector<std::int64_t> sizes;
  if (ctx.opset() < 13) {
    sizes = ctx.attr_ints("split", {});
  } else {
    if (ctx.has_attr("split")) ctx.fail("attribute 'split' is an input since opset 13");
    if (ctx.has_input(1)) sizes = ctx.ints_input(1);
  }
  const int n = ctx.num_outputs();
  if (sizes.empty()) {
    if (n < 1 || dim % n != 0) ctx.fail(fmt::format("cannot split {} evenly into {}", dim, n));
    sizes.assign(static_cast<std::size_t>(n), dim / n);
  }
  if (static_cast<int>(sizes.size()) != n)
    ctx.fail(fmt::format("{} split sizes for {} outputs", sizes.size(), n));
  std::int64_t sum = 0;
  for (std::int64_t v : sizes) {
    if (v <= 0 || v > dim) ctx.fail(fmt::format("split sizes {} invalid", fmt::join(sizes, ",")));
    sum += v;
  }
  if (sum != dim)
    ctx.fail(fmt::format("split sizes {} do not add up to {}", fmt::join(sizes, ","), dim));
  const ValueId x = ctx.value(0);
  std::int64_t begin = 0;
  for (int i = 0; i < n; ++i) {
    const std::int64_t count = sizes[static_cast<std::size_t>(i)];
    if (!ctx.output(i).empty())
      ctx.set_value(i, slice_axis(ctx, x, s, axis, begin, count, ctx.output(i)));
    begin += count;
  }
}

void slice(ImportContext& ctx) {
  ctx.allow_attrs({});
  const Shape s = ctx.shape(0);
  const std::vector<std::int64_t> starts = ctx.ints_input(1), ends = ctx.ints_input(2);
  std::vector<std::int64_t> axes, steps;
  if (ctx.has_input(3)) {
    axes = ctx.ints_input(3);
  } else {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  steps = ctx.has_input(4) ? ctx.ints_input(4) : std::vector<std::int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    ctx.fail("starts, ends, axes and steps differ in length");
  OpAttrs a;
  a.starts.assign(s.size(), 0);
  a.steps.assign(s.size(), 1);
  a.shape = s;
  std::vector<bool> seen(s.size(), false);
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const auto d = static_cast<std::size_t>(normalize_axis(ctx, axes[k], s.size()));
    if (seen[d]) ctx.fail("an axis is sliced twice");
    seen[d] = true;
    const std::int64_t dim = s[d], step = steps[k];
    if (step == 0) ctx.fail("slice step 0");
    auto clampv = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) {
      if (v < 0) v = v < -dim ? -1 : v + dim;  // avoid overflow on INT64_MIN
      return std::clamp(v, lo, hi);
    };
    std::int64_t b = 0, e = 0, count = 0;
    if (step > 0) {
      b = clampv(starts[k], 0, dim);
      e = clampv(ends[k], 0, dim);
      count = e > b ? (e - b + step - 1) / step : 0;
    } else {
      b = clampv(starts[k], -1, dim - 1);
      e = clampv(ends[k], -1, dim - 1);
      if (step == std::numeric_limits<std::int64_t>::min()) ctx.fail("slice step out of range");
      count = b > e ? (b - e - step - 1) / -step : 0;
    }
    if (count <= 0) ctx.fail(fmt::format("slice of axis {} is empty", d));
    a.starts[d] = b;
    a.steps[d] = step;
    a.shape[d] = count;
  }
  ctx.set_value(0, ctx.add_op(OpKind::Slice, {ctx.value(0)}, a));
}

kernels::CoordMode coord_mode(ImportContext& ctx, const std::string& m) {
  if (m == "half_pixel") return kernels::CoordMode::HalfPixel;
  if (m == "pytorch_half_pixel") return kernels::CoordMode::PytorchHalfPixel;
  if (m == "align_corners") return kernels::CoordMode::AlignCorners;
  if (m == "asymmetric") return kernels::CoordMode::Asymmetric;
  ctx.fail(fmt::format("coordinate_transformation_mode '{}' is not supported", m));
}

kernels::NearestMode nearest_mode(ImportContext& ctx, const std::string& m) {
  if (m == "round_prefer_floor") return kernels::NearestMode::RoundPreferFloor;
  if (m == "round_prefer_ceil") return kernels::NearestMode::RoundPreferCeil;
  if (m == "floor") return kernels::NearestMode::Floor;
  if (m == "ceil") return kernels::NearestMode::Ceil;
  ctx.fail(fmt::format("nearest_mode '{}' is not supported", m));
}

void resize(ImportContext& ctx) {
  ctx.allow_attrs({"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                   "exclude_outside", "extrapolation_value"});
  const Shape s = ctx.shape(0);
  if (s.size() != 4) ctx.fail(fmt::format("only NCHW inputs are resized (input {})", shape_str(s)));
  const std::string mode = ctx.attr_string("mode", "nearest");
  OpAttrs a;
  if (mode == "nearest") {
    a.resize.mode = kernels::ResizeMode::Nearest;
  } else if (mode == "linear") {
    a.resize.mode = kernels::ResizeMode::Linear;
  } else {
    ctx.fail(fmt::format("mode '{}' is not supported", mode));
  }
  if (ctx.attr_int("exclude_outside", 0) != 0) ctx.fail("exclude_outside is not supported");
  a.resize.coord = coord_mode(ctx, ctx.attr_string("coordinate_transformation_mode", "half_pixel"));
  a.resize.nearest = nearest_mode(ctx, ctx.attr_string("nearest_mode", "round_prefer_floor"));
  std::vector<double> scales;
  if (ctx.has_input(2) && ctx.constant(2).numel() > 0) {
    const Constant& c = ctx.constant(2);
    for (std::int64_t k = 0; k < c.numel(); ++k) scales.push_back(c.at(k));
  }
  std::vector<std::int64_t> sizes;
  if (ctx.has_input(3) && ctx.constant(3).numel() > 0) sizes = ctx.ints_input(3);
  if (scales.empty() == sizes.empty()) ctx.fail("exactly one of scales and sizes must be given");
  if (!sizes.empty()) {
    if (sizes.size() != 4) ctx.fail("sizes must have 4 values");
    scales.assign(4, 0.0);
    for (std::size_t d = 0; d < 4; ++d) {
      if (sizes[d] <= 0 || sizes[d] > (1 << 24)) ctx.fail("sizes must be positive");
      scales[d] = static_cast<double>(sizes[d]) / static_cast<double>(s[d]);
    }
  }
  if (scales.size() != 4) ctx.fail("scales must have 4 values");
  if (scales[0] != 1.0 || scales[1] != 1.0) ctx.fail("only H and W may be resized");
  for (double v : scales) {
    if (!(v > 0.0 && v < 1e6)) ctx.fail("scales must be positive and finite");
  }
  a.resize.scale_h = static_cast<float>(scales[2]);
  a.resize.scale_w = static_cast<float>(scales[3]);
  if (sizes.empty()) {
    a.shape = {static_cast<std::int64_t>(static_cast<double>(s[2]) * scales[2]),
               static_cast<std::int64_t>(static_cast<double>(s[3]) * scales[3])};
  } else {
    a.shape = {sizes[2], sizes[3]};
  }
  ctx.set_value(0, ctx.add_op(OpKind::Resize, {ctx.value(0)}, a));
}

void pool(ImportContext& ctx, OpKind kind) {
  const Shape x = ctx.shape(0);
  std::vector<std::int64_t> kernel = ctx.attr_ints("kernel_shape", {});
  if (kernel.size() != 2) ctx.fail("kernel_shape must have 2 values");
  OpAttrs a;
  a.window = window_attrs(ctx, x, kernel);
  a.window.ceil_mode = ctx.attr_int("ceil_mode", 0) != 0;
  a.count_include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  for (int i = 1; i < ctx.num_outputs(); ++i)
    if (!ctx.output(i).empty()) ctx.fail("the Indices output is not supported");
  ctx.set_value(0, ctx.add_op(kind, {ctx.value(0)}, a));
}

void max_pool(ImportContext& ctx) {
  ctx.allow_attrs(
      {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
  pool(ctx, OpKind::MaxPool);
}

void avg_pool(ImportContext& ctx) {
  ctx.allow_attrs(
      {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"});
  pool(ctx, OpKind::AvgPool);
}

void global_avg_pool(ImportContext& ctx) {
  ctx.allow_attrs({});
  ctx.set_value(0, ctx.add_op(OpKind::GlobalAvgPool, {ctx.value(0)}));
}

void reshape_to(ImportContext& ctx, Shape target) {
  OpAttrs a;
  a.shape = std::move(target);
  ctx.set_value(0, ctx.add_op(OpKind::Reshape, {ctx.value(0)}, a));
}

void flatten(ImportContext& ctx) {
  ctx.allow_attrs({"axis"});
  const Shape s = ctx.shape(0);
  std::int64_t axis = ctx.attr_int("axis", 1);
  const auto r = static_cast<std::int64_t>(s.size());
  if (axis < -r || axis > r) ctx.fail(fmt::format("axis {} out of range", axis));
  if (axis < 0) axis += r;
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < r; ++d) (d < axis ? outer : inner) *= s[static_cast<std::size_t>(d)];
  reshape_to(ctx, {outer, inner});
}

}  // namespace

// Shared with fold.cpp: ONNX Reshape's target with 0 (copy) and -1 (infer) resolved.
Shape reshape_target(ImportContext& ctx, const Shape& in, const std::vector<std::int64_t>& spec,
                     bool allow_zero) {
  Shape out;
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t k = 0; k < spec.size(); ++k) {
    std::int64_t d = spec[k];
    if (d == 0 && !allow_zero) {
      if (k >= in.size()) ctx.fail("reshape copies a dimension the input lacks");
      d = in[k];
    }
    if (d == -1) {
      if (infer >= 0) ctx.fail("reshape infers more than one dimension");
      infer = static_cast<int>(k);
      out.push_back(1);
      continue;
    }
    if (d < 0 || d > (std::int64_t{1} << 40))
      ctx.fail(fmt::format("reshape dimension {} invalid", d));
    if (d != 0 && known > (std::int64_t{1} << 40) / d) ctx.fail("reshape target too large");
    known *= d;
    out.push_back(d);
  }
  const std::int64_t n = shape_numel(in);
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      ctx.fail(fmt::format("cannot reshape {} to [{}]", shape_str(in), fmt::join(spec, ", ")));
    out[static_cast<std::size_t>(infer)] = n / known;
  }
  if (shape_numel(out) != n)
    ctx.fail(fmt::format("cannot reshape {} to [{}]", shape_str(in), fmt::join(spec, ", ")));
  return out;
}

namespace {

void reshape(ImportContext& ctx) {
  ctx.allow_attrs({"allowzero"});
  reshape_to(
      ctx, reshape_target(ctx, ctx.shape(0), ctx.ints_input(1), ctx.attr_int("allowzero", 0) != 0));
}

void transpose(ImportContext& ctx) {
  ctx.allow_attrs({"perm"});
  const Shape s = ctx.shape(0);
  std::vector<std::int64_t> rev(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) rev[i] = static_cast<std::int64_t>(s.size() - 1 - i);
  OpAttrs a;
  a.perm = ctx.attr_ints("perm", rev);
  ctx.set_value(0, ctx.add_op(OpKind::Transpose, {ctx.value(0)}, a));
}

void gemm(ImportContext& ctx) {
  ctx.allow_attrs({"alpha", "beta", "transA", "transB"});
  const float alpha = ctx.attr_float("alpha", 1.0f), beta = ctx.attr_float("beta", 1.0f);
  if (ctx.attr_int("transA", 0) != 0) ctx.fail("transA is not supported");
  if (!ctx.is_constant(1)) ctx.fail("B must be a constant");
  const Constant& b = ctx.constant(1);
  if (b.is_int || b.shape.size() != 2) ctx.fail("B must be a float matrix");
  const bool trans_b = ctx.attr_int("transB", 0) != 0;
  const std::int64_t n = trans_b ? b.shape[0] : b.shape[1];
  OpAttrs a;
  a.weight_layout = trans_b ? kernels::WeightLayout::OutIn : kernels::WeightLayout::InOut;
  std::vector<ValueId> in{ctx.value(0)};
  if (alpha == 1.0f) {
    in.push_back(ctx.value(1));
  } else {
    std::vector<float> w = b.f;
    for (float& v : w) v *= alpha;
    in.push_back(ctx.add_weight(ctx.output(0) + ".scaled_b", b.shape, std::move(w)));
  }
  bool bias_added = false;
  if (ctx.has_input(2) && beta != 0.0f) {
    const Shape cs = ctx.shape(2);
    if (ctx.is_constant(2) && shape_numel(cs) == n &&
        (cs.size() == 1 || (cs.size() == 2 && cs[0] == 1))) {
      const Constant& c = ctx.constant(2);
      if (c.is_int) ctx.fail("C must hold floats");
      if (beta == 1.0f && cs.size() == 1) {
        in.push_back(ctx.value(2));
      } else {
        std::vector<float> bias = c.f;
        for (float& v : bias) v *= beta;
        in.push_back(ctx.add_weight(ctx.output(0) + ".bias", {n}, std::move(bias)));
      }
      bias_added = true;
    } else if (beta != 1.0f) {
      ctx.fail("a non-vector C with beta != 1 is not supported");
    }
  }
  if (ctx.has_input(2) && beta != 0.0f && !bias_added) {
    const ValueId y = ctx.add_op(OpKind::Linear, std::move(in), a, ctx.output(0) + ".gemm");
    ctx.set_value(0, ctx.add_op(OpKind::Add, {y, ctx.value(2)}));
    return;
  }
  ctx.set_value(0, ctx.add_op(OpKind::Linear, std::move(in), a));
}

void matmul(ImportContext& ctx) {
  ctx.allow_attrs({});
  if (ctx.shape(0).size() < 2 || ctx.shape(1).size() < 2)
    ctx.fail("1-D MatMul operands are not supported");
  ctx.set_value(0, ctx.add_op(OpKind::MatMul, {ctx.value(0), ctx.value(1)}));
}

void softmax(ImportContext& ctx) {
  ctx.allow_attrs({"axis"});
  const Shape s = ctx.shape(0);
  OpAttrs a;
  a.softmax_flatten = ctx.opset() < 13;
  a.axis = normalize_axis(ctx, ctx.attr_int("axis", ctx.opset() < 13 ? 1 : -1), s.size());
  ctx.set_value(0, ctx.add_op(OpKind::Softmax, {ctx.value(0)}, a));
}

void identity(ImportContext& ctx) {
  ctx.allow_attrs({});
  ctx.set_value(0, ctx.value(0));
}

void dropout(ImportContext& ctx) {  // inference: the identity (mask output unsupported)
  ctx.allow_attrs({"seed", "ratio"});
  if (ctx.has_input(2) && (!ctx.is_constant(2) || ctx.constant(2).at(0) != 0))
    ctx.fail("training_mode must be false");
  for (int i = 1; i < ctx.num_outputs(); ++i)
    if (!ctx.output(i).empty()) ctx.fail("the mask output is not supported");
  ctx.set_value(0, ctx.value(0));
}

}  // namespace

Converter find_converter(std::string_view op_type) {
  static const std::map<std::string_view, Converter> table = {
      {"Conv", conv},
      {"BatchNormalization", batch_norm},
      {"Relu", unary<OpKind::Relu>},
      {"Sigmoid", unary<OpKind::Sigmoid>},
      {"HardSwish", unary<OpKind::HardSwish>},
      {"HardSigmoid", hard_sigmoid},
      {"Clip", clip},
      {"Add", binary<OpKind::Add>},
      {"Sub", binary<OpKind::Sub>},
      {"Mul", binary<OpKind::Mul>},
      {"Div", binary<OpKind::Div>},
      {"Concat", concat},
      {"Split", split},
      {"Slice", slice},
      {"Resize", resize},
      {"MaxPool", max_pool},
      {"AveragePool", avg_pool},
      {"GlobalAveragePool", global_avg_pool},
      {"Flatten", flatten},
      {"Reshape", reshape},
      {"Transpose", transpose},
      {"Gemm", gemm},
      {"MatMul", matmul},
      {"Softmax", softmax},
      {"Identity", identity},
      {"Dropout", dropout},
  };
  const auto it = table.find(op_type);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace huddle::onnx_import
