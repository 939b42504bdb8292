#include "plan/lowering.h"

#include "core/error.h"
#include "plan/lowering_2d.h"
#include "plan/lowering_assign.h"
#include "plan/lowering_engine.h"
#include "plan/lowering_pipeline.h"
#include "plan/lowering_rows.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

namespace huddle {
namespace {

using lowering::Layout;
using lowering::LoweringEngine;

// The block an op belongs to; PlanError for ops without a role.
BlockKind block_of_op(const Op& op) {
  if (const auto block = block_of(op.role)) return *block;
  throw PlanError(fmt::format("op '{}' has no role; lowering cannot place it", op.name));
}

// 1D plans: per layer heads / FFN columns or tokens, residual replicated or token-split.
class Lowering1D final : public LoweringEngine {
 public:
  using LoweringEngine::LoweringEngine;

 private:
  const LayerPlan& layer_plan(int layer) const {
    if (layer < 0) return p_.layers.front();
    return p_.layers[static_cast<std::size_t>(layer)];
  }

  Layout residual_layout(const Op& op) const {
    // Ops outside blocks: the embedding takes layer 0's layout, the final norm the last layer's.
    const LayerPlan& l = op.layer >= 0              ? layer_plan(op.layer)
                         : op.role == OpRole::Embed ? p_.layers.front()
                                                    : p_.layers.back();
    return l.residual == ResidualLayout::Tokens ? Layout::Tokens : Layout::Replicated;
  }

  ValueId move(ValueId id, ValueId have_id, Layout have, Layout want,
               const std::string& name) override {
    const Value& v = g_.value(id);
    if (have == Layout::Tokens && want == Layout::Replicated)
      return emit(OpKind::AllGather, name, {have_id}, {}, OpRole::Other);
    if (have == Layout::Replicated && want == Layout::Tokens)
      return emit(OpKind::LocalRows, name, {have_id}, {}, OpRole::Other);
    if (have == Layout::Partial && want == Layout::Tokens)
      return emit(OpKind::ReduceScatter, name, {have_id}, {}, OpRole::Other);
    if (have == Layout::Partial && want == Layout::Replicated)
      return emit(OpKind::AllReduce, name, {have_id}, {}, OpRole::Other);
    if (have == Layout::Tokens && want == Layout::Primary)
      return emit(OpKind::GatherToPrimary, name, {have_id}, {}, OpRole::Other);
    if (have == Layout::Primary && want == Layout::Tokens) {
      // Only device 0 holds the data; elsewhere the ids stand in, giving the row count.
      OpAttrs attrs;
      attrs.width = v.shape.back();
      const ValueId input = rank_ == 0 ? have_id : get(ids_input(), Layout::Replicated);
      return emit(OpKind::ScatterFromPrimary, name, {input}, attrs, OpRole::Other);
    }
    throw PlanError(fmt::format("cannot move '{}' from {} to {}", v.name, layout_name(have),
                                layout_name(want)));
  }

  // A slice [b, e) along `axis` of weight value `id`.
  ValueId weight_slice(ValueId id, int axis, std::int64_t b, std::int64_t e) {
    return weight_tile(id, {{axis, b, e}});
  }

  // With several devices the embedding runs on device 0 only (the tables stay there) and its
  // result is scattered or broadcast where the first block needs it.
  void embed_on_primary(const Op& op) {
    if (rank_ == 0) return same_op(op, Layout::Primary);
    lowered_[op.output] = {-1, Layout::Primary};
  }

  void lower_op(const Op& op) override {
    switch (block_of_op(op)) {
      case BlockKind::Connection:
        if (op.role == OpRole::Embed && p_.num_devices() > 1) return embed_on_primary(op);
        return same_op(op, residual_layout(op));
      case BlockKind::Attention:
        return layer_plan(op.layer).attention == BlockSplit::Tokens ? attention_tokens(op)
                                                                    : attention_heads(op);
      case BlockKind::Mlp:
        return layer_plan(op.layer).mlp == BlockSplit::Tokens ? mlp_tokens(op) : mlp_columns(op);
      case BlockKind::Head:
        return head(op);
    }
  }

  void attention_tokens(const Op& op) {
    if (op.kind != OpKind::Attention) return same_op(op, Layout::Tokens);
    OpAttrs attrs = op.attrs;
    attrs.local_queries = true;
    const ValueId q = get(op.inputs[0], Layout::Tokens);
    const ValueId k = get(op.inputs[1], Layout::Replicated);
    const ValueId v = get(op.inputs[2], Layout::Replicated);
    define(op, emit(op.kind, op.name, {q, k, v}, attrs, op.role, op.layer), Layout::Tokens);
  }

