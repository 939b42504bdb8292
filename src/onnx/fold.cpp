// Load-time evaluation of constant subgraphs: nodes whose inputs are all constants (initializers,
// Constant nodes, earlier folded nodes), plus Shape of any tensor (shapes are concrete).
#include "onnx/converters.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace huddle::onnx_import {

Shape reshape_target(ImportContext& ctx, const Shape& in, const std::vector<std::int64_t>& spec,
                     bool allow_zero);

namespace {

std::size_t axis_of(ImportContext& ctx, std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) ctx.fail(fmt::format("axis {} is out of range for rank {}", axis, r));
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

Constant make_ints(Shape shape, std::vector<std::int64_t> v) {
  Constant c;
  c.shape = std::move(shape);
  c.is_int = true;
  c.i = std::move(v);
  return c;
}

void fold_constant(ImportContext& ctx) {
  ctx.allow_attrs({"value", "value_float", "value_floats", "value_int", "value_ints"});
  if (const auto* t = ctx.attr_tensor("value")) {
    ctx.set_constant(0, constant_from_proto(*t, ctx.file()));
  } else if (ctx.has_attr("value_float")) {
    Constant c;
    c.f = {ctx.attr_float("value_float", 0)};
    ctx.set_constant(0, c);
  } else if (ctx.has_attr("value_floats")) {
    Constant c;
    c.f = ctx.attr_floats("value_floats");
    c.shape = {static_cast<std::int64_t>(c.f.size())};
    ctx.set_constant(0, c);
  } else if (ctx.has_attr("value_int")) {
    ctx.set_constant(0, make_ints({}, {ctx.attr_int("value_int", 0)}));
  } else if (ctx.has_attr("value_ints")) {
    auto v = ctx.attr_ints("value_ints", {});
    ctx.set_constant(0, make_ints({static_cast<std::int64_t>(v.size())}, v));
  } else {
    ctx.fail("a Constant needs a value (sparse and string values are not supported)");
  }
}

void fold_shape(ImportContext& ctx) {
  ctx.allow_attrs({"start", "end"});
  const Shape s = ctx.shape(0);
  const auto r = static_cast<std::int64_t>(s.size());
  auto clampi = [&](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + r : v, 0, r); };
  const std::int64_t b = clampi(ctx.attr_int("start", 0)), e = clampi(ctx.attr_int("end", r));
  std::vector<std::int64_t> v;
  for (std::int64_t d = b; d < e; ++d) v.push_back(s[static_cast<std::size_t>(d)]);
  ctx.set_constant(0, make_ints({static_cast<std::int64_t>(v.size())}, v));
}

Constant with_shape(Constant c, Shape s) {
  c.shape = std::move(s);
  return c;
}

void fold_concat(ImportContext& ctx) {
  ctx.allow_attrs({"axis"});
  const Constant& first = ctx.constant(0);
  if (first.shape.empty()) ctx.fail("cannot concatenate scalars");
  const std::size_t axis = axis_of(ctx, ctx.attr_int("axis", 0), first.shape.size());
  Constant out;
  out.is_int = first.is_int;
  out.shape = first.shape;
  out.shape[axis] = 0;
  std::int64_t outer = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= first.shape[d];
  std::vector<const Constant*> parts;
  for (int i = 0; i < ctx.node().input_size(); ++i) {
    const Constant& c = ctx.constant(i);
    if (c.is_int != first.is_int || c.shape.size() != first.shape.size())
      ctx.fail("constant inputs differ in type or rank");
    for (std::size_t d = 0; d < c.shape.size(); ++d) {
      if (d != axis && c.shape[d] != first.shape[d]) ctx.fail("constant inputs do not fit");
    }
    out.shape[axis] += c.shape[axis];
    parts.push_back(&c);
  }
  for (std::int64_t o = 0; o < outer; ++o) {
    for (const Constant* c : parts) {
      const std::int64_t row = outer > 0 ? c->numel() / outer : 0;
      if (out.is_int) {
        out.i.insert(out.i.end(), c->i.begin() + o * row, c->i.begin() + (o + 1) * row);
      } else {
        out.f.insert(out.f.end(), c->f.begin() + o * row, c->f.begin() + (o + 1) * row);
      }
    }
  }
  ctx.set_constant(0, std::move(out));
}

