// Auto planner: simulates every candidate on the cluster and keeps the fastest that fits in
// memory (and meets the deadline, when one is given). Candidates: local; megatron, sp, galaxy
// and hepti on the primary plus the k fastest other devices, for every k (so a slow link or a
// slow device is left out when that is faster). When distribution does not pay (slow links, tiny
// models) this is local. PlanError listing why each candidate was refused when none fits.
#pragma once

#include "planner/planners.h"

namespace huddle {

PlanResult plan_auto(const PlanRequest& request);

}  // namespace huddle
