// The fixed strategies, as plans: local, megatron, sp, galaxy. Splits follow relative device
// speeds (`shares`, primary first); measured shares and the optimising planners (Galaxy's memory
// rebalancing, Hepti's MILP) build on these.
#pragma once

#include "model/model_config.h"
#include "plan/plan.h"

#include <string>
#include <vector>

namespace huddle {

// Names accepted by make_plan.
const std::vector<std::string>& strategy_names();

// `devices` names the devices, primary first; `shares` has one positive entry per device (empty:
// equal shares). UsageError for an unknown strategy or a share count that does not match;
// PlanError when the model cannot be split that way (more devices than heads for tensor
// parallelism).
Plan make_plan(const std::string& strategy, const ModelConfig& config,
               const std::vector<std::string>& devices, std::vector<double> shares);

// Splits `total` units by `shares` with at least one unit per device (PlanError if total is too
// small).
std::vector<Range> split_at_least_one(std::int64_t total, const std::vector<double>& shares,
                                      const std::string& what);

}  // namespace huddle