void fold_cast(ImportContext& ctx) {
  ctx.allow_attrs({"to", "saturate"});
  const Constant& c = ctx.constant(0);
  const std::int64_t to = ctx.attr_int("to", 0);
  Constant out;
  out.shape = c.shape;
  if (to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE) {
    for (std::int64_t k = 0; k < c.numel(); ++k) out.f.push_back(static_cast<float>(c.at(k)));
  } else if (to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32) {
    out.is_int = true;
    for (std::int64_t k = 0; k < c.numel(); ++k) {
      const double v = c.at(k);
      if (!(std::abs(v) < 9e18)) ctx.fail("cast value out of range");
      out.i.push_back(static_cast<std::int64_t>(v));
    }
  } else {
    ctx.fail(fmt::format("cast to type {} is not supported", to));
  }
  ctx.set_constant(0, std::move(out));
}

void fold_reshape(ImportContext& ctx) {
  ctx.allow_attrs({"allowzero"});
  const Constant& c = ctx.constant(0);
  ctx.set_constant(0, with_shape(c, reshape_target(ctx, c.shape, ctx.ints_input(1),
                                                   ctx.attr_int("allowzero", 0) != 0)));
}

void fold_flatten(ImportContext& ctx) {
  ctx.allow_attrs({"axis"});
  const Constant& c = ctx.constant(0);
  const auto r = static_cast<std::int64_t>(c.shape.size());
  std::int64_t axis = ctx.attr_int("axis", 1);
  if (axis < -r || axis > r) ctx.fail("axis out of range");
  if (axis < 0) axis += r;
  std::int64_t outer = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= c.shape[static_cast<std::size_t>(d)];
  ctx.set_constant(0, with_shape(c, {outer, outer > 0 ? c.numel() / outer : 0}));
}

std::vector<std::int64_t> axes_of(ImportContext& ctx) {
  if (ctx.opset() < 13) return ctx.attr_ints("axes", {});
  return ctx.has_input(1) ? ctx.ints_input(1) : std::vector<std::int64_t>{};
}

void fold_unsqueeze(ImportContext& ctx) {
  ctx.allow_attrs({"axes"});
  const Constant& c = ctx.constant(0);
  const auto axes = axes_of(ctx);
  const std::size_t rank = c.shape.size() + axes.size();
  std::vector<bool> inserted(rank, false);
  for (std::int64_t a : axes) {
    const std::size_t d = axis_of(ctx, a, rank);
    if (inserted[d]) ctx.fail("an axis is repeated");
    inserted[d] = true;
  }
  Shape s;
  std::size_t k = 0;
  for (std::size_t d = 0; d < rank; ++d) s.push_back(inserted[d] ? 1 : c.shape[k++]);
  ctx.set_constant(0, with_shape(c, s));
}

void fold_squeeze(ImportContext& ctx) {
  ctx.allow_attrs({"axes"});
  const Constant& c = ctx.constant(0);
  const auto axes = axes_of(ctx);
  std::vector<bool> drop(c.shape.size(), false);
  for (std::int64_t a : axes) {
    const std::size_t d = axis_of(ctx, a, c.shape.size());
    if (c.shape[d] != 1) ctx.fail("squeezed axis is not 1");
    drop[d] = true;
  }
  Shape s;
  for (std::size_t d = 0; d < c.shape.size(); ++d) {
    if (axes.empty() ? c.shape[d] != 1 : !drop[d]) s.push_back(c.shape[d]);
  }
  ctx.set_constant(0, with_shape(c, s));
}

void fold_gather(ImportContext& ctx) {
  ctx.allow_attrs({"axis"});
  const Constant& data = ctx.constant(0);
  if (data.shape.empty()) ctx.fail("cannot gather from a scalar");
  const std::vector<std::int64_t> idx = ctx.ints_input(1);
  const Shape idx_shape = ctx.shape(1);
  const std::size_t axis = axis_of(ctx, ctx.attr_int("axis", 0), data.shape.size());
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= data.shape[d];
  for (std::size_t d = axis + 1; d < data.shape.size(); ++d) inner *= data.shape[d];
  const std::int64_t dim = data.shape[axis];
  Constant out;
  out.is_int = data.is_int;
  out.shape.assign(data.shape.begin(), data.shape.begin() + static_cast<std::ptrdiff_t>(axis));
  out.shape.insert(out.shape.end(), idx_shape.begin(), idx_shape.end());
  out.shape.insert(out.shape.end(), data.shape.begin() + static_cast<std::ptrdiff_t>(axis) + 1,
                   data.shape.end());
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t j : idx) {
      if (j < -dim || j >= dim) ctx.fail(fmt::format("index {} out of range {}", j, dim));
      const std::int64_t jj = j < 0 ? j + dim : j;
      const std::int64_t base = (o * dim + jj) * inner;
      for (std::int64_t k = 0; k < inner; ++k) {
        if (out.is_int) {
          out.i.push_back(data.i[static_cast<std::size_t>(base + k)]);
        } else {
          out.f.push_back(data.f[static_cast<std::size_t>(base + k)]);
        }
      }
    }
  }
  ctx.set_constant(0, std::move(out));
}

