#include "plan/lowering_pipeline.h"

#include "core/error.h"
#include "plan/lowering_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace huddle {
namespace {

using lowering::Layout;
using lowering::LoweringEngine;

class PipelineLowering final : public LoweringEngine {
 public:
  PipelineLowering(const Graph& g, const ModelConfig& c, const Plan& p, int rank)
      : LoweringEngine(g, c, p, rank),
        pipeline_(*p.pipeline),
        stage_(pipeline_.stage_of(rank)),
        units_(pipeline::unit_count(c.layers)),
        unit_(pipeline::unit_of_ops(g, c.layers)) {
    if (stage_ >= 0 && stage().grouped()) {
      const auto member = static_cast<std::size_t>(stage().member_index(rank));
      heads_ = stage().member_heads(c.heads)[member];
      columns_ = stage().member_columns(c.ffn)[member];
    }
    // The unit of every op, and the last unit that reads each value (model outputs: read by
    // device 0 after the last unit).
    last_reader_.assign(g.values().size(), -1);
    producer_unit_.assign(g.values().size(), -1);
    for (std::size_t i = 0; i < g.ops().size(); ++i) {
      const Op& op = g.ops()[i];
      const int u = unit_[i];
      producer_unit_[static_cast<std::size_t>(op.output)] = u;
      for (ValueId in : op.inputs) {
        int& last = last_reader_[static_cast<std::size_t>(in)];
        last = std::max(last, u);
      }
    }
    for (ValueId o : g.outputs()) last_reader_[static_cast<std::size_t>(o)] = units_;
  }

 private:
  const PipelineStage& stage() const { return pipeline_.stages[static_cast<std::size_t>(stage_)]; }
  Range my_units() const { return stage().units; }
  bool leader() const { return stage().device == rank_; }

  // Activations produced before unit `cut` and read at or after it, in value order.
  std::vector<ValueId> crossing(std::int64_t cut) const {
    std::vector<ValueId> out;
    for (std::size_t v = 0; v < producer_unit_.size(); ++v) {
      if (producer_unit_[v] >= 0 && producer_unit_[v] < cut && last_reader_[v] >= cut) {
        const Value& value = g_.value(static_cast<ValueId>(v));
        if (value.shape.size() != 2 || value.shape[0] != kTokens) {
          throw PlanError(
              fmt::format("a pipeline cannot be cut before unit {}: '{}' ({}) crosses "
                          "it, and only [tokens, width] activations can",
                          cut, value.name, shape_str(value.shape)));
        }
        out.push_back(static_cast<ValueId>(v));
      }
    }
    return out;
  }

  // Stage s > 0 starts by receiving what crosses its first cut from stage s - 1 (its leader);
  // in a group stage the leader passes each value on to the other members.
  void receive_inputs() {
    if (received_) return;
    received_ = true;
    if (stage_ == 0) return;
    const int from =
        leader() ? pipeline_.stages[static_cast<std::size_t>(stage_ - 1)].device : stage().device;
    for (ValueId v : crossing(my_units().first)) {
      const Value& value = g_.value(v);
      OpAttrs attrs;
      attrs.peer = from;
      attrs.width = value.shape.back();
      attrs.wire = wire_for(p_, g_, v);
      lowered_[v] = {emit(OpKind::PipeRecv, value.name + "@recv",
                          {get(ids_input(), Layout::Replicated)}, attrs, OpRole::Other),
                     Layout::Replicated};
      if (!leader()) continue;
      for (const int member : stage().group) {
        if (member != rank_) send(v, member, fmt::format("@member{}", member));
      }
    }
  }

  void send(ValueId v, int to, const std::string& suffix) {
    send_lowered(v, get(v, Layout::Replicated), to, suffix);
  }
  void send_lowered(ValueId v, ValueId lowered, int to, const std::string& suffix) {
    OpAttrs attrs;
    attrs.peer = to;
    attrs.wire = wire_for(p_, g_, v);
    emit(OpKind::PipeSend, g_.value(v).name + suffix, {lowered}, attrs, OpRole::Other);
  }

