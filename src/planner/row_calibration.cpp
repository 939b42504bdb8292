#include "planner/row_calibration.h"

#include "core/error.h"
#include "core/statistics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace huddle {

RowSpeedCalibration calibrate_row_speeds(const RowPrediction& predicted,
                                         const std::vector<double>& cpu_share,
                                         const std::vector<std::vector<double>>& measured_cpu_s,
                                         double min_s) {
  if (measured_cpu_s.empty()) throw PlanError("calibrating device speeds needs at least one run");
  const std::size_t devices = predicted.busy_s.size();
  if (cpu_share.size() != devices) {
    throw PlanError(
        fmt::format("{} CPU shares for a plan of {} devices", cpu_share.size(), devices));
  }
  for (const std::vector<double>& run : measured_cpu_s) {
    if (run.size() != devices)
      throw PlanError(
          fmt::format("a run measured {} devices; the plan has {}", run.size(), devices));
  }
  RowSpeedCalibration out;
  for (std::size_t d = 0; d < devices; ++d) {
    const double share = cpu_share[d] > 0 ? std::min(1.0, cpu_share[d]) : 1.0;
    const double predicted_cpu = predicted.busy_s[d] * share;
    std::vector<double> runs;
    for (const std::vector<double>& run : measured_cpu_s) runs.push_back(run[d]);
    const double measured = median(runs);
    out.predicted_s.push_back(predicted_cpu);
    out.measured_s.push_back(measured);
    const bool timed = measured >= min_s && predicted_cpu >= min_s;
    out.factors.push_back(timed ? predicted_cpu / measured : 1.0);
  }
  return out;
}

ClusterSpec with_speed_factors(const ClusterSpec& cluster, const std::vector<double>& factors) {
  if (static_cast<int>(factors.size()) != cluster.size()) {
    throw PlanError(fmt::format("{} speed factors for a cluster of {} devices", factors.size(),
                                cluster.size()));
  }
  ClusterSpec out = cluster;
  for (int d = 0; d < cluster.size(); ++d) {
    const double f = factors[static_cast<std::size_t>(d)];
    if (!(f > 0) || !std::isfinite(f)) {
      throw PlanError(fmt::format("device {} ({}): speed factor {} is not positive", d,
                                  cluster.device(d).name, f));
    }
    out.mutable_device(d).scale_speed(f);
  }
  return out;
}

}  // namespace huddle
