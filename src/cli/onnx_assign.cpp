#include "cli/onnx_assign.h"

#include "core/error.h"
#include "net/key.h"
#include "plan/plan.h"
#include "runtime/assign_cnn.h"
#include "runtime/cluster.h"
#include "runtime/executor.h"
#include "runtime/trace.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <optional>

namespace huddle::cli {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// The plan's remote devices as a session with their workers: --workers if given (in the plan's
// device order), else the plan's own addresses.
void run_with_workers(const onnx_import::OnnxModel& model, const Plan& plan,
                      const std::map<std::string, Tensor>& inputs, const OnnxDistribution& o,
                      int repeat, DistributedRun& result) {
  if (o.key_file.empty())
    throw UsageError(
        fmt::format("the plan has {} remote devices: give --key-file", plan.num_devices() - 1));
  ClusterOptions options;
  options.workers = o.workers;
  if (options.workers.empty()) options.workers.assign(plan.devices.begin() + 1, plan.devices.end());
  options.key = net::load_key_file(o.key_file);
  options.timeout = net::Duration(static_cast<std::int64_t>(o.timeout_s * 1000));
  options.trace = !o.trace.empty();
  Cluster session(model, plan, std::move(options));
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    result.outputs = session.run(inputs);
    result.run_ms.push_back(ms_since(start));
  }
  for (const StepReport& r : session.last_reports()) {
    result.bytes_sent.push_back(r.bytes_sent);
    result.compute_ms.push_back(r.compute_s * 1e3);
  }
  for (const DeviceReport& d : session.devices()) result.weight_bytes.push_back(d.weight_bytes);
  result.devices = plan.devices;
  const auto spans = session.finish();
  if (!o.trace.empty()) write_chrome_trace(o.trace, result.devices, spans);
}

}  // namespace

bool wants_assignment(const OnnxDistribution& o) {
  if (o.strategy == "assign") return true;
  return o.strategy.empty() && !o.plan_file.empty() && Plan::load(o.plan_file).op_assigned();
}

DistributedRun run_onnx_assigned(const onnx_import::OnnxModel& model,
                                 const std::map<std::string, Tensor>& inputs,
                                 const OnnxDistribution& o, int repeat) {
  if (o.local_devices > 1 || !o.cluster_file.empty()) {
    throw UsageError(
        "an operator assignment runs on its plan's providers: remote ones are `huddle worker`s "
        "(--workers, --key-file); drop --local-devices and --cluster");
  }
  if (!o.plan_file.empty() && !o.strategy.empty())
    throw UsageError("give --plan or --strategy, not both");
  DistributedRun result;
  Plan plan;
  std::string source = o.plan_file;
  if (o.plan_file.empty()) {
    if (o.providers.empty()) throw UsageError("--strategy assign needs --providers");
    const std::vector<assign::Provider> providers = assign::parse_providers(o.providers);
    std::optional<net::PresharedKey> key;
    if (!o.key_file.empty()) key = net::load_key_file(o.key_file);
    if (!assign::remote_addresses(providers).empty() && !key)
      throw UsageError("a remote provider needs --key-file");
    const assign::AssignOutcome r =
        assign::plan_cnn_assignment(model, providers, inputs, 3, key ? &*key : nullptr);
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
  result.strategy = plan.strategy;
  if (plan.num_devices() > 1) {
    run_with_workers(model, plan, inputs, o, repeat, result);
    return result;
  }
  if (!o.workers.empty()) {
    // A profiled plan that uses no remote runs in process (assign::trimmed_assignment_plan).
    if (!o.plan_file.empty())
      throw UsageError(fmt::format("{}: the plan has no remote provider; drop --workers", source));
    std::fprintf(stderr, "huddle: assign: no op on a remote; running in process\n");
  }
  Executor executor(program.graph, model.weights(), 0);
  TraceRecorder recorder;
  if (!o.trace.empty()) executor.set_observer(recorder.observer());
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    result.outputs = executor.run(inputs);
    result.run_ms.push_back(ms_since(start));
  }
  if (!o.trace.empty()) write_chrome_trace(o.trace, {"primary"}, {recorder.spans()});
  result.devices = {"primary"};
  return result;
}

}  // namespace huddle::cli
