#include "planner/row_planners.h"

#include "core/error.h"
#include "planner/edgeflow_planner.h"
#include "planner/halo_fusion.h"
#include "planner/row_baselines.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace huddle {

const std::vector<std::string>& row_strategies() {
  static const std::vector<std::string> names = {"edgeflow", "rows-equal", "rows-proportional",
                                                 "tiles", "local"};
  return names;
}

std::vector<std::vector<Range>> plan_row_ranges(const std::string& strategy,
                                                const rows::RowGraph& graph,
                                                const RowCosts& costs) {
  const int n = costs.devices();
  if (strategy == "edgeflow") {
    std::vector<std::vector<Range>> best = plan_edgeflow(graph, costs);
    double best_s = simulate_rows(graph, costs, best).latency_s;
    for (auto other : {plan_rows_proportional(graph, costs), plan_rows_local(graph, n)}) {
      const double s = simulate_rows(graph, costs, other).latency_s;
      if (s < best_s) {
        best_s = s;
        best = std::move(other);
      }
    }
    return fuse_halos(graph, costs, std::move(best));
  }
  if (strategy == "rows-equal") return plan_rows_equal(graph, n);
  if (strategy == "rows-proportional") return plan_rows_proportional(graph, costs);
  if (strategy == "tiles") return plan_rows_tiles(graph, costs);
  if (strategy == "local") return plan_rows_local(graph, n);
  throw PlanError(fmt::format("unknown row strategy '{}' (known: {})", strategy,
                              fmt::join(row_strategies(), ", ")));
}

RowPlan plan_rows(const std::string& strategy, const rows::RowGraph& graph,
                  const ClusterSpec& cluster, WireFormat wire) {
  return RowPlan::of_ranges(graph,
                            plan_row_ranges(strategy, graph, row_costs(graph, cluster, wire)));
}

RowPrediction predict_rows(const rows::RowGraph& graph, const ClusterSpec& cluster,
                           const RowPlan& plan, WireFormat wire) {
  plan.validate(graph, cluster.size(), "row plan");
  return simulate_rows(graph, row_costs(graph, cluster, wire),
                       plan.layer_ranges(graph, cluster.size()));
}

Plan make_row_split_plan(const std::string& strategy, const rows::RowGraph& graph,
                         const ClusterSpec& cluster, WireFormat wire) {
  Plan plan;
  plan.strategy = strategy;
  plan.wire = wire;
  plan.model = PlanModel::of(graph);
  for (const DeviceSpec& d : cluster.devices()) {
    plan.devices.push_back(d.name);
    plan.token_shares.push_back(d.gflops);
  }
  plan.rows = plan_rows(strategy, graph, cluster, wire);
  plan.validate(graph, strategy);
  return plan;
}

}  // namespace huddle
