// Re-planning after devices are lost: the same strategy family on the devices that are left.
// Pure (no I/O), so every case is unit-tested (tests/session/survivor_plan_test.cpp).
#pragma once

#include "model/model.h"
#include "session/plan_choice.h"

#include <cstdint>
#include <string>
#include <vector>

namespace huddle {

// The workers `planned.plan` runs on, in plan order (devices 1..n-1): mapped through the
// cluster when the plan names cluster devices, else every worker given.
std::vector<std::string> plan_workers(const Planned& planned);

// `planned` without the workers in `lost` (addresses of planned.all_workers): the cluster (file
// or profile) loses their devices, the shares their entries, and the plan is made again with
// the same family — the planner that made it on the smaller cluster; the fixed strategy over the
// remaining shares (even when none were given); a saved or assigned plan becomes galaxy, or the
// planner "auto" with a cluster. The primary is always left; alone, it runs "local".
// With a cluster, the new plan must fit every device's memory: PlanError "cannot go on without
// <lost>: ..." naming the devices short of memory (or the planner's reason) otherwise.
Planned plan_without(const Planned& planned, const std::vector<std::string>& lost,
                     const Model& model, std::int64_t prompt_tokens);

}  // namespace huddle
