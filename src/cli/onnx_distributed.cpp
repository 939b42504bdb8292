#include "cli/onnx_distributed.h"

#include "cli/local_workers.h"
#include "core/error.h"
#include "graph/channels_last.h"
#include "net/key.h"
#include "plan/plan.h"
#include "plan/row_graph.h"
#include "planner/cluster.h"
#include "planner/row_calibration.h"
#include "planner/row_planners.h"
#include "runtime/cluster.h"
#include "runtime/executor.h"
#include "runtime/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>

namespace huddle::cli {
namespace {

// Devices of equal speed on 1 Gbit/s links: what is planned for without a cluster file.
ClusterSpec equal_devices(int count) {
  std::vector<DeviceSpec> devices;
  for (int d = 0; d < count; ++d) {
    DeviceSpec s;
    s.name = d == 0 ? "primary" : fmt::format("device{}", d);
    s.gflops = s.attention_gflops = s.mlp_gflops = s.connection_gflops = 50;
    s.memory_bytes = std::int64_t{8} << 30;
    devices.push_back(s);
  }
  return ClusterSpec::uniform(std::move(devices), LinkSpec{1e9, 2e-4});
}

// Times every row layer and tail op of `model` on this device: a warm-up run (kernel set-up,
// oneDNN primitive creation), then a traced run, channels-last as the row units run
// (graph/channels_last.h; an op computing a graph output is named "<name>/nhwc" there).
RowProfile profile_layers(const onnx_import::OnnxModel& model,
                          const std::map<std::string, Tensor>& inputs, const rows::RowGraph& graph,
                          double& total_ms) {
  const Graph layout = to_channels_last(model.graph());
  Executor executor(layout, model.weights(), 0);
  executor.run(inputs);
  TraceRecorder recorder;
  executor.set_observer(recorder.observer());
  const auto start = std::chrono::steady_clock::now();
  executor.run(inputs);
  total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::map<std::string, double> seconds;
  for (const Span& s : recorder.spans()) seconds[s.name] += s.duration_us * 1e-6;
  const auto measured = [&](std::size_t op) {
    const Op& o = model.graph().ops()[op];
    const auto& outs = model.graph().outputs();
    const bool renamed = layout.find(o.name + "/nhwc") &&
                         std::find(outs.begin(), outs.end(), o.output) != outs.end();
    const auto it = seconds.find(renamed ? o.name + "/nhwc" : o.name);
    return it == seconds.end() ? -1.0 : it->second;
  };
  RowProfile profile;
  for (const rows::RowLayer& layer : graph.layers) profile.layer_s.push_back(measured(layer.op));
  for (const rows::TailOp& t : graph.tail) profile.tail_s.push_back(measured(t.op));
  return profile;
}

// Runs the rows-proportional plan of `graph` on `cluster` (every device gets rows in proportion to
// its speed, so every device is timed) `runs` + 1 times, a warm-up first, with each op's CPU time
// traced, and returns `cluster` with each device's speed scaled by what it delivered
// (planner/row_calibration.h).
ClusterSpec calibrate_speeds(const onnx_import::OnnxModel& model,
                             const std::map<std::string, Tensor>& inputs,
                             const rows::RowGraph& graph, const ClusterSpec& cluster,
                             WireFormat wire, ClusterOptions options, int runs,
                             RowSpeedCalibration& calibration) {
  const Plan plan = make_row_split_plan("rows-proportional", graph, cluster, wire);
  options.trace = true;
  Cluster session(model, plan, std::move(options));
  for (int i = 0; i <= runs; ++i) session.run(inputs);
  std::vector<double> shares;
  for (const StepReport& r : session.last_reports()) shares.push_back(r.cpu_share);
  const std::vector<std::vector<Span>> spans = session.finish();
  std::vector<std::vector<double>> measured(static_cast<std::size_t>(runs));
  for (const std::vector<Span>& device : spans) {
    const std::vector<double> by_run = compute_cpu_by_run_s(device, runs + 1);
    for (int r = 0; r < runs; ++r)
      measured[static_cast<std::size_t>(r)].push_back(by_run[static_cast<std::size_t>(r + 1)]);
  }
  calibration =
      calibrate_row_speeds(predict_rows(graph, cluster, *plan.rows, wire), shares, measured);
  return with_speed_factors(cluster, calibration.factors);
}

}  // namespace

DistributedRun run_onnx_distributed(const onnx_import::OnnxModel& model,
                                    const std::map<std::string, Tensor>& inputs,
                                    const OnnxDistribution& o, int repeat, int threads) {
  if (!o.workers.empty() && o.local_devices > 1)
    throw UsageError("give --workers or --local-devices, not both");
  if (!o.workers.empty() && o.key_file.empty()) throw UsageError("--workers needs --key-file");
  if (!o.plan_file.empty() && !o.strategy.empty())
    throw UsageError("give --plan or --strategy, not both");
  if (o.calibrate_runs > 0 && !o.plan_file.empty())
    throw UsageError("--calibrate plans anew: give it without --plan");
  if (o.calibrate_runs == 0 && !o.save_cluster.empty())
    throw UsageError("--save-cluster writes the cluster --calibrate measured: give both");
  std::unique_ptr<LocalWorkers> local;
  std::vector<std::string> workers = o.workers;
  if (o.local_devices > 1) {
    local = std::make_unique<LocalWorkers>(o.local_devices - 1, o.timeout_s, threads);
    workers = local->addresses();
  }
  const int devices = static_cast<int>(workers.size()) + 1;
  ClusterSpec cluster =
      o.cluster_file.empty() ? equal_devices(devices) : ClusterSpec::load(o.cluster_file);
  if (cluster.size() != devices) {
    throw UsageError(fmt::format("{} lists {} devices; give its {} workers (in its order)",
                                 o.cluster_file, cluster.size(), cluster.size() - 1));
  }
  DistributedRun result;
  rows::RowGraph graph = rows::build_row_graph(model.graph());
  if (o.profile_layers) {
    graph = calibrate_row_graph(graph, cluster,
                                profile_layers(model, inputs, graph, result.profile_ms));
  }
  Plan plan;
  if (!o.plan_file.empty()) {
    plan = Plan::load(o.plan_file);
    plan.validate(graph, o.plan_file);
    if (o.wire && *o.wire != plan.wire) {
      throw UsageError(fmt::format("--wire {}: the plan {} says \"wire\": \"{}\"",
                                   wire_format_name(*o.wire), o.plan_file,
                                   wire_format_name(plan.wire)));
    }
  }
  const WireFormat wire = o.plan_file.empty() ? o.wire.value_or(WireFormat::F32) : plan.wire;
  // An image's rows travel at a byte per value (palette-coded): plans and predictions know it.
  if (wire == WireFormat::F32) graph = rows::with_palette_inputs(graph, model.graph(), inputs);
  if (devices == 1)
    throw UsageError("a row-split run needs workers (--workers or --local-devices)");
  const std::string key_file = local ? local->key_file().string() : o.key_file;
  const auto cluster_options = [&] {
    ClusterOptions options;
    options.workers = workers;
    options.key = net::load_key_file(key_file);
    options.timeout = net::Duration(static_cast<std::int64_t>(o.timeout_s * 1000));
    options.link.latency = net::Duration(o.link_latency_ms);
    options.link.bytes_per_second = o.link_mbps * 1e6 / 8;
    return options;
  };
  if (o.calibrate_runs > 0) {
    cluster = calibrate_speeds(model, inputs, graph, cluster, wire, cluster_options(),
                               o.calibrate_runs, result.calibration);
    if (!o.save_cluster.empty()) cluster.save(o.save_cluster);
  }
  if (o.plan_file.empty())
    plan = make_row_split_plan(o.strategy.empty() ? "edgeflow" : o.strategy, graph, cluster, wire);
  if (plan.num_devices() != devices) {
    throw UsageError(
        fmt::format("the plan has {} devices but {} are given (this primary and {} workers)",
                    plan.num_devices(), devices, devices - 1));
  }
  if (!o.save_plan.empty()) plan.save(o.save_plan);
  result.strategy = plan.strategy;
  result.predicted_ms = predict_rows(graph, cluster, *plan.rows, plan.wire).latency_s * 1e3;

  ClusterOptions options = cluster_options();
  options.trace = !o.trace.empty();
  Cluster session(model, plan, std::move(options));
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    result.outputs = session.run(inputs);
    result.run_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  for (const StepReport& r : session.last_reports()) {
    result.bytes_sent.push_back(r.bytes_sent);
    result.compute_ms.push_back(r.compute_s * 1e3);
  }
  for (const DeviceReport& d : session.devices()) result.weight_bytes.push_back(d.weight_bytes);
  result.devices = {"primary"};
  result.devices.insert(result.devices.end(), workers.begin(), workers.end());
  const auto spans = session.finish();
  if (!o.trace.empty()) {
    write_chrome_trace(o.trace, result.devices, spans);
    for (const auto& device_spans : spans)
      result.exposed_comm_ms.push_back(exposed_comm_us(device_spans) / 1000.0 / repeat);
  }
  return result;
}

}  // namespace huddle::cli
