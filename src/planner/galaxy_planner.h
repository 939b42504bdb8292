// Galaxy's workload planning (papers/galaxy-hybrid-model-parallelism, Algorithm 1).
//
// Step 1 (BalancedPartition): attention heads in proportion to each device's attention speed,
// FFN columns to its MLP speed, connection-block tokens to its connection speed (largest
// remainder, at least one head and column per device).
// Step 2 (MemoryAwareBalancing), MLP first, then attention: every device over its memory budget
// gives the units (columns, then heads) it overflows by to the devices with room, in proportion
// to their speed and never beyond their room (what proportion cannot place goes to the devices
// with the most spare memory first); it keeps at least one unit and leaves the candidate list;
// the step repeats on the rest until no device overflows or no unit can move. If a device still
// overflows, PlanError naming every such device and the bytes it lacks.
// Every layer gets the same split (devices hold the same share of every layer).
#pragma once

#include "planner/planners.h"

namespace huddle {

struct GalaxySplit {
  std::vector<std::int64_t> heads;    // per device
  std::vector<std::int64_t> columns;  // per device
  std::vector<double> token_shares;   // per device
};

// Step 1 only.
GalaxySplit galaxy_balanced_split(const ModelConfig& config, const ClusterSpec& cluster);

// The galaxy plan for a split (heads + columns + tokens layouts, every layer the same).
Plan galaxy_plan(const ModelConfig& config, const ClusterSpec& cluster, const GalaxySplit& split);

// Both steps; PlanError when the model cannot fit.
PlanResult plan_galaxy(const PlanRequest& request);

}  // namespace huddle
