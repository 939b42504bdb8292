#include "plan/lowering_engine.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace huddle::lowering {

const char* layout_name(Layout layout) {
  switch (layout) {
#define HUDDLE_LAYOUT_NAME(e, name) \
  case Layout::e:                   \
    return name;
    HUDDLE_LAYOUTS(HUDDLE_LAYOUT_NAME)
#undef HUDDLE_LAYOUT_NAME
  }
  return "?";
}

LoweringEngine::LoweringEngine(const Graph& graph, const ModelConfig& config, const Plan& plan,
                               int rank)
    : g_(graph), c_(config), p_(plan), rank_(rank), value_layer_(graph.values().size(), -1) {
  for (const Op& op : graph.ops()) value_layer_[static_cast<std::size_t>(op.output)] = op.layer;
}

Program LoweringEngine::run() {
  for (const Op& op : g_.ops()) lower_op(op);
  finish();
  Program program{rank_, p_.num_devices(), p_.token_shares, std::move(out_)};
  program.graph.validate();
  return program;
}

void LoweringEngine::finish() {
  // Outputs not produced by a head (an encoder's hidden states) are gathered to device 0.
  for (ValueId o : g_.outputs()) {
    if (head_outputs_.contains(o)) continue;
    const ValueId id = get(o, Layout::Primary);
    if (rank_ == 0) out_.add_output(id);
  }
}

ValueId LoweringEngine::get(ValueId id, Layout want) {
  const Value& v = g_.value(id);
  if (v.kind == ValueKind::Weight) return weight(id);
  if (v.kind == ValueKind::Input && !lowered_.contains(id)) {
    lowered_[id] = {out_.add_input(v.name, v.shape, v.dtype), Layout::Replicated};
  }
  const auto it = lowered_.find(id);
  HUDDLE_CHECK(it != lowered_.end(), "value '{}' used before it is lowered", v.name);
  const auto [have_id, have] = it->second;
  if (have == want) return have_id;
  const auto key = std::make_pair(id, want);
  if (const auto m = moved_.find(key); m != moved_.end()) return m->second;
  const std::string name = fmt::format("{}@{}", v.name, layout_name(want));
  const int outer_layer = std::exchange(move_layer_, value_layer_[static_cast<std::size_t>(id)]);
  ValueId result = -1;
  if (have == Layout::Replicated && want == Layout::Primary) {
    result = have_id;  // device 0 holds it too
  } else if (have == Layout::Primary && want == Layout::Replicated) {
    // Only device 0 holds the data; elsewhere the ids stand in, giving the row count.
    OpAttrs attrs;
    attrs.width = v.shape.back();
    const ValueId input = rank_ == 0 ? have_id : get(ids_input(), Layout::Replicated);
    result = emit(OpKind::BroadcastFromPrimary, name, {input}, attrs, OpRole::Other);
  } else {
    result = move(id, have_id, have, want, name);
  }
  move_layer_ = outer_layer;
  if (reusable_move(want)) moved_[key] = result;
  return result;
}

std::vector<ValueId> LoweringEngine::get_gathered_together(const std::vector<ValueId>& ids,
                                                           Layout want) {
  std::vector<ValueId> together;  // model values whose gathers are fused
  for (ValueId id : ids) {
    const Value& v = g_.value(id);
    const auto it = lowered_.find(id);
    const bool fusable = want == Layout::Replicated && v.kind == ValueKind::Activation &&
                         v.dtype == DType::F32 && v.shape.size() == 2 && it != lowered_.end() &&
                         it->second.second == Layout::Tokens && !moved_.contains({id, want}) &&
                         is_per_element(wire_for(p_, g_, id));
    if (!fusable) continue;
    const Value& first = together.empty() ? v : g_.value(together.front());
    if (first.shape[0] != v.shape[0] ||
        wire_for(p_, g_, together.empty() ? id : together.front()) != wire_for(p_, g_, id)) {
      continue;
    }
    if (std::find(together.begin(), together.end(), id) == together.end()) together.push_back(id);
  }
  if (together.size() >= 2) {
    std::vector<ValueId> parts;
    std::string name;
    for (ValueId id : together) {
      parts.push_back(lowered_.at(id).first);
      name += (name.empty() ? "" : "+") + g_.value(id).name;
    }
    OpAttrs join;
    join.axis = 1;
    const int outer_layer =
        std::exchange(move_layer_, value_layer_[static_cast<std::size_t>(together.front())]);
    const ValueId joined = emit(OpKind::Concat, name, std::move(parts), join, OpRole::Other);
    const ValueId gathered = move(together.front(), joined, Layout::Tokens, want,
                                  fmt::format("{}@{}", name, layout_name(want)));
    std::int64_t col = 0;
    for (ValueId id : together) {
      const Value& v = g_.value(id);
      OpAttrs view;
      view.col_begin = col;
      view.width = v.shape[1];
      col += v.shape[1];
      moved_[{id, want}] = emit(OpKind::SliceCols, fmt::format("{}@{}", v.name, layout_name(want)),
                                {gathered}, view, OpRole::Other);
    }
    move_layer_ = outer_layer;
  }
  std::vector<ValueId> result;
  for (ValueId id : ids) result.push_back(get(id, want));
  return result;
}

