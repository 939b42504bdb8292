// Layout assignment: channels-last convolutions and pooling (see channels_last.h).
#include "graph/channels_last.h"

#include "core/error.h"

#include <array>
#include <string>
#include <vector>

namespace huddle {
namespace {

enum class Layout : std::uint8_t { Nchw, Nhwc };

// A channels-last tensor's dimension d is its NCHW dimension kNhwcFromNchw[d]; an NCHW axis a
// is channels-last axis kAxisInNhwc[a].
constexpr std::array<std::int64_t, 4> kNhwcFromNchw{0, 2, 3, 1};
constexpr std::array<std::int64_t, 4> kNchwFromNhwc{0, 3, 1, 2};
constexpr std::array<int, 4> kAxisInNhwc{0, 3, 1, 2};

bool windowed(OpKind k) {
  return k == OpKind::Conv2d || k == OpKind::MaxPool || k == OpKind::AvgPool ||
         k == OpKind::GlobalAvgPool;
}

bool unary_elementwise(OpKind k) {
  return k == OpKind::Relu || k == OpKind::Clip || k == OpKind::Sigmoid ||
         k == OpKind::HardSigmoid || k == OpKind::HardSwish;
}

bool binary_elementwise(OpKind k) {
  return k == OpKind::Add || k == OpKind::Mul || k == OpKind::Sub || k == OpKind::Div;
}

std::vector<std::int64_t> permuted(const std::vector<std::int64_t>& nchw) {
  std::vector<std::int64_t> out(4);
  for (std::size_t d = 0; d < 4; ++d) out[d] = nchw[static_cast<std::size_t>(kNhwcFromNchw[d])];
  return out;
}

class Rewriter {
 public:
  explicit Rewriter(const Graph& g) : g_(g), slots_(g.values().size()) {}

  Graph run() {
    for (std::size_t v = 0; v < g_.values().size(); ++v) {
      const Value& val = g_.values()[v];
      if (val.kind == ValueKind::Input)
        slots_[v].stored = out_.add_input(val.name, val.shape, val.dtype);
    }
    for (const Op& op : g_.ops()) emit(op);
    for (ValueId o : g_.outputs()) out_.add_output(get(o, Layout::Nchw));
    out_.validate();
    return std::move(out_);
  }

 private:
  // An old value as the new graph holds it: `stored` in `layout`, and its conversion to the
  // other layout once one reader needed it.
  struct Slot {
    ValueId stored = -1;
    Layout layout = Layout::Nchw;
    ValueId converted = -1;
  };

  const Value& old(ValueId v) const { return g_.value(v); }
  bool rank4(ValueId v) const { return old(v).shape.size() == 4; }
  bool single(ValueId v) const { return shape_numel(old(v).shape) == 1; }
  bool is_output(ValueId v) const {
    for (ValueId o : g_.outputs())
      if (o == v) return true;
    return false;
  }

  Slot& slot(ValueId v) {
    Slot& s = slots_[static_cast<std::size_t>(v)];
    if (s.stored < 0) {
      const Value& val = old(v);
      HUDDLE_CHECK(val.kind == ValueKind::Weight, "value '{}' used before defined", val.name);
      s.stored = out_.add_weight(val.name, val.shape, val.weight, val.dtype);
    }
    return s;
  }

  Layout layout(ValueId v) { return slot(v).layout; }

