// `huddle run --model M.onnx` across devices: a row-split plan (EdgeFlow or a baseline, or a
// saved one) run by a Cluster of workers given with --workers or started with --local-devices.
#pragma once

#include "core/wire_format.h"

#include "core/tensor.h"
#include "onnx/onnx_model.h"
#include "planner/row_calibration.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace huddle::cli {

struct OnnxDistribution {
  std::vector<std::string> workers;  // HOST:PORT, devices 1..n-1
  std::string key_file;
  int local_devices = 1;     // > 1: start local workers instead
  std::string strategy;      // a row strategy (default edgeflow), or
  std::string plan_file;     // a saved row-split plan (or an assignment plan: cli/onnx_assign.h)
  std::string providers;     // --strategy assign: execution providers (cpu1, cpuN)
  std::string cluster_file;  // devices and links to plan for (default: equal devices, 1 Gbit/s)
  std::string save_plan;
  std::optional<WireFormat>
      wire;           // --wire: rows exchanged in this form (unset: f32, or the plan's)
  std::string trace;  // Chrome trace events per device and op (every run of the session)
  double timeout_s = 10;
  int link_latency_ms = 0;
  double link_mbps = 0;
  // Before planning, time every layer on this device (a warm-up run and a timed run of the whole
  // model) and plan with the measured layer costs (planner/row_costs.h, RowProfile).
  bool profile_layers = false;
  // > 0: before planning, run a rows-proportional plan on the devices (a warm-up and this many
  // timed runs) and plan with each device's speed scaled by what it delivered
  // (planner/row_calibration.h); `save_cluster` (optional) receives the calibrated cluster file.
  int calibrate_runs = 0;
  std::string save_cluster;

  bool active() const {
    return !workers.empty() || local_devices > 1 || !plan_file.empty() || !strategy.empty() ||
           calibrate_runs > 0 || !save_cluster.empty();
  }
};

struct DistributedRun {
  std::map<std::string, Tensor> outputs;  // of the last run
  std::vector<double> run_ms;             // every run, wall time on the primary
  std::string strategy;
  std::vector<std::string> devices;         // primary first
  std::vector<std::uint64_t> bytes_sent;    // per device, in the last run
  std::vector<double> compute_ms;           // per device, in the last run (its compute ops)
  std::vector<std::uint64_t> weight_bytes;  // per device: the weights its units hold
  std::vector<double> exposed_comm_ms;      // per device, per run, with --trace
  double predicted_ms = 0;                  // the planner's simulation of the plan
  double profile_ms = 0;                    // with profile_layers: the timed local run
  RowSpeedCalibration calibration;          // with calibrate_runs (else empty)
};

// Plans (or loads) the row split of `model` and runs `inputs` `repeat` times in one session.
// UsageError for inconsistent options, PlanError for a plan that does not fit the model or the
// devices, TransportError naming a worker that fails.
DistributedRun run_onnx_distributed(const onnx_import::OnnxModel& model,
                                    const std::map<std::string, Tensor>& inputs,
                                    const OnnxDistribution& options, int repeat, int threads);

}  // namespace huddle::cli
