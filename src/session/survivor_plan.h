// Re-planning when the devices change — lost ones, or one that joins: the same strategy family on
// the devices there are now. Pure (no I/O), so every case is unit-tested
// (tests/session/survivor_plan_test.cpp).
#pragma once

#include "model/model.h"
#include "planner/cluster.h"
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

// What the session measured of a worker that joins (session/admission.cpp): the joiner and this
// primary, profiled side by side, and the link between them.
struct JoinedDevice {
  std::string address;  // "host:port" it takes sessions on
  DeviceSpec measured;  // the joiner
  DeviceSpec primary;   // this primary, measured with it: the scale of the joiner's speed
  LinkSpec link;        // primary <-> joiner
};

// `planned` with `joined` added as the last worker, re-planned with the same family: the
// planner that made the plan on the cluster grown by the joiner (its speeds scaled to the
// cluster's primary, its memory as measured, `joined.link` to every device, named after its
// address); a fixed strategy with one more share — the primary's times the joiner's measured
// speed over the primary's — or even shares when none were given; a saved or assigned plan, or a
// primary that ran alone, becomes galaxy (or the planner "auto" with a cluster). PlanError "cannot
// admit <address>: ..." when the new plan is refused (a cluster's memory check included).
Planned plan_with(const Planned& planned, const JoinedDevice& joined, const Model& model,
                  std::int64_t prompt_tokens);

}  // namespace huddle
