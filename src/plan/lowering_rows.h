// Lowering of row-split plans (Plan::rows, EdgeFlow): an imported CNN graph -> one Program per
// device, made of execution units and row exchanges.
//
// Every row layer of the graph (plan/row_graph.h) with a non-empty range on this device becomes
// an execution unit: the op over output rows [begin, end) only (conv2d, pools and resize banded;
// element-wise ops, concat and slice over the same rows of their inputs). A device with an empty
// range runs nothing for that layer (a zero-row unit). A column layer's unit computes its output
// columns from the whole input with its columns' weight slices; where that input is a reshape
// (Flatten) of a row layer's output folded into it (RowGraph::folded), the device gathers those
// rows whole and reshapes them itself. Tail ops run whole on device 0.
//
// Each value's forwarding table comes from what each device holds (its unit's rows; device 0 holds
// graph inputs and tail ops' outputs whole) and what it needs (the hull of the input rows its
// units read — pre-padding rows outside the image are added by the kernels, never sent —, the
// whole value for a tail op or a graph output on device 0). Where some device needs rows it does
// not hold, a row_exchange right after the value's producer moves exactly the rows of the
// table (plan/row_plan.h), directly between the devices concerned; a device not concerned emits
// nothing. Devices run their units in graph order and a unit waits only for the rows it reads.
// Graph outputs are program outputs of device 0, under their model names. The program is then
// made channels-last (graph/channels_last.h): units convolve and pool [N,H,W,C] bands, and every
// 4-D exchange moves channels-last rows (contiguous per image), on every device alike.
#pragma once

#include "plan/lowering.h"

namespace huddle {

// Program of device `rank` of a row-split plan validated against the graph's row layers.
Program lower_rows(const Graph& graph, const Plan& plan, int rank);

}  // namespace huddle
