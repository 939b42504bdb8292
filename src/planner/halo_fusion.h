// Halo fusion: a refinement of a row split that trades exchanges for redundant rows.
//
// Where a layer's row consumers on a device read rows of its output that other devices computed
// (a halo, or more), that device can compute those rows itself instead: its range of the layer
// widened to what its consumers there read (a gather to device 0 for a tail op or an output is
// not a halo and stays). The layer's exchange then moves fewer rows, or none,
// and costs fewer messages (each one a latency and a sender's fixed cost), at the price of the
// extra rows' compute and of the wider range's own needs on the layer's inputs. DeepThings'
// fused tiles do this for a fixed block of first layers; here each layer is tried on its own,
// last layer first, so that a chain of widenings can reach back through a block. A widening
// (every device at once, else one device at a time) is kept only when the row simulator
// (row_simulator.h) predicts the whole plan faster, so the result is never predicted slower.
#pragma once

#include "plan/row_graph.h"
#include "plan/split.h"
#include "planner/row_costs.h"

#include <vector>

namespace huddle {

// `ranges` (per layer of `graph`, per device) with halos fused where the simulator predicts it
// pays; every range of the result contains the given one. At most `sweeps` passes over the
// layers (each pass after the first starts from the previous one's widenings).
std::vector<std::vector<Range>> fuse_halos(const rows::RowGraph& graph, const RowCosts& costs,
                                           std::vector<std::vector<Range>> ranges, int sweeps = 2);

}  // namespace huddle
