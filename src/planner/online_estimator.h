// Online re-estimation (Hepti §4.1): while a cluster serves, the primary compares what each device
// reports of each step (its compute time, its free memory) with what the cost model predicted
// for it, and keeps a running estimate of the cluster; between requests it re-plans when the
// estimate says another plan is faster by more than a threshold.
#pragma once

#include "plan/plan.h"
#include "planner/cluster.h"
#include "planner/cost_model.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace huddle {

// What one device measured of one step (plan order).
struct DeviceObservation {
  double compute_s = 0;                // time in its compute ops
  std::int64_t free_memory_bytes = 0;  // 0: not reported
  std::int64_t held_bytes = 0;         // the model's bytes it holds now (weights)
  // The share of its threads' CPU time its CPU quota allows, in (0, 1] (1: no quota); 0: not
  // reported (runtime/session.h, StepReport::cpu_share).
  double cpu_share = 0;
  double wall_s = 0;  // the whole step, communication included (0: not reported)
};

class OnlineEstimator {
 public:
  // The share of a device's profiled memory kept free for the rest of the device: what it
  // holds plus what it reports free, less this, is what a plan may use. A device whose free
  // memory falls below it (another app wants memory) is given a plan that holds less, as
  // Hepti switches modes, instead of one that waits for the OOM killer; since a re-plan moves
  // memory between held and free, the switch does not undo itself until memory returns.
  static constexpr double kMemoryHeadroom = 0.05;

  // A timed step whose longest wall time (DeviceObservation::wall_s) is more than this many
  // times the predicted latency is taken for a stall: see observe().
  static constexpr double kStallFactor = 5.0;

  // `initial`: the profiled (or described) cluster. `smoothing` in (0, 1]: the weight of a new
  // step in the running estimate of each device's speed (in log space).
  OnlineEstimator(const CostModel& cost, ClusterSpec initial, double smoothing = 0.7);

  // A step of `tokens` new rows with `context` positions after it, run under `plan`. A device's
  // speed is scaled by predicted / measured compute (smoothed); a device that computed for less
  // than `min_compute_s` teaches nothing (timer noise), and neither does one held below its
  // threads' CPU by a quota (cpu_share < 1), whose op times show bursts and stops rather than
  // its speed. Then observe_resources(). A step more than kStallFactor times longer than
  // predicted is a stall (a process stopped or paged out, the machine paused) more often than a
  // device that got that much slower: one alone teaches no speed, two in a row do. (A stopped
  // primary's one step once set its speed to 0.29x; under the 1d-tiled plan it then switched to,
  // which is not timed, nothing corrected it.) Returns false for a step taken for a stall.
  bool observe(const Plan& plan, std::int64_t tokens, std::int64_t context,
               const std::vector<DeviceObservation>& devices, double min_compute_s = 1e-4);
  // What is news at every step, even one too short (or too early) to time:
  // - memory: a device's becomes what it holds plus what it reports free, less the headroom
  //   (a mode switch must act on it before the device runs out);
  // - CPU quota: a device's speed is its timed speed scaled by its CPU share over the share it
  //   was profiled at (DeviceSpec::quota_share; else the first reported): a quota cut from 0.6
  //   to 0.1 core is a 6x slowdown from that step on, whatever its op times say.
  void observe_resources(const Plan& plan, const std::vector<DeviceObservation>& devices);

  const ClusterSpec& cluster() const { return current_; }
  // Current speed over the initial one, by cluster index (1: as profiled).
  double speed_factor(int index) const { return factor_.at(static_cast<std::size_t>(index)); }
  int steps_observed() const { return steps_; }
  // Counts the changes of a device's CPU share over its profiled one: news that a request
  // in progress should not wait out (Session::switch_plan).
  int quota_revision() const { return quota_revision_; }

 private:
  const CostModel& cost_;
  ClusterSpec initial_;
  ClusterSpec current_;
  double smoothing_;
  // Device `index`'s CPU share over its first (1 while not reported).
  double share_ratio(int index) const;
  // Re-derives device `index`'s speed in current_ from timed_ and share_ratio().
  void update_speed(int index);

  std::vector<double> factor_;  // timed_ x share_ / first_share_: the speed estimate
  std::vector<double> timed_;   // from op times, smoothed (1: as profiled)
  // The CPU share the speeds were measured at: the profile's (DeviceSpec::quota_share), else
  // the first reported (0: neither yet).
  std::vector<double> first_share_;
  std::vector<double> share_;  // the latest CPU share (0: never reported)
  int steps_ = 0;
  bool last_step_stalled_ = false;  // the last observe()'s step was taken for a stall
  int quota_revision_ = 0;
};

// How `plan` holds its MLP weights, in Hepti's terms: "weight-stationary" (every device all of
// them, tokens split), "1d-tiled" (columns split) or "2d-tiled" (a device grid).
std::string memory_mode(const Plan& plan);

struct ReplanAdvice {
  bool replan = false;
  bool memory = false;  // the current plan no longer fits a device's memory
  // Why re-planning is advised: "memory" (the plan no longer fits), "memory returned" (back to
  // weight-stationary), "speed" (predicted faster past the threshold); "" when it is not.
  std::string cause;
  std::string mode_before;   // memory_mode of the current plan
  std::string mode_after;    // and of the proposed one ("" when none)
  std::optional<Plan> plan;  // the proposed plan, when the planner found one
  double current_s = 0;      // the current plan, predicted on the estimated cluster
  double proposed_s = 0;     // the proposed plan, same
  std::string reason;        // one line: what changed and what it is worth
};

// Runs `strategy` on the estimate and compares its plan with `current`. Re-planning is advised
// when the proposed plan differs and is predicted faster by more than `threshold` (0.1 = 10%),
// or, whatever its speed, when the current plan no longer fits a device's memory (Hepti's
// switch WS -> 1D -> 2D as memory shrinks) or the proposed plan is weight-stationary where the
// current one is not (the switch back once memory returns).
ReplanAdvice advise_replan(const CostModel& cost, const OnlineEstimator& estimate,
                           const Plan& current, const std::string& strategy, std::int64_t seq_len,
                           double threshold);

}  // namespace huddle
