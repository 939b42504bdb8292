#include "plan/lowering_rows.h"

#include "core/error.h"
#include "graph/channels_last.h"
#include "plan/row_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

namespace huddle {
namespace {

// Rows of a value as the exchange counts them: H for NCHW, columns (the last axis) otherwise.
std::int64_t extent(const Value& v) {
  return rows::split_extent(v.shape);
}

// The axis rows [b, e) of `shape` cut: H of NCHW, else the last (none for a scalar).
std::optional<std::size_t> split_axis(const Shape& shape) {
  if (shape.size() == 4) return 2;
  if (shape.empty()) return std::nullopt;
  return shape.size() - 1;
}

std::string band_name(const std::string& name, const Range& r) {
  return fmt::format("{}@rows{}-{}", name, r.first, r.second);
}

std::string cols_name(const std::string& name, const Range& r) {
  return fmt::format("{}@cols{}-{}", name, r.first, r.second);
}

class RowLowering {
 public:
  RowLowering(const Graph& g, const Plan& plan, int rank)
      : g_(g),
        plan_(plan),
        rg_(rows::build_row_graph(g)),
        devices_(plan.num_devices()),
        rank_(rank),
        token_shares_(plan.token_shares),
        ranges_(plan.rows->layer_ranges(rg_, devices_)),
        layer_of_op_(g.ops().size(), -1),
        folded_(g.ops().size(), false) {
    for (std::size_t l = 0; l < rg_.layers.size(); ++l)
      layer_of_op_[rg_.layers[l].op] = static_cast<int>(l);
    for (std::size_t op : rg_.folded) folded_[op] = true;
    plan_flows();
  }

  Program run() {
    for (std::size_t i = 0; i < g_.values().size(); ++i) {
      const Value& v = g_.values()[i];
      if (v.kind != ValueKind::Input) continue;
      if (rank_ == 0) {
        local_[static_cast<ValueId>(i)] = {out_.add_input(v.name, v.shape, v.dtype),
                                           {0, extent(v)}};
      }
      exchange(static_cast<ValueId>(i));
    }
    for (std::size_t i = 0; i < g_.ops().size(); ++i) {
      const Op& op = g_.ops()[i];
      const int layer = layer_of_op_[i];
      if (folded_[i]) continue;  // done by the units that read it (reshaped)
      if (layer >= 0) {
        unit(op, static_cast<std::size_t>(layer));
      } else if (rank_ == 0) {
        tail(op);
      }
      exchange(op.output);
    }
    if (rank_ == 0) {
      for (ValueId o : g_.outputs()) {
        const auto it = local_.find(o);
        HUDDLE_CHECK(it != local_.end() && it->second.second == Range(0, extent(g_.value(o))),
                     "output '{}' is not whole on device 0", g_.value(o).name);
        out_.add_output(it->second.first);
      }
    }
    // Channels-last units and rows (graph/channels_last.h): a banded conv reads its rows in
    // place, and an exchanged band is one contiguous block per image.
    Program program{rank_, devices_, token_shares_, to_channels_last(out_)};
    program.graph.validate();
    return program;
  }

 private:
  // What each device holds of every value and what it needs (before exchanges: the effective
  // need leaves out devices that hold all they need).
  void plan_flows() {
    const std::size_t n = g_.values().size();
    held_.assign(n, std::vector<Range>(static_cast<std::size_t>(devices_), Range{0, 0}));
    need_ = held_;
    auto whole = [&](ValueId v) { return Range{0, extent(g_.value(v))}; };
    auto add_need = [&](ValueId v, int d, const Range& r) {
      Range& slot = need_[static_cast<std::size_t>(v)][static_cast<std::size_t>(d)];
      slot = hull(slot, r);
    };
    for (std::size_t i = 0; i < n; ++i) {
      if (g_.values()[i].kind == ValueKind::Input) held_[i][0] = whole(static_cast<ValueId>(i));
    }
    for (std::size_t i = 0; i < g_.ops().size(); ++i) {
      const Op& op = g_.ops()[i];
      const int layer = layer_of_op_[i];
      if (folded_[i]) continue;
      if (layer < 0) {
        held_[static_cast<std::size_t>(op.output)][0] = whole(op.output);
        for (ValueId in : op.inputs) {
          if (g_.value(in).kind != ValueKind::Weight) add_need(in, 0, whole(in));
        }
        continue;
      }
      const rows::RowLayer& l = rg_.layers[static_cast<std::size_t>(layer)];
      const auto& ranges = ranges_[static_cast<std::size_t>(layer)];
      held_[static_cast<std::size_t>(op.output)] = ranges;
      for (int d = 0; d < devices_; ++d) {
        const Range& r = ranges[static_cast<std::size_t>(d)];
        if (empty(r)) continue;
        for (const rows::RowInput& in : l.inputs) {
          const kernels::RowSpan s = in.map.input_rows(r.first, r.second);
          add_need(in.value, d, Range{s.begin, s.end});
        }
      }
    }
    for (ValueId o : g_.outputs()) add_need(o, 0, whole(o));
    for (std::size_t v = 0; v < n; ++v) {
      for (int d = 0; d < devices_; ++d) {
        Range& need = need_[v][static_cast<std::size_t>(d)];
        if (contains(held_[v][static_cast<std::size_t>(d)], need)) need = {0, 0};
      }
    }
  }