  void lower_op(const Op& op) override {
    const int u = unit_[op_index_++];
    if (stage_ < 0 || u < my_units().first || u >= my_units().second) return;
    receive_inputs();
    // In a group stage the head runs on the leader alone.
    if (stage().grouped() && !leader() && block_of(op.role) == BlockKind::Head) return;
    for (ValueId in : op.inputs) {
      const Value& v = g_.value(in);
      if (v.kind == ValueKind::Activation && !lowered_.contains(in)) {
        throw PlanError(
            fmt::format("op '{}' (unit {}) reads '{}', which no earlier stage "
                        "passes on",
                        op.name, u, v.name));
      }
    }
    if (stage().grouped()) return group_op(op);
    same_op(op, Layout::Replicated);
  }

  // An op of a group stage: attention heads and FFN columns split over the members, the head on
  // the leader, everything else (embedding, norms, residuals) whole on every member.
  void group_op(const Op& op) {
    const std::optional<BlockKind> block = block_of(op.role);
    if (block == BlockKind::Attention) return attention_heads(op, heads_, leader());
    if (block == BlockKind::Mlp) return mlp_columns(op, columns_, leader());
    same_op(op, Layout::Replicated);
  }

  ValueId move(ValueId id, ValueId have_id, Layout have, Layout want,
               const std::string& name) override {
    if (have == Layout::Partial && want == Layout::Replicated && stage_ >= 0 && stage().grouped()) {
      OpAttrs attrs;
      attrs.group = stage().group;
      attrs.wire = wire_for(p_, g_, id);
      return emit(OpKind::AllReduce, name, {have_id}, attrs, OpRole::Other);
    }
    throw PlanError(fmt::format("pipeline lowering cannot move '{}' from {} to {}",
                                g_.value(id).name, layout_name(have), layout_name(want)));
  }

  // The leader sends what crosses the stage's end to the next stage's leader, or the outputs to
  // device 0. Every member first brings those values to Replicated, so a reduction they may
  // still need runs on the whole group.
  void finish() override {
    if (stage_ < 0) return;
    receive_inputs();  // a stage whose units hold no op still passes values on
    const std::size_t last = pipeline_.stages.size() - 1;
    std::vector<ValueId> out;
    if (static_cast<std::size_t>(stage_) < last) {
      out = crossing(my_units().second);
    } else {
      for (ValueId o : g_.outputs()) {
        if (leader() || lowered_.contains(o)) out.push_back(o);  // head outputs: the leader's
      }
    }
    std::vector<ValueId> ready;
    for (ValueId v : out) ready.push_back(get(v, Layout::Replicated));
    if (!leader()) return;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (static_cast<std::size_t>(stage_) < last) {
        send_lowered(out[i], ready[i],
                     pipeline_.stages[static_cast<std::size_t>(stage_ + 1)].device, "@send");
      } else if (rank_ == 0) {
        out_.add_output(ready[i]);
      } else {
        send_lowered(out[i], ready[i], 0, "@output");
      }
    }
  }

  const Pipeline& pipeline_;
  const int stage_;
  const int units_;
  const std::vector<int> unit_;     // by op index
  std::vector<int> producer_unit_;  // by value: the unit of the op that writes it, -1 if none
  std::vector<int> last_reader_;    // by value: the last unit reading it, units_ for outputs
  std::size_t op_index_ = 0;
  bool received_ = false;
  Range heads_{0, 0}, columns_{0, 0};  // a group stage: this member's heads and FFN columns
};

}  // namespace

Program lower_pipeline(const Graph& graph, const ModelConfig& config, const Plan& plan, int rank) {
  HUDDLE_CHECK(plan.pipeline.has_value() && rank >= 0 && rank < plan.num_devices());
  return PipelineLowering(graph, config, plan, rank).run();
}

}  // namespace huddle