ValueId LoweringEngine::weight(ValueId id) {
  if (const auto it = weights_.find(id); it != weights_.end()) return it->second;
  const Value& v = g_.value(id);
  const ValueId w = out_.add_weight(v.name, v.shape, v.weight, v.dtype);
  weights_[id] = w;
  return w;
}

ValueId LoweringEngine::weight_tile(ValueId id, const std::vector<WeightSlice>& slices) {
  const Value& v = g_.value(id);
  WeightRef ref = v.weight;
  Shape shape = v.shape;
  for (const WeightSlice& s : slices) {
    shape[static_cast<std::size_t>(s.axis)] = s.end - s.begin;
    if (ref.axis == s.axis) {
      ref.end = ref.begin + s.end;
      ref.begin += s.begin;
    } else if (ref.axis2 == s.axis) {
      ref.end2 = ref.begin2 + s.end;
      ref.begin2 += s.begin;
    } else if (ref.axis < 0) {
      ref.axis = s.axis;
      ref.begin = s.begin;
      ref.end = s.end;
    } else if (ref.axis2 < 0) {
      ref.axis2 = s.axis;
      ref.begin2 = s.begin;
      ref.end2 = s.end;
    } else {
      throw PlanError(fmt::format("weight '{}' cannot be sliced again on axis {}", v.name, s.axis));
    }
  }
  std::string name = fmt::format("{}[{}:{}:{}]", ref.tensor, ref.axis, ref.begin, ref.end);
  if (ref.axis2 >= 0) name += fmt::format("[{}:{}:{}]", ref.axis2, ref.begin2, ref.end2);
  if (auto existing = out_.find(name)) return *existing;
  return out_.add_weight(name, std::move(shape), std::move(ref), v.dtype);
}

ValueId LoweringEngine::emit(OpKind kind, const std::string& name, std::vector<ValueId> inputs,
                             const OpAttrs& attrs, OpRole role, int layer) {
  return out_.add_op(kind, name, std::move(inputs), attrs, role, layer >= 0 ? layer : move_layer_);
}

void LoweringEngine::define(const Op& op, ValueId id, Layout layout) {
  lowered_[op.output] = {id, layout};
}

void LoweringEngine::same_op(const Op& op, Layout layout) {
  std::vector<ValueId> inputs;
  for (ValueId in : op.inputs) inputs.push_back(get(in, layout));
  define(op, emit(op.kind, op.name, std::move(inputs), op.attrs, op.role, op.layer), layout);
}

void LoweringEngine::head_on_primary(const Op& op) {
  head_outputs_.insert(op.output);
  // Every device takes part in gathering an activation to device 0; weights stay on device 0.
  std::vector<ValueId> inputs;
  for (ValueId in : op.inputs) {
    if (rank_ == 0 || g_.value(in).kind != ValueKind::Weight)
      inputs.push_back(get(in, Layout::Primary));
  }
  if (rank_ != 0) {
    define(op, -1, Layout::Primary);
    return;
  }
  define_head_output(op, emit(op.kind, op.name, std::move(inputs), op.attrs, op.role, op.layer));
}

void LoweringEngine::define_head_output(const Op& op, ValueId out) {
  define(op, out, Layout::Primary);
  if (rank_ != 0) return;
  for (ValueId o : g_.outputs()) {
    if (o == op.output) out_.add_output(out);
  }
}

void LoweringEngine::head_by_vocab(const Op& op) {
  if (op.kind == OpKind::LastRow) return same_op(op, Layout::Replicated);
  const bool linear = op.kind == OpKind::Linear && op.inputs.size() >= 2 &&
                      g_.value(op.inputs[1]).kind == ValueKind::Weight &&
                      g_.value(op.inputs[1]).shape.size() == 2;
  if (!linear) {
    throw PlanError(fmt::format(
        "the plan splits the head by vocabulary, but head op '{}' is not a last_row or a linear",
        op.name));
  }
  const std::int64_t outputs = g_.value(op.inputs[1]).shape[static_cast<std::size_t>(out_axis(op))];
  if (p_.vocab.back().second != outputs) {
    throw PlanError(fmt::format("the plan's vocab covers [0, {}) but head '{}' has {} outputs",
                                p_.vocab.back().second, op.name, outputs));
  }
  OpAttrs gather;
  for (const auto& [b, e] : p_.vocab) {
    if (e <= b) throw PlanError("the plan's vocab gives a device no rows; each needs at least one");
    gather.parts.push_back(e - b);
  }
  const auto [vb, ve] = p_.vocab[static_cast<std::size_t>(rank_)];
  std::vector<ValueId> inputs = {get(op.inputs[0], Layout::Replicated),
                                 weight_tile(op.inputs[1], {{out_axis(op), vb, ve}})};
  if (op.inputs.size() == 3) inputs.push_back(weight_tile(op.inputs[2], {{0, vb, ve}}));
  const ValueId part = emit(op.kind, op.name, std::move(inputs), op.attrs, op.role, op.layer);
  const ValueId out = emit(OpKind::GatherColsToPrimary, op.name + "@primary", {part}, gather,
                           OpRole::Other, op.layer);
  head_outputs_.insert(op.output);
  define_head_output(op, out);
}