  ValueId weight(ValueId id) {
    if (const auto it = weights_.find(id); it != weights_.end()) return it->second;
    const Value& v = g_.value(id);
    return weights_[id] = out_.add_weight(v.name, v.shape, v.weight, v.dtype);
  }

  // Columns [c.first, c.second) of a column layer's weight operand `id` (input `k` of `op`): rows
  // of a linear's [O, K] matrix, columns of a [K, O] one, entries of the bias; the whole weight
  // when `c` is every column.
  ValueId column_weight(const Op& op, std::size_t k, ValueId id, const Range& c) {
    const Value& v = g_.value(id);
    const bool out_in =
        op.kind == OpKind::Linear && op.attrs.weight_layout == kernels::WeightLayout::OutIn;
    const std::size_t axis = k == 1 && !out_in ? 1 : 0;
    if (c == Range{0, v.shape[axis]}) return weight(id);
    HUDDLE_CHECK(v.weight.axis < 0, "weight '{}' is already a slice", v.name);
    WeightRef ref = v.weight;
    ref.axis = static_cast<int>(axis);
    ref.begin = c.first;
    ref.end = c.second;
    Shape shape = v.shape;
    shape[axis] = c.second - c.first;
    const std::string name = fmt::format("{}[{}:{}:{}]", ref.tensor, axis, c.first, c.second);
    if (const auto existing = out_.find(name)) return *existing;
    return out_.add_weight(name, std::move(shape), std::move(ref), v.dtype);
  }

  // The row exchange of model value `v` after its producer, where some device needs rows it
  // does not hold. Every device counts the exchange (its index is the message tag).
  void exchange(ValueId v) {
    const auto& held = held_[static_cast<std::size_t>(v)];
    const auto& need = need_[static_cast<std::size_t>(v)];
    if (std::all_of(need.begin(), need.end(), empty)) return;
    const int index = exchanges_++;
    OpAttrs a;
    a.exchange = index;
    a.wire = wire_for(plan_, g_, v);
    for (const RowTransfer& t : forwarding_table(held, need)) {
      if (t.src == rank_ && t.dst != rank_) a.sends.push_back({t.dst, t.begin, t.end});
      if (t.dst == rank_) a.recvs.push_back({t.src, t.begin, t.end});
    }
    if (a.sends.empty() && a.recvs.empty()) return;
    const Value& value = g_.value(v);
    // A graph input (a camera's image) may take few values per channel: tried palette-coded.
    a.palette = value.kind == ValueKind::Input && a.wire == WireFormat::F32;
    // A graph output that only device 0 needs more of travels NCHW (its layout as an output):
    // each device transposes its own rows, device 0 not the whole after the last piece lands.
    const bool output =
        std::find(g_.outputs().begin(), g_.outputs().end(), v) != g_.outputs().end();
    a.gather_nchw =
        value.shape.size() == 4 && output && std::all_of(need.begin() + 1, need.end(), empty);
    const Range mine = need[static_cast<std::size_t>(rank_)];
    a.shape = value.shape;
    if (const auto axis = split_axis(value.shape)) a.shape[*axis] = mine.second - mine.first;
    a.out_begin = mine.first;
    std::vector<ValueId> inputs;
    const bool local_copy =
        std::any_of(a.recvs.begin(), a.recvs.end(), [&](const auto& p) { return p.peer == rank_; });
    if (!a.sends.empty() || local_copy) {
      const auto it = local_.find(v);
      HUDDLE_CHECK(it != local_.end(), "device {} sends rows of '{}' it does not hold", rank_,
                   value.name);
      inputs.push_back(it->second.first);
      a.in_begin = it->second.second.first;
    }
    const bool whole = mine == Range{0, extent(value)};
    const std::string name =
        empty(mine) ? fmt::format("{}@send", value.name)
                    : (whole ? value.name
                             : (value.shape.size() == 4 ? band_name(value.name, mine)
                                                        : cols_name(value.name, mine)));
    const ValueId id = out_.add_op(OpKind::RowExchange, name, std::move(inputs), a);
    if (!empty(mine)) local_[v] = {id, mine};
  }

