// Baseline row splits of a CNN (plan/row_graph.h) to compare EdgeFlow with. Each returns, per
// layer of the RowGraph, per device (costs.devices()), the output rows it computes (a column
// layer's output columns, split by the same rule: equal, in proportion to speed, ...).
#pragma once

#include "plan/row_graph.h"
#include "plan/split.h"
#include "planner/row_costs.h"

#include <vector>

namespace huddle {

// `local`: every layer whole on device 0.
std::vector<std::vector<Range>> plan_rows_local(const rows::RowGraph& graph, int devices);

// `rows-equal` (MoDNN-like): every layer cut into equal contiguous row ranges in device order
// (the first H mod n devices one row more).
std::vector<std::vector<Range>> plan_rows_equal(const rows::RowGraph& graph, int devices);

// `rows-proportional` (CoEdge-like): every layer cut in proportion to each device's speed on it
// (1 / RowCosts::per_row), largest remainder; a device far slower than the others gets no rows.
std::vector<std::vector<Range>> plan_rows_proportional(const rows::RowGraph& graph,
                                                       const RowCosts& costs);

// The last layer `tiles` fuses by default: the first row layer whose height is at most a quarter
// of the input image's (the first graph input a layer reads by rows); the last row layer when none
// is (column layers are never fused).
int default_last_fused(const rows::RowGraph& graph);

// `tiles` (DeepThings-like fused tile partitions): layers 0..last_fused (default:
// default_last_fused) form one fused block. Each device computes a share of layer last_fused's
// rows in proportion to its speed there, and, going backwards, exactly the rows of each earlier
// block layer that its block consumers' rows read (the hull; overlapping ranges are halo rows
// computed redundantly), so inside the block no device needs rows from another (the input image
// comes from device 0). A block layer no block layer reads, and rows that no device's share
// reads (a stride skipping rows), are still computed: by a proportional split, resp. by
// extending the nearest device's range. Layers after the block: rows-proportional.
std::vector<std::vector<Range>> plan_rows_tiles(const rows::RowGraph& graph, const RowCosts& costs,
                                                int last_fused = -1);

}  // namespace huddle