  // Old value `v` in layout `want` (a conversion op named `name`, or "<v>/<layout>", the first
  // time it is needed).
  ValueId get(ValueId v, Layout want, std::string name = {}) {
    Slot& s = slot(v);
    if (s.layout == want) return s.stored;
    if (s.converted >= 0) return s.converted;
    const Shape& from = out_.value(s.stored).shape;
    HUDDLE_CHECK(from.size() == 4, "value '{}' has no channels-last form", old(v).name);
    const auto& perm = want == Layout::Nhwc ? kNhwcFromNchw : kNchwFromNhwc;
    if (name.empty()) name = old(v).name + (want == Layout::Nhwc ? "/nhwc" : "/nchw");
    OpAttrs a;
    Shape to(4);
    for (std::size_t d = 0; d < 4; ++d) to[d] = from[static_cast<std::size_t>(perm[d])];
    // H·W == 1 or C == 1: both layouts are the same bytes, a reshape suffices.
    const std::int64_t channels = want == Layout::Nhwc ? from[1] : from[3];
    if (channels == 1 || shape_numel(from) == from[0] * channels) {
      a.shape = to;
      s.converted = out_.add_op(OpKind::Reshape, name, {s.stored}, a);
    } else {
      a.perm.assign(perm.begin(), perm.end());
      s.converted = out_.add_op(OpKind::Transpose, name, {s.stored}, a);
    }
    return s.converted;
  }

  // The layout `op` runs in, given its inputs' current layouts.
  Layout choose(const Op& op) {
    const auto& in = op.inputs;
    if (windowed(op.kind)) return rank4(in[0]) ? Layout::Nhwc : Layout::Nchw;
    // Every device's pass converts every 4-D row exchange, so the rows travel channels-last
    // between any two devices, whatever each does around the exchange.
    // (An output's gather to device 0 travels NCHW on every device alike: OpAttrs::gather_nchw.)
    if (op.kind == OpKind::RowExchange) {
      return rank4(op.output) && !op.attrs.gather_nchw ? Layout::Nhwc : Layout::Nchw;
    }
    if (unary_elementwise(op.kind)) return layout(in[0]);
    bool any_nhwc = false, all_fit = true;
    for (ValueId v : in) {
      any_nhwc = any_nhwc || layout(v) == Layout::Nhwc;
      all_fit = all_fit && (rank4(v) || (binary_elementwise(op.kind) && single(v)));
    }
    const bool fits =
        binary_elementwise(op.kind) || op.kind == OpKind::Concat || op.kind == OpKind::Slice;
    return fits && all_fit && any_nhwc && rank4(op.output) ? Layout::Nhwc : Layout::Nchw;
  }

  void emit(const Op& op) {
    const Layout lay = choose(op);
    std::vector<ValueId> in;
    OpAttrs a = op.attrs;
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      const ValueId v = op.inputs[i];
      // A conv's weights and bias are not activations: they keep their layout.
      const bool data = !(windowed(op.kind) && i > 0) && rank4(v);
      in.push_back(data ? get(v, lay) : slot(v).stored);
    }
    if (lay == Layout::Nhwc) {
      if (windowed(op.kind) || op.kind == OpKind::RowExchange) a.channels_last = true;
      if (op.kind == OpKind::RowExchange) a.shape = permuted(op.attrs.shape);
      if (op.kind == OpKind::Concat) a.axis = kAxisInNhwc[static_cast<std::size_t>(op.attrs.axis)];
      if (op.kind == OpKind::Slice) {
        a.starts = permuted(op.attrs.starts);
        a.steps = permuted(op.attrs.steps);
        a.shape = permuted(op.attrs.shape);
      }
    }
    const std::string& name = old(op.output).name;
    const bool renamed = lay == Layout::Nhwc && is_output(op.output);
    Slot& s = slots_[static_cast<std::size_t>(op.output)];
    s.stored = out_.add_op(op.kind, renamed ? name + "/nhwc" : name, in, a, op.role, op.layer);
    s.layout = lay;
    // A channels-last output is converted back under its own name right away, so that any
    // reader needing NCHW shares the output value itself.
    if (renamed) get(op.output, Layout::Nchw, name);
  }

  const Graph& g_;
  Graph out_;
  std::vector<Slot> slots_;
};

}  // namespace

Graph to_channels_last(const Graph& graph) {
  return Rewriter(graph).run();
}

}  // namespace huddle