  // Column-parallel linear: input replicated, weight (and bias) sliced to output columns [b, e).
  void column_linear(const Op& op, std::int64_t b, std::int64_t e) {
    std::vector<ValueId> inputs = {get(op.inputs[0], Layout::Replicated),
                                   weight_slice(op.inputs[1], out_axis(op), b, e)};
    if (op.inputs.size() == 3) inputs.push_back(weight_slice(op.inputs[2], 0, b, e));
    define(op, emit(op.kind, op.name, std::move(inputs), op.attrs, op.role, op.layer),
           Layout::Local);
  }

  // Row-parallel linear: input local columns, weight sliced to input rows [b, e), bias on device 0.
  void row_linear(const Op& op, std::int64_t b, std::int64_t e) {
    std::vector<ValueId> inputs = {get(op.inputs[0], Layout::Local),
                                   weight_slice(op.inputs[1], 1 - out_axis(op), b, e)};
    if (op.inputs.size() == 3 && rank_ == 0) inputs.push_back(weight(op.inputs[2]));
    define(op, emit(op.kind, op.name, std::move(inputs), op.attrs, op.role, op.layer),
           Layout::Partial);
  }

  void attention_heads(const Op& op) {
    const auto [hb, he] = layer_plan(op.layer).heads[static_cast<std::size_t>(rank_)];
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
                    {get(op.inputs[0], Layout::Local), get(op.inputs[1], Layout::Replicated)},
                    attrs, op.role, op.layer),
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
        return row_linear(op, hb * d, he * d);
      default:
        throw PlanError(fmt::format("op '{}' is not a known part of an attention block", op.name));
    }
  }

  void mlp_tokens(const Op& op) { same_op(op, Layout::Tokens); }

  void mlp_columns(const Op& op) {
    const auto [cb, ce] = layer_plan(op.layer).columns[static_cast<std::size_t>(rank_)];
    if (ce <= cb) {
      throw PlanError(fmt::format(
          "layer {}: device {} has no MLP columns; tensor-parallel blocks need at least "
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
        return row_linear(op, cb, ce);
      default:
        throw PlanError(fmt::format("op '{}' is not a known part of an MLP block", op.name));
    }
  }

  void head(const Op& op) { head_on_primary(op); }
};

}  // namespace

Program lower(const Graph& graph, const ModelConfig& config, const Plan& plan, int rank) {
  HUDDLE_CHECK(rank >= 0 && rank < plan.num_devices());
  if (plan.row_split()) return lower_rows(graph, plan, rank);
  if (plan.op_assigned()) return lower_assign(graph, config, plan, rank);
  Program program = plan.pipelined()  ? lower_pipeline(graph, config, plan, rank)
                    : plan.tiled_2d() ? lower_2d(graph, config, plan, rank)
                                      : Lowering1D(graph, config, plan, rank).run();
  // Encoders have no head: their final hidden states must reach device 0 (a pipeline's last
  // stage sends them there when it is another device).
  if (rank == 0 && program.graph.outputs().empty() &&
      !(plan.pipelined() && plan.pipeline->output_device() != 0)) {
    throw PlanError("lowering produced no output on device 0");
  }
  return program;
}

WeightMap extract_weights(const Program& program, const WeightMap& model_weights) {
  WeightMap out;
  for (const Value& v : program.graph.values()) {
    if (v.kind == ValueKind::Weight && !out.contains(v.name)) {
      out.emplace(v.name, resolve_weight(model_weights, v.weight).clone());
    }
  }
  return out;
}

void localize_weights(Program& program) {
  const std::size_t n = program.graph.values().size();
  for (std::size_t i = 0; i < n; ++i) {
    const Value& v = program.graph.values()[i];
    if (v.kind == ValueKind::Weight) {
      program.graph.rebind_weight(static_cast<ValueId>(i), WeightRef{v.name, v.shape, -1, 0, 0});
    }
  }
}

std::size_t program_weight_bytes(const Program& program, const WeightMap& weights) {
  std::size_t bytes = 0;
  for (const Value& v : program.graph.values()) {
    if (v.kind == ValueKind::Weight) bytes += resolve_weight(weights, v.weight).nbytes();
  }
  return bytes;
}

std::size_t program_weight_bytes(const Program& program) {
  std::size_t bytes = 0;
  for (const Value& v : program.graph.values()) {
    if (v.kind == ValueKind::Weight)
      bytes += static_cast<std::size_t>(shape_numel(v.shape)) * sizeof(float);
  }
  return bytes;
}

}  // namespace huddle