// Column-parallel linear: input replicated, weight (and bias) sliced to output columns [b, e).
void LoweringEngine::column_linear(const Op& op, std::int64_t b, std::int64_t e) {
  std::vector<ValueId> inputs = {get(op.inputs[0], Layout::Replicated),
                                 weight_tile(op.inputs[1], {{out_axis(op), b, e}})};
  if (op.inputs.size() == 3) inputs.push_back(weight_tile(op.inputs[2], {{0, b, e}}));
  define(op, emit(op.kind, op.name, std::move(inputs), op.attrs, op.role, op.layer), Layout::Local);
}

// Row-parallel linear: input local columns, weight sliced to input rows [b, e).
void LoweringEngine::row_linear(const Op& op, std::int64_t b, std::int64_t e, bool bias) {
  std::vector<ValueId> inputs = {get(op.inputs[0], Layout::Local),
                                 weight_tile(op.inputs[1], {{1 - out_axis(op), b, e}})};
  if (op.inputs.size() == 3 && bias) inputs.push_back(weight(op.inputs[2]));
  define(op, emit(op.kind, op.name, std::move(inputs), op.attrs, op.role, op.layer),
         Layout::Partial);
}

void LoweringEngine::attention_heads(const Op& op, Range heads, bool bias) {
  const auto [hb, he] = heads;
  if (he <= hb) {
    throw PlanError(
        fmt::format("layer {}: device {} has no attention heads; tensor-parallel blocks need at "
                    "least one per device",
                    op.layer, rank_));
  }
  const int group = c_.heads / c_.kv_heads;
  const std::int64_t kb = hb / group, ke = (he - 1) / group + 1;
  const std::int64_t d = c_.head_dim;
  switch (op.role) {
    case OpRole::AttnQ:
      return column_linear(op, hb * d, he * d);
    case OpRole::AttnK:
    case OpRole::AttnV:
      return column_linear(op, kb * d, ke * d);
    case OpRole::AttnRope: {
      OpAttrs attrs = op.attrs;
      attrs.heads = static_cast<int>(op.attrs.heads == c_.heads ? he - hb : ke - kb);
      define(op,
             emit(op.kind, op.name,
                  {get(op.inputs[0], Layout::Local), get(op.inputs[1], Layout::Replicated)}, attrs,
                  op.role, op.layer),
             Layout::Local);
      return;
    }
    case OpRole::AttnCore: {
      OpAttrs attrs = op.attrs;
      attrs.heads = static_cast<int>(he - hb);
      attrs.kv_heads = static_cast<int>(ke - kb);
      attrs.q_head_begin = static_cast<int>(hb);
      attrs.kv_group = group;
      std::vector<ValueId> inputs;
      for (ValueId in : op.inputs) inputs.push_back(get(in, Layout::Local));
      define(op, emit(op.kind, op.name, std::move(inputs), attrs, op.role, op.layer),
             Layout::Local);
      return;
    }
    case OpRole::AttnOut:
      return row_linear(op, hb * d, he * d, bias);
    default:
      throw PlanError(fmt::format("op '{}' is not a known part of an attention block", op.name));
  }
}

void LoweringEngine::mlp_columns(const Op& op, Range columns, bool bias) {
  const auto [cb, ce] = columns;
  if (ce <= cb) {
    throw PlanError(
        fmt::format("layer {}: device {} has no MLP columns; tensor-parallel blocks need at least "
                    "one per device",
                    op.layer, rank_));
  }
  switch (op.role) {
    case OpRole::MlpUp:
    case OpRole::MlpGate:
      return column_linear(op, cb, ce);
    case OpRole::MlpAct:
      return same_op(op, Layout::Local);
    case OpRole::MlpDown:
      return row_linear(op, cb, ce, bias);
    default:
      throw PlanError(fmt::format("op '{}' is not a known part of an MLP block", op.name));
  }
}

ValueId LoweringEngine::ids_input() const {
  const std::optional<ValueId> ids = g_.find("ids");
  if (!ids) throw PlanError("the model graph has no 'ids' input");
  return *ids;
}

int LoweringEngine::out_axis(const Op& op) {
  return op.attrs.weight_layout == kernels::WeightLayout::OutIn ? 0 : 1;
}

}  // namespace huddle::lowering
