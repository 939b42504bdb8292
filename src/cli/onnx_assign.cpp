#include "cli/onnx_assign.h"

#include "core/error.h"
#include "plan/plan.h"
#include "runtime/assign_cnn.h"
#include "runtime/executor.h"
#include "runtime/trace.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>

namespace huddle::cli {

bool wants_assignment(const OnnxDistribution& o) {
  if (o.strategy == "assign") return true;
  return o.strategy.empty() && !o.plan_file.empty() && Plan::load(o.plan_file).op_assigned();
}

DistributedRun run_onnx_assigned(const onnx_import::OnnxModel& model,
                                 const std::map<std::string, Tensor>& inputs,
                                 const OnnxDistribution& o, int repeat) {
  if (!o.workers.empty() || o.local_devices > 1 || !o.cluster_file.empty()) {
    throw UsageError(
        "an imported CNN's operator assignment runs in this process (cpu1, cpuN): no remote "
        "provider takes its N-D values; drop --workers, --local-devices and --cluster");
  }
  if (!o.plan_file.empty() && !o.strategy.empty())
    throw UsageError("give --plan or --strategy, not both");
  DistributedRun result;
  Plan plan;
  std::string source = o.plan_file;
  if (o.plan_file.empty()) {
    if (o.providers.empty()) throw UsageError("--strategy assign needs --providers");
    const assign::AssignOutcome r =
        assign::plan_cnn_assignment(model, assign::parse_providers(o.providers), inputs);
    std::fprintf(stderr, "huddle: assign: %zu profiling runs, predicted %.3f ms\n",
                 r.node_runs + r.edge_runs, r.optimal.cost * 1e3);
    plan = r.plan;
    result.predicted_ms = r.optimal.cost * 1e3;
    source = "--strategy assign";
  } else {
    plan = Plan::load(o.plan_file);
  }
  if (!o.save_plan.empty()) plan.save(o.save_plan);
  const Program program = assign::lower_cnn_assignment(model, plan, source);
  Executor executor(program.graph, model.weights(), 0);
  TraceRecorder recorder;
  if (!o.trace.empty()) executor.set_observer(recorder.observer());
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    result.outputs = executor.run(inputs);
    result.run_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  if (!o.trace.empty()) write_chrome_trace(o.trace, {"primary"}, {recorder.spans()});
  result.strategy = plan.strategy;
  result.devices = {"primary"};
  return result;
}

}  // namespace huddle::cli
