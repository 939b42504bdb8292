#include "planner/online_estimator.h"

#include "core/error.h"
#include "planner/planners.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace huddle {

OnlineEstimator::OnlineEstimator(const CostModel& cost, ClusterSpec initial, double smoothing)
    : cost_(cost),
      initial_(initial),
      current_(std::move(initial)),
      smoothing_(smoothing),
      factor_(static_cast<std::size_t>(current_.size()), 1.0),
      timed_(factor_),
      first_share_(factor_.size(), 0.0),
      share_(factor_.size(), 0.0) {
  for (int i = 0; i < initial_.size(); ++i)
    first_share_[static_cast<std::size_t>(i)] = initial_.device(i).quota_share;
  HUDDLE_CHECK(smoothing > 0 && smoothing <= 1);
}

bool OnlineEstimator::observe(const Plan& plan, std::int64_t tokens, std::int64_t context,
                              const std::vector<DeviceObservation>& devices, double min_compute_s) {
  // The step's quotas first: current_ then holds the speeds the step ran at, less what timing
  // will show, and factor_ x expected / measured is the device's speed over the initial one.
  observe_resources(plan, devices);
  ++steps_;
  std::vector<DevicePrediction> predicted;
  const double predicted_s = cost_.simulate_step(plan, current_, tokens, context, &predicted);
  double wall_s = 0;
  for (const DeviceObservation& seen : devices) wall_s = std::max(wall_s, seen.wall_s);
  const bool stalled = predicted_s > 0 && wall_s > kStallFactor * predicted_s;
  const bool first_stall = stalled && !last_step_stalled_;
  last_step_stalled_ = stalled;
  if (first_stall) return false;
  for (int d = 0; d < plan.num_devices(); ++d) {
    const DeviceObservation& seen = devices[static_cast<std::size_t>(d)];
    const int index = current_.index_of(plan.devices[static_cast<std::size_t>(d)]);
    const double expected = predicted[static_cast<std::size_t>(d)].compute_s;
    const auto i = static_cast<std::size_t>(index);
    const bool throttled = seen.cpu_share > 0 && seen.cpu_share < 1;
    if (expected > 0 && seen.compute_s >= min_compute_s && !throttled) {
      // Smoothed in log space: a device measured 2x slower twice ends at 2x, not 4x. Kept net of
      // the CPU share, which update_speed applies.
      const double step_timed = factor_[i] * expected / seen.compute_s / share_ratio(index);
      timed_[i] =
          std::exp((1 - smoothing_) * std::log(timed_[i]) + smoothing_ * std::log(step_timed));
      update_speed(index);
    }
  }
  return true;
}

void OnlineEstimator::observe_resources(const Plan& plan,
                                        const std::vector<DeviceObservation>& devices) {
  HUDDLE_CHECK(static_cast<int>(devices.size()) == plan.num_devices());
  for (int d = 0; d < plan.num_devices(); ++d) {
    const DeviceObservation& seen = devices[static_cast<std::size_t>(d)];
    const int index = current_.index_of(plan.devices[static_cast<std::size_t>(d)]);
    const auto i = static_cast<std::size_t>(index);
    if (seen.cpu_share > 0 && seen.cpu_share != share_[i]) {
      const double ratio_before = share_ratio(index);
      if (first_share_[i] == 0) first_share_[i] = seen.cpu_share;
      share_[i] = seen.cpu_share;
      if (share_ratio(index) != ratio_before) ++quota_revision_;
      update_speed(index);
    }
    if (seen.free_memory_bytes <= 0) continue;  // not reported
    const auto headroom = static_cast<std::int64_t>(
        kMemoryHeadroom * static_cast<double>(initial_.device(index).memory_bytes));
    current_.mutable_device(index).memory_bytes =
        std::max<std::int64_t>(0, seen.free_memory_bytes + seen.held_bytes - headroom);
  }
}

