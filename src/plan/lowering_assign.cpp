#include "plan/lowering_assign.h"

#include "core/error.h"
#include "plan/assign_providers.h"
#include "plan/lowering_engine.h"

#include <fmt/format.h>

#include <set>

namespace huddle {
namespace {

using lowering::Layout;
using lowering::LoweringEngine;

class AssignLowering final : public LoweringEngine {
 public:
  AssignLowering(const Graph& g, const ModelConfig& c, const Plan& p, int rank)
      : LoweringEngine(g, c, p, rank), providers_(p.assignment->parsed_providers()) {
    p.assignment->validate(g, "plan");
    const std::vector<int> by_op = p.assignment->by_op(g);
    std::vector<int> producer_device(g.values().size(), -1);
    readers_.resize(g.values().size());
    for (std::size_t i = 0; i < g.ops().size(); ++i) {
      const Op& op = g.ops()[i];
      const assign::Provider& pr = providers_[static_cast<std::size_t>(by_op[i])];
      device_.push_back(pr.device);
      serial_.push_back(pr.kind == assign::ProviderKind::Cpu1);
      for (ValueId in : op.inputs) readers_[static_cast<std::size_t>(in)].insert(pr.device);
    }
    for (ValueId o : g.outputs()) readers_[static_cast<std::size_t>(o)].insert(0);
  }

 private:
  void lower_op(const Op& op) override {
    const std::size_t i = op_index_++;
    const int on = device_[i];
    if (on == rank_) {
      std::vector<ValueId> inputs;
      for (ValueId in : op.inputs) inputs.push_back(get(in, Layout::Replicated));
      OpAttrs attrs = op.attrs;
      attrs.threads = serial_[i] ? 1 : 0;
      define(op, emit(op.kind, op.name, std::move(inputs), attrs, op.role, op.layer),
             Layout::Replicated);
    }
    const Value& v = g_.value(op.output);
    for (int to : readers_[static_cast<std::size_t>(op.output)]) {
      if (to == on || (rank_ != on && rank_ != to)) continue;
      if (!assign::movable_value(v)) {
        throw PlanError(
            fmt::format("op '{}' on device {} writes '{}' ({}), which device {} reads; only "
                        "[tokens, width] activations and concrete N-D ones move between devices",
                        op.name, on, v.name, shape_str(v.shape), to));
      }
      OpAttrs attrs;
      if (rank_ == on) {
        attrs.peer = to;
        emit(OpKind::PipeSend, fmt::format("{}@send{}", v.name, to),
             {get(op.output, Layout::Replicated)}, attrs, OpRole::Other);
      } else {
        attrs.peer = on;
        std::vector<ValueId> ids;  // [tokens, width]: the ids give the row count
        if (v.shape[0] == kTokens) {
          attrs.width = v.shape.back();
          ids.push_back(get(ids_input(), Layout::Replicated));
        } else {
          attrs.shape = v.shape;  // concrete (an imported graph's): token-less
        }
        define(op, emit(OpKind::PipeRecv, v.name + "@recv", std::move(ids), attrs, OpRole::Other),
               Layout::Replicated);
      }
    }
  }

  ValueId move(ValueId id, ValueId, Layout have, Layout want, const std::string&) override {
    throw PlanError(fmt::format("assignment lowering cannot move '{}' from {} to {}",
                                g_.value(id).name, layout_name(have), layout_name(want)));
  }

  void finish() override {
    if (rank_ != 0) return;
    for (ValueId o : g_.outputs()) out_.add_output(get(o, Layout::Replicated));
  }

  const std::vector<assign::Provider> providers_;
  std::vector<int> device_;             // by op
  std::vector<bool> serial_;            // by op: on cpu1
  std::vector<std::set<int>> readers_;  // by value: devices of the ops reading it (+0: output)
  std::size_t op_index_ = 0;
};

}  // namespace

Program lower_assign(const Graph& graph, const ModelConfig& config, const Plan& plan, int rank) {
  HUDDLE_CHECK(plan.assignment.has_value() && rank >= 0 && rank < plan.num_devices());
  return AssignLowering(graph, config, plan, rank).run();
}

}  // namespace huddle
