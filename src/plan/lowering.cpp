#include "plan/lowering.h"

#include "core/error.h"
#include "plan/lowering_2d.h"
#include "plan/lowering_assign.h"
#include "plan/lowering_engine.h"
#include "plan/lowering_pipeline.h"
#include "plan/lowering_rows.h"

#include <fmt/format.h>

#include <algorithm>

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
    OpAttrs wire;
    wire.wire = wire_for(p_, g_, id);
    if (have == Layout::Tokens && want == Layout::Replicated) {
      wire.chunks = p_.gather_chunks;
      return emit(OpKind::AllGather, name, {have_id}, wire, OpRole::Other);
    }
    if (have == Layout::Replicated && want == Layout::Tokens)
      return emit(OpKind::LocalRows, name, {have_id}, {}, OpRole::Other);
    if (have == Layout::Partial && want == Layout::Tokens)
      return emit(OpKind::ReduceScatter, name, {have_id}, wire, OpRole::Other);
    if (have == Layout::Partial && want == Layout::Replicated)
      return emit(OpKind::AllReduce, name, {have_id}, wire, OpRole::Other);
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
        if (layer_plan(op.layer).attention == BlockSplit::Tokens) return attention_tokens(op);
        return attention_heads(op, layer_plan(op.layer).heads[static_cast<std::size_t>(rank_)],
                               rank_ == 0);
      case BlockKind::Mlp:
        if (layer_plan(op.layer).mlp == BlockSplit::Tokens) return mlp_tokens(op);
        return mlp_columns(op, layer_plan(op.layer).columns[static_cast<std::size_t>(rank_)],
                           rank_ == 0);
      case BlockKind::Head:
        return head(op);
    }
  }

  void attention_tokens(const Op& op) {
    if (op.kind != OpKind::Attention) return same_op(op, Layout::Tokens);
    OpAttrs attrs = op.attrs;
    attrs.local_queries = true;
    const ValueId q = get(op.inputs[0], Layout::Tokens);
    // Every device's keys and values, gathered in one collective.
    const std::vector<ValueId> kv =
        get_gathered_together({op.inputs[1], op.inputs[2]}, Layout::Replicated);
    const ValueId k = kv[0], v = kv[1];
    define(op, emit(op.kind, op.name, {q, k, v}, attrs, op.role, op.layer), Layout::Tokens);
  }

  void mlp_tokens(const Op& op) { same_op(op, Layout::Tokens); }

  // One device computes the whole head whatever its (single) vocab range says.
  bool head_split() const { return !p_.vocab.empty() && p_.num_devices() > 1; }

  void head(const Op& op) {
    if (!head_split()) return head_on_primary(op);
    head_by_vocab(op);
  }

  void finish() override {
    LoweringEngine::finish();
    if (head_split() && head_outputs_.empty())
      throw PlanError("the plan splits the head by vocabulary, but the model has no head");
  }
};

}  // namespace

WireFormat wire_for(const Plan& plan, const Graph& graph, ValueId value) {
  const std::vector<ValueId>& outputs = graph.outputs();
  return std::find(outputs.begin(), outputs.end(), value) != outputs.end() ? WireFormat::F32
                                                                           : plan.wire;
}

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

std::map<std::string, Tensor> outputs_by_model_name(const Graph& graph, const Program& program,
                                                    std::map<std::string, Tensor> outputs) {
  const std::vector<ValueId>& model = graph.outputs();
  const std::vector<ValueId>& lowered = program.graph.outputs();
  HUDDLE_CHECK(model.size() == lowered.size(), "program of {} outputs for a model of {}",
               lowered.size(), model.size());
  std::map<std::string, Tensor> out;
  for (std::size_t i = 0; i < model.size(); ++i) {
    const auto it = outputs.find(program.graph.value(lowered[i]).name);
    HUDDLE_CHECK(it != outputs.end(), "output '{}' was not produced",
                 program.graph.value(lowered[i]).name);
    out[graph.value(model[i]).name] = std::move(it->second);
  }
  return out;
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
    if (v.kind == ValueKind::Weight) bytes += weight_value_bytes(v);
  }
  return bytes;
}

}  // namespace huddle
