#include "runtime/assign_cnn.h"

#include "core/error.h"
#include "plan/lowering_assign.h"
#include "plan/row_graph.h"
#include "planner/assign_planner.h"
#include "runtime/cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace huddle::assign {

PlanModel cnn_plan_model(const Graph& graph) {
  return PlanModel::of(rows::build_row_graph(graph));
}

std::map<std::string, Tensor> profiling_inputs(const onnx_import::OnnxModel& model) {
  std::map<std::string, Tensor> out;
  for (const onnx_import::TensorInfo& in : model.inputs()) {
    Tensor t = Tensor::empty(DType::F32, in.shape);
    for (std::int64_t i = 0; i < t.numel(); ++i)
      t.f32()[i] = std::sin(0.37f * static_cast<float>(i));
    out.emplace(in.name, std::move(t));
  }
  return out;
}

AssignOutcome plan_cnn_assignment(const onnx_import::OnnxModel& model,
                                  const std::vector<Provider>& providers,
                                  const std::map<std::string, Tensor>& inputs, int repeats,
                                  const net::PresharedKey* key) {
  if (providers.empty()) throw InputError("the provider list is empty");
  HUDDLE_CHECK(repeats >= 1);
  const Graph& graph = model.graph();
  const PlanModel facts = cnn_plan_model(graph);
  // Concrete shapes: the DCG's bytes do not depend on the token count.
  return assign_with(
      graph, facts, providers, /*tokens=*/1,
      [&](const Dcg& dcg, const std::vector<Assignment>& runs, std::vector<MeasuredRun>* measured) {
        require_key_for_remotes(providers, runs, key);
        const auto forwards = time_runs_in_passes(runs.size(), repeats, [&](std::size_t r) {
          const Plan plan = assignment_plan(facts, graph, providers, runs[r]);
          if (uses_remote(providers, runs[r])) {
            Cluster cluster(model, plan, profiling_cluster_options(providers, *key));
            return time_cluster_runs(cluster, 1, [&](Cluster& c) { (void)c.run(inputs); });
          }
          const Program program = lower_assign(graph, ModelConfig{}, plan, 0);
          return time_local_runs(program.graph, model.weights(), 0, 1,
                                 [&](Executor& e) { (void)e.run(inputs); });
        });
        return costs_from_forwards(graph, dcg, providers, runs, forwards, measured);
      });
}

Program lower_cnn_assignment(const onnx_import::OnnxModel& model, const Plan& plan,
                             const std::string& source, int rank) {
  if (!plan.op_assigned()) {
    throw PlanError(
        fmt::format("{}: not an operator-assignment plan (strategy '{}')", source, plan.strategy));
  }
  plan.validate(rows::build_row_graph(model.graph()), source);
  plan.assignment->validate(model.graph(), source);
  return lower_assign(model.graph(), ModelConfig{}, plan, rank);
}

}  // namespace huddle::assign
