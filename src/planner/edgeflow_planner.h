// EdgeFlow's planner (../shared/papers/edgeflow-dag-cnn-partitioning.txt): each row layer, in
// topological order, is cut into contiguous row ranges, one per device in device-index order
// (device 0 takes the top rows; the order is fixed, as the paper's x_0 <= x_1 <= ... <= x_M), by a
// linear program over the cut points whose parameters are the finish times the earlier layers'
// plans give:
//
//   minimise   λ (+ a small weight on Σ_i t_i, which breaks ties towards earlier finishes)
//   s.t.       0 = x_0 <= x_1 <= ... <= x_M = H                     (rows of the layer's output)
//              t_i >= F_i + Y_i(x_i − x_{i−1})                       (device i free at F_i)
//              t_i >= T_{m,j} + L_{j,i} + c_{m,j,i}·p_{m,i,j} + Y_i(x_i − x_{i−1})
//                                     for every input m, producer device j != i holding rows of m
//              p_{m,i,j} >= 0,  p_{m,i,j} >= (one of the four terms of the overlap, below)
//              λ >= t_i
//
// with Y_i(n) = a_i·n + b_i (RowCosts), L the link latency, c the seconds per row of m on the link
// and of both ends' CPU for it (RowCosts::transfer_s_per_byte).
// p_{m,i,j} is the number of rows of m device i receives from device j: the overlap of the rows
// i reads, [s_i, e_i), with j's output rows [a_j, b_j) (fixed: that layer is planned):
//   overlap = max(0, min(e_i − s_i, e_i − a_j, b_j − s_i, b_j − a_j)).
// s_i and e_i are linear in the cut points: a window (conv, pool) reads
// [stride·x_{i−1} − pad, stride·(x_i − 1) + dilation·(kernel − 1) + 1 − pad); element-wise, concat
// and slice read [x_{i−1}, x_i); a resize of ratio r = in/out reads within
// [r·x_{i−1} − 2, r·x_i + 2) (an over-approximation).
//
// Exact and approximated:
//   - Every term of the min is an upper bound of the overlap, so each constraint with p >= one
//     term is conservative: the LP's λ bounds the continuous plan's finish from above. It is exact
//     where the chosen term is the minimum. The first LP picks the paper's ordering guess (j < i:
//     b_j − s_i, the bottom rows of the device above; j > i: e_i − a_j; a producer holding
//     everything: e_i − s_i). Borders are not clipped (a conservative excess of the padding rows).
//   - The paper drops the indicator 1{p > 0}: every receiver waits for every producer device's
//     finish plus a latency even when it needs none of its rows. The first LP does so too; the
//     next LPs (successive linearisation, at most kEdgeFlowRefinements) start from the rounded
//     solution and, for each pair (i, j) that has no overlap there, require the ranges to stay
//     apart (e_i <= a_j or s_i >= b_j: linear) and drop the wait; for the others they pick the
//     term that is the minimum there. Each LP is a conservative model of its region.
//   - Y_i charges b_i to a device even with zero rows (the LP cannot switch it off; a zero-row
//     unit costs nothing in the exact evaluation).
//   - Links are taken as free (no queueing behind earlier messages) and a layer's transfers are
//     those its own reads need (the runtime sends the hull over all consumers; the simulator
//     models that).
// Column layers (a fully connected head split by output columns, plan/row_graph.h) take no LP:
// their input is read whole, so the cut points only set how many columns each device computes;
// column_shares gives them in proportion to speed after each device's input arrives (its link),
// and the same evaluation (plus, per device, the message of its columns to device 0: they all
// move on), alternatives and local search follow ("columns" as the source). A row layer whose
// output device 0 gathers whole (a graph output, or a tail op's input) is scored with that gather
// too: the arrival of all its rows at device 0.
// The LP's cut points are rounded to integers (nearest, kept monotone, x_M = H) and then improved
// by a local search over single cut points, moved by ±1, ±2, ±4, ... rows, under the exact
// integer evaluation (layer_finish: forwarding_table transfers, zero-row units free). The
// evaluation also tries simple alternatives — rows in proportion to speed, equal rows, the whole
// layer on one device — and keeps the best (the LP's rounding and its approximations can lose to
// them on small layers); LayerChoice::source says which won.
#pragma once

#include "plan/row_graph.h"
#include "plan/split.h"
#include "planner/row_costs.h"

#include <cstddef>
#include <string>
#include <vector>

namespace huddle {

inline constexpr int kEdgeFlowRefinements = 2;

// What the layers planned so far leave: the state the next layer's LP takes as parameters.
struct EdgeFlowState {
  std::vector<std::vector<Range>> ranges;   // per planned layer, per device
  std::vector<std::vector<double>> finish;  // per planned layer, per device: its unit's finish
  std::vector<double> device_free;          // per device: when it has run its last unit
  double external_ready = 0;                // when device 0 holds the tail ops' outputs so far
  std::size_t tails_done = 0;               // tail ops (RowGraph::tail) accounted for

  static EdgeFlowState start(int devices);
};

struct EdgeFlowOptions {
  bool refine = true;        // successive LPs after the first
  bool local_search = true;  // integer moves of single cut points after rounding
  bool alternatives = true;  // proportional, equal and one-device splits compared too
};

struct LayerChoice {
  std::vector<Range> ranges;   // per device, contiguous, in device order
  std::vector<double> finish;  // per device (device_free where it has no rows)
  double makespan = 0;         // latest finish over devices with rows (exact evaluation)
  double lp_lambda = 0;        // the first LP's λ (seconds)
  std::string source;          // "lp", "lp+search", "proportional", "equal", "device k"
};

// Exact finish of `layer` split as `ranges` after `state`: per device, max(free, arrival of the
// rows it reads from others (forwarding_table; per link, a latency plus all its bytes)) + Y_i.
// Returns the latest finish over devices with rows; `finish` (optional) gets every device's.
double layer_finish(const rows::RowGraph& graph, const RowCosts& costs, const EdgeFlowState& state,
                    int layer, const std::vector<Range>& ranges,
                    std::vector<double>* finish = nullptr);

// Columns of column layer `layer` per device (contiguous, in device order): device d, whose unit
// could start at r_d (free, the whole input arrived) and costs a_d per column (its compute plus
// sending the column to device 0) and b_d fixed (plus the link's latency), gets
// max(0, (λ − r_d − b_d) / a_d) columns with λ such that they sum to the layer's width, rounded by
// largest remainder: everyone with columns finishes at about λ.
std::vector<Range> column_shares(const rows::RowGraph& graph, const RowCosts& costs,
                                 const EdgeFlowState& state, int layer);

// Accounts on device 0 the tail ops that come before graph op `before_op` (a layer's
// RowLayer::op; SIZE_MAX: all), after gathering their inputs.
void advance_tails(const rows::RowGraph& graph, const RowCosts& costs, EdgeFlowState& state,
                   std::size_t before_op);

// Plans one layer (the state must hold every earlier layer, and the tail ops before it).
LayerChoice plan_layer(const rows::RowGraph& graph, const RowCosts& costs,
                       const EdgeFlowState& state, int layer, const EdgeFlowOptions& options = {});

// Accounts a planned layer in the state.
void commit_layer(EdgeFlowState& state, const LayerChoice& choice);

// Every layer, in order: per layer, per device, the rows it computes.
std::vector<std::vector<Range>> plan_edgeflow(const rows::RowGraph& graph, const RowCosts& costs,
                                              const EdgeFlowOptions& options = {});

}  // namespace huddle
