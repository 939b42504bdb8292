// The row-split planners for CNNs, by name, for the CLI and the planner registry:
//   "edgeflow"           EdgeFlow's per-layer LP (edgeflow_planner.h); the simulator then keeps
//                        the fastest of it, rows-proportional and local (the greedy per-layer
//                        LP does not see later layers, so on a slow network keeping everything
//                        on device 0 can win), and fuses halos where it predicts that faster
//                        (halo_fusion.h: redundant rows instead of exchanges)
//   "rows-equal"         equal rows per device (MoDNN-like)
//   "rows-proportional"  rows in proportion to speed (CoEdge-like)
//   "tiles"              fused tiles over the first layers (DeepThings-like)
//   "local"              everything on device 0
// (row_baselines.h has the baselines' details.)
#pragma once

#include "plan/plan.h"
#include "plan/row_graph.h"
#include "plan/row_plan.h"
#include "planner/cluster.h"
#include "planner/row_costs.h"
#include "planner/row_simulator.h"

#include <string>
#include <vector>

namespace huddle {

// The names plan_rows accepts, in the order above.
const std::vector<std::string>& row_strategies();

// Per layer, per device, the rows it computes under `strategy` with `costs`; PlanError naming an
// unknown strategy and listing the known ones.
std::vector<std::vector<Range>> plan_row_ranges(const std::string& strategy,
                                                const rows::RowGraph& graph, const RowCosts& costs);

// The plan of `strategy` for `graph` on `cluster` (device 0 is the cluster's primary).
// Rows travel in `wire` (row_costs).
RowPlan plan_rows(const std::string& strategy, const rows::RowGraph& graph,
                  const ClusterSpec& cluster, WireFormat wire = WireFormat::F32);

// The whole Plan (devices named as in `cluster`, "rows" from plan_rows, Plan::wire) of `strategy`.
Plan make_row_split_plan(const std::string& strategy, const rows::RowGraph& graph,
                         const ClusterSpec& cluster, WireFormat wire = WireFormat::F32);

// The simulator's prediction of `plan` on `cluster` (row_simulator.h); PlanError when the plan
// does not fit the graph (RowPlan::validate).
RowPrediction predict_rows(const rows::RowGraph& graph, const ClusterSpec& cluster,
                           const RowPlan& plan, WireFormat wire = WireFormat::F32);

}  // namespace huddle