  // This device's execution unit of row layer `layer` (nothing for a zero-row unit).
  void unit(const Op& op, std::size_t layer) {
    const Range r = ranges_[layer][static_cast<std::size_t>(rank_)];
    if (empty(r)) return;
    const rows::RowLayer& l = rg_.layers[layer];
    OpAttrs attrs = op.attrs;
    std::vector<ValueId> inputs;
    std::size_t next_input = 0;  // index in l.inputs (activations only)
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      const ValueId in = op.inputs[k];
      const Value& v = g_.value(in);
      if (v.kind == ValueKind::Weight) {
        inputs.push_back(l.columns ? column_weight(op, k, in, r) : weight(in));
        continue;
      }
      const rows::RowInput& ri = l.inputs[next_input++];
      if (ri.reshape >= 0) {  // a folded reshape: of the rows gathered whole here
        inputs.push_back(reshaped(static_cast<std::size_t>(ri.reshape)));
        continue;
      }
      const auto it = local_.find(in);
      const kernels::RowSpan s = ri.map.input_rows(r.first, r.second);
      HUDDLE_CHECK(it != local_.end() && contains(it->second.second, Range{s.begin, s.end}),
                   "device {}: unit '{}' lacks rows [{}, {}) of '{}'", rank_, op.name, s.begin,
                   s.end, v.name);
      const auto [id, span] = it->second;
      switch (ri.map.kind) {
        case rows::RowMap::Kind::Window:
        case rows::RowMap::Kind::Resize:
          attrs.banded = true;
          attrs.band = {r.first, r.second, span.first, ri.map.in_rows};
          attrs.out_rows = l.rows;
          inputs.push_back(id);
          break;
        case rows::RowMap::Kind::Same:
          inputs.push_back(span == r ? id : rows_of(id, v, span, r));
          break;
        case rows::RowMap::Kind::Whole:
          inputs.push_back(id);
          break;
      }
    }
    if (op.kind == OpKind::Slice) attrs.shape[2] = r.second - r.first;
    const bool whole = r == Range{0, l.rows};
    const std::string name =
        whole ? op.name : (l.columns ? cols_name(op.name, r) : band_name(op.name, r));
    const ValueId id = out_.add_op(op.kind, name, std::move(inputs), attrs, op.role, op.layer);
    local_[op.output] = {id, r};
  }

  // The output of folded reshape `op_index` on this device, from its input held whole here
  // (once per device).
  ValueId reshaped(std::size_t op_index) {
    const Op& op = g_.ops()[op_index];
    if (const auto it = local_.find(op.output); it != local_.end()) return it->second.first;
    const auto in = local_.find(op.inputs[0]);
    HUDDLE_CHECK(
        in != local_.end() && in->second.second == Range(0, extent(g_.value(op.inputs[0]))),
        "device {}: reshape '{}' lacks its input whole", rank_, op.name);
    const ValueId id =
        out_.add_op(op.kind, op.name, {in->second.first}, op.attrs, op.role, op.layer);
    local_[op.output] = {id, Range{0, extent(g_.value(op.output))}};
    return id;
  }

  // Rows `want` of program value `id` (model value `v`), which holds rows `have` (columns of a
  // column layer's value): a slice.
  ValueId rows_of(ValueId id, const Value& v, const Range& have, const Range& want) {
    const auto key = std::make_pair(id, want);
    if (const auto it = cuts_.find(key); it != cuts_.end()) return it->second;
    const std::size_t axis = split_axis(v.shape).value();
    OpAttrs a;
    a.starts.assign(v.shape.size(), 0);
    a.starts[axis] = want.first - have.first;
    a.steps.assign(v.shape.size(), 1);
    a.shape = v.shape;
    a.shape[axis] = want.second - want.first;
    const std::string name =
        v.shape.size() == 4 ? band_name(v.name, want) : cols_name(v.name, want);
    return cuts_[key] = out_.add_op(OpKind::Slice, name + "@cut", {id}, a);
  }

  // A tail op, whole on device 0.
  void tail(const Op& op) {
    std::vector<ValueId> inputs;
    for (ValueId in : op.inputs) {
      if (g_.value(in).kind == ValueKind::Weight) {
        inputs.push_back(weight(in));
        continue;
      }
      const auto it = local_.find(in);
      HUDDLE_CHECK(it != local_.end() && it->second.second == Range(0, extent(g_.value(in))),
                   "tail op '{}' lacks '{}' whole", op.name, g_.value(in).name);
      inputs.push_back(it->second.first);
    }
    local_[op.output] = {
        out_.add_op(op.kind, op.name, std::move(inputs), op.attrs, op.role, op.layer),
        Range{0, extent(g_.value(op.output))}};
  }

  const Graph& g_;
  const Plan& plan_;
  const rows::RowGraph rg_;
  const int devices_;
  const int rank_;
  const std::vector<double> token_shares_;
  const std::vector<std::vector<Range>> ranges_;  // per row layer, per device
  std::vector<int> layer_of_op_;
  std::vector<bool> folded_;                     // per graph op: a reshape folded into column units
  std::vector<std::vector<Range>> held_, need_;  // per model value, per device
  std::map<ValueId, std::pair<ValueId, Range>> local_;  // model value -> (program value, rows)
  std::map<ValueId, ValueId> weights_;
  std::map<std::pair<ValueId, Range>, ValueId> cuts_;  // (program value, rows) -> its slice
  Graph out_;
  int exchanges_ = 0;
};

}  // namespace

Program lower_rows(const Graph& graph, const Plan& plan, int rank) {
  HUDDLE_CHECK(plan.row_split() && rank >= 0 && rank < plan.num_devices());
  return RowLowering(graph, plan, rank).run();
}

}  // namespace huddle
