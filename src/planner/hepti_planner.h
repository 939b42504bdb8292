// Hepti planner (papers/hepti-parallel-transformer-inference, §4.2-4.3): split sizes from the
// MILP in hepti_milp.h under memory limits and a latency deadline D, in one of three modes:
//   weight-stationary  (memory allows every device the whole MLP): attention heads split by the
//                      MILP, the MLP and connection blocks split by tokens (fractions λ) with
//                      whole weights; maps onto plan layouts heads / tokens / tokens.
//   1d-tiled           (fewer than 16 devices): heads and FFN columns split by the MILP, residual
//                      replicated with all-reduces; maps onto heads / columns / replicated.
//   2d-tiled           (16 devices or more): weights tiled over a grid of device rows (hidden)
//                      and columns (heads, FFN columns), split in proportion to the grid rows'
//                      and columns' summed speeds; a Plan with a "grid" (plan.h, lowered by
//                      lowering_2d.cpp). Its latency is an estimate, not simulated.
// PlanRequest::mode forces a mode ("ws", "1d", "2d"), e.g. 2D tiling on a small cluster.
// Devices the MILP gives no work (λ = 0) are dropped, slowest first and one at a time, and the
// problem solved again (the primary always stays; if the rest cannot hold the model, every
// remaining device is made to take part). PlanError when nothing fits or no split meets the
// deadline, with the fastest feasible time.
#pragma once

#include "planner/hepti_milp.h"
#include "planner/planners.h"

namespace huddle {

enum class HeptiMode : std::uint8_t { WeightStationary, Tiled1D, Tiled2D };
const char* hepti_mode_name(HeptiMode mode);

// P2 for `mode` on the devices `active` (cluster indices, the primary first), without deadline.
SplitProblem hepti_problem(const PlanRequest& request, HeptiMode mode,
                           const std::vector<int>& active);

PlanResult plan_hepti(const PlanRequest& request);

// Hepti's grid for n devices: R x C with R the largest divisor of n not above sqrt(n).
Grid hepti_grid(int devices);

// A 2D-tiled plan on `devices` (primary first) as a `grid`: hidden rows split over grid rows in
// proportion to each row's summed `speeds`, heads and FFN columns over grid columns by each
// column's (largest remainder, at least one unit each; PlanError when a dimension is too small).
// Every layer alike; token shares are the speeds (a grid column splits its tokens by them).
Plan tiled_2d_plan(const ModelConfig& config, const std::vector<std::string>& devices, Grid grid,
                   const std::vector<double>& speeds);

}  // namespace huddle
