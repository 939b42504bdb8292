// Lowering of 2D-tiled plans (Plan::grid); lower() in lowering.h dispatches here.
#pragma once

#include "plan/lowering.h"

namespace huddle {

// Program of device `rank` of a validated 2D-tiled plan. PlanError for an op it cannot place.
Program lower_2d(const Graph& graph, const ModelConfig& config, const Plan& plan, int rank);

}  // namespace huddle
