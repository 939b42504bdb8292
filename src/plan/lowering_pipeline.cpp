#include "plan/lowering_pipeline.h"

#include "core/error.h"
#include "plan/lowering_engine.h"

#include <fmt/format.h>

#include <algorithm>

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
  Range my_units() const { return pipeline_.stages[static_cast<std::size_t>(stage_)].units; }

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

  // Stage s > 0 starts by receiving what crosses its first cut from stage s - 1.
  void receive_inputs() {
    if (received_) return;
    received_ = true;
    if (stage_ == 0) return;
    const int from = pipeline_.stages[static_cast<std::size_t>(stage_ - 1)].device;
    for (ValueId v : crossing(my_units().first)) {
      const Value& value = g_.value(v);
      OpAttrs attrs;
      attrs.peer = from;
      attrs.width = value.shape.back();
      lowered_[v] = {emit(OpKind::PipeRecv, value.name + "@recv",
                          {get(ids_input(), Layout::Replicated)}, attrs, OpRole::Other),
                     Layout::Replicated};
    }
  }

  void send(ValueId v, int to, const std::string& suffix) {
    OpAttrs attrs;
    attrs.peer = to;
    emit(OpKind::PipeSend, g_.value(v).name + suffix, {get(v, Layout::Replicated)}, attrs,
         OpRole::Other);
  }

  void lower_op(const Op& op) override {
    const int u = unit_[op_index_++];
    if (stage_ < 0 || u < my_units().first || u >= my_units().second) return;
    receive_inputs();
    for (ValueId in : op.inputs) {
      const Value& v = g_.value(in);
      if (v.kind == ValueKind::Activation && !lowered_.contains(in)) {
        throw PlanError(
            fmt::format("op '{}' (unit {}) reads '{}', which no earlier stage "
                        "passes on",
                        op.name, u, v.name));
      }
    }
    same_op(op, Layout::Replicated);
  }

  ValueId move(ValueId id, ValueId, Layout have, Layout want, const std::string&) override {
    throw PlanError(fmt::format("pipeline lowering cannot move '{}' from {} to {}",
                                g_.value(id).name, layout_name(have), layout_name(want)));
  }

  void finish() override {
    if (stage_ < 0) return;
    receive_inputs();  // a stage whose units hold no op still passes values on
    const std::size_t last = pipeline_.stages.size() - 1;
    if (static_cast<std::size_t>(stage_) < last) {
      const int to = pipeline_.stages[static_cast<std::size_t>(stage_ + 1)].device;
      for (ValueId v : crossing(my_units().second)) send(v, to, "@send");
      return;
    }
    for (ValueId o : g_.outputs()) {
      if (rank_ == 0) {
        out_.add_output(get(o, Layout::Replicated));
      } else {
        send(o, 0, "@output");
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
};

}  // namespace

Program lower_pipeline(const Graph& graph, const ModelConfig& config, const Plan& plan, int rank) {
  HUDDLE_CHECK(plan.pipeline.has_value() && rank >= 0 && rank < plan.num_devices());
  return PipelineLowering(graph, config, plan, rank).run();
}

}  // namespace huddle