double OnlineEstimator::share_ratio(int index) const {
  const auto i = static_cast<std::size_t>(index);
  return first_share_[i] > 0 && share_[i] > 0 ? share_[i] / first_share_[i] : 1.0;
}

void OnlineEstimator::update_speed(int index) {
  const auto i = static_cast<std::size_t>(index);
  factor_[i] = timed_[i] * share_ratio(index);
  DeviceSpec updated = initial_.device(index);
  updated.scale_speed(factor_[i]);
  updated.memory_bytes = current_.device(index).memory_bytes;
  current_.mutable_device(index) = updated;
}

std::string memory_mode(const Plan& plan) {
  if (plan.tiled_2d()) return "2d-tiled";
  for (const LayerPlan& layer : plan.layers) {
    if (layer.mlp != BlockSplit::Tokens) return "1d-tiled";
  }
  return "weight-stationary";
}

ReplanAdvice advise_replan(const CostModel& cost, const OnlineEstimator& estimate,
                           const Plan& current, const std::string& strategy, std::int64_t seq_len,
                           double threshold) {
  ReplanAdvice advice;
  const ClusterSpec& cluster = estimate.cluster();
  advice.mode_before = memory_mode(current);
  std::string memory;  // which device the current plan no longer fits, for the log line
  try {
    const Prediction now = cost.predict(current, cluster, seq_len);
    advice.current_s = now.latency_s;
    if (const int over = now.first_over_budget(cluster); over >= 0) {
      const DevicePrediction& d = now.devices[static_cast<std::size_t>(over)];
      advice.memory = true;
      memory = fmt::format("{} has {:.1f} MB for the model and the {} plan needs {:.1f} MB; ",
                           d.name, cluster.device(cluster.index_of(d.name)).memory_bytes / 1e6,
                           advice.mode_before, d.memory.total() / 1e6);
    }
  } catch (const PlanError& e) {
    advice.reason = fmt::format("keeping the plan: {}", e.what());
    return advice;
  }
  // What the estimate learned, for the log line.
  std::string changes;
  for (int i = 0; i < cluster.size(); ++i) {
    const double f = estimate.speed_factor(i);
    if (std::abs(f - 1) > 0.1) {
      changes += fmt::format("{}{} computes at {:.2f}x its profiled speed",
                             changes.empty() ? "" : "; ", cluster.device(i).name, f);
    }
  }
  if (changes.empty()) changes = "every device computes within 10% of its profiled speed";
  try {
    const PlanResult result =
        run_planner(strategy, PlanRequest{cost, cluster, seq_len, std::nullopt});
    advice.plan = result.runnable();
    advice.proposed_s = result.prediction.latency_s;
  } catch (const PlanError& e) {
    advice.reason = fmt::format("{}{}; no new plan: {}", memory, changes, e.what());
    return advice;
  }
  advice.mode_after = memory_mode(*advice.plan);
  const bool same = advice.plan->to_json() == current.to_json();
  const double gain = advice.current_s / advice.proposed_s - 1;
  const bool back_to_ws =
      advice.mode_after == "weight-stationary" && advice.mode_before != advice.mode_after;
  advice.replan = !same && (gain > threshold || advice.memory || back_to_ws);
  if (advice.replan) {
    advice.cause = advice.memory ? "memory" : back_to_ws ? "memory returned" : "speed";
  }
  advice.reason = fmt::format(
      "{}{}; current plan predicted {:.1f} ms, {} plan {:.1f} ms ({:+.0f}%, threshold {:.0f}%)",
      memory, changes, advice.current_s * 1e3, strategy, advice.proposed_s * 1e3, gain * 100,
      threshold * 100);
  if (advice.mode_before != advice.mode_after) {
    advice.reason += fmt::format("; mode {} -> {}", advice.mode_before, advice.mode_after);
  }
  if (same) advice.reason += "; the planner proposes the same plan";
  return advice;
}

}  // namespace huddle