template <char Op>
void fold_arith(ImportContext& ctx) {
  ctx.allow_attrs({});
  const Constant& a = ctx.constant(0);
  const Constant& b = ctx.constant(1);
  if (a.is_int != b.is_int) ctx.fail("operands differ in type");
  const std::size_t rank = std::max(a.shape.size(), b.shape.size());
  Shape out(rank, 1);
  for (std::size_t k = 0; k < rank; ++k) {
    const std::int64_t da = k < a.shape.size() ? a.shape[a.shape.size() - 1 - k] : 1;
    const std::int64_t db = k < b.shape.size() ? b.shape[b.shape.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) ctx.fail("constant operands do not broadcast");
    out[rank - 1 - k] = da == 1 ? db : da;
  }
  auto offset = [&](const Shape& s, std::int64_t flat) {
    std::int64_t off = 0, stride = 1;
    for (std::size_t k = 0; k < rank; ++k) {
      const std::int64_t idx = flat % out[rank - 1 - k];
      flat /= out[rank - 1 - k];
      if (k < s.size()) {
        const std::int64_t d = s[s.size() - 1 - k];
        if (d != 1) off += idx * stride;
        stride *= d;
      }
    }
    return off;
  };
  Constant c;
  c.shape = out;
  c.is_int = a.is_int;
  for (std::int64_t k = 0; k < shape_numel(out); ++k) {
    const std::int64_t ia = offset(a.shape, k), ib = offset(b.shape, k);
    if (c.is_int) {
      const std::int64_t u = a.i[static_cast<std::size_t>(ia)],
                         v = b.i[static_cast<std::size_t>(ib)];
      if (Op == '/' && v == 0) ctx.fail("integer division by zero");
      const double approx = Op == '+'   ? static_cast<double>(u) + static_cast<double>(v)
                            : Op == '-' ? static_cast<double>(u) - static_cast<double>(v)
                            : Op == '*' ? static_cast<double>(u) * static_cast<double>(v)
                                        : 0.0;
      if (std::abs(approx) > 9e18) ctx.fail("integer overflow");
      c.i.push_back(Op == '+' ? u + v : Op == '-' ? u - v : Op == '*' ? u * v : u / v);
    } else {
      const float u = a.f[static_cast<std::size_t>(ia)], v = b.f[static_cast<std::size_t>(ib)];
      c.f.push_back(Op == '+' ? u + v : Op == '-' ? u - v : Op == '*' ? u * v : u / v);
    }
  }
  ctx.set_constant(0, std::move(c));
}

void fold_identity(ImportContext& ctx) {
  ctx.allow_attrs({});
  ctx.set_constant(0, ctx.constant(0));
}

}  // namespace

bool fold_constant_node(ImportContext& ctx) {
  static const std::map<std::string_view, Converter> table = {
      {"Constant", fold_constant},   {"Identity", fold_identity}, {"Concat", fold_concat},
      {"Cast", fold_cast},           {"Reshape", fold_reshape},   {"Flatten", fold_flatten},
      {"Unsqueeze", fold_unsqueeze}, {"Squeeze", fold_squeeze},   {"Gather", fold_gather},
      {"Add", fold_arith<'+'>},      {"Sub", fold_arith<'-'>},    {"Mul", fold_arith<'*'>},
      {"Div", fold_arith<'/'>},
  };
  const std::string& type = ctx.node().op_type();
  if (type == "Shape") {
    fold_shape(ctx);
    return true;
  }
  const auto it = table.find(type);
  if (it == table.end()) return false;
  for (int i = 0; i < ctx.node().input_size(); ++i) {
    if (ctx.has_input(i) && !ctx.is_constant(i)) return false;
  }
  if (ctx.num_outputs() != 1) ctx.fail("expected one output");
  it->second(ctx);
  return true;
}

}  // namespace huddle::onnx_import
