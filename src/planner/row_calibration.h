// Calibrating a cluster file's device speeds for row-split plans from a run on the devices.
//
// EdgeFlow profiles every device (its Y_i per device). A cluster file gives each device a speed
// (on the testbed: its CPU quota x one core's GFLOP/s) and `--profile-layers` the cost of every
// layer on device 0; what neither sees is what a device delivers while all of them run at once:
// on the testbed's boards, 1.05-1.40x the CPU per row of a device alone (quota stalls, caches
// shared by six processes on two cores; docs/benchmarks.md, "A lead"). Calibration runs a plan
// that gives every device rows, compares the CPU time each device spent in its compute ops with
// the simulator's compute time (row_simulator.h, RowPrediction::busy_s) at the device's CPU share,
// and scales the device's speed by the ratio, so that the plan made afterwards balances what the
// devices deliver.
//
// CPU time, not wall time: a device held to 0.15 core by a quota runs each op at a whole core's
// speed until its period's quota is spent, so an op's wall time says little of its throughput
// (measured on the testbed: the boards' compute ops took 1/2 to 1/5 of the quota-scaled
// prediction's wall time while the runs took as long as predicted). Its quota's share of CPU
// time is what it delivers over a run, and that is what the cluster file's speed models.
#pragma once

#include "planner/cluster.h"
#include "planner/row_simulator.h"

#include <vector>

namespace huddle {

struct RowSpeedCalibration {
  std::vector<double> predicted_s;  // per device: the simulator's compute seconds x CPU share
  std::vector<double> measured_s;   // per device: the median over the runs of its compute CPU
  // Per device: delivered speed over the cluster file's (predicted / measured); 1 where either
  // is below the threshold (a device with no rows, or too little work to time).
  std::vector<double> factors;
};

// `cpu_share`: per device the share of its threads' CPU time its quota allows, in (0, 1]
// (StepReport::cpu_share; 1 without a quota, 0: unknown, taken as 1). `measured_cpu_s`:
// [run][device] each device's process CPU seconds in its compute ops while running the plan
// `predicted` was made for (runtime/trace.h, compute_cpu_by_run_s). PlanError when the sizes
// differ or there is no run.
RowSpeedCalibration calibrate_row_speeds(const RowPrediction& predicted,
                                         const std::vector<double>& cpu_share,
                                         const std::vector<std::vector<double>>& measured_cpu_s,
                                         double min_s = 1e-4);

// `cluster` with device d's speeds (DeviceSpec::scale_speed) multiplied by factors[d]. PlanError
// when the sizes differ or a factor is not positive.
ClusterSpec with_speed_factors(const ClusterSpec& cluster, const std::vector<double>& factors);

}  // namespace huddle
