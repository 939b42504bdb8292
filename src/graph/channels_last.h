// Layout assignment for an imported graph, or a device's program of a row-split plan:
// convolutions and pooling run channels-last ([N,H,W,C]), and the values between them stay
// channels-last, so a chain of convs is not reordered out of and back into NCHW around every conv
// (oneDNN's convolutions work on channels-last or blocked tensors; measured in docs/cnn.md).
//
// The graph's contract is unchanged: inputs and outputs are NCHW under their names, and every
// output is the same math. Inside, a value is stored either NCHW or channels-last:
//   - conv2d, max_pool, avg_pool and global_avg_pool (4-D, whole or row bands) run channels-last;
//   - row_exchange of a 4-D value is channels-last (its rows are then contiguous), on every
//     device alike, so what one device sends another reads the same way; except a graph
//     output's gather to device 0 (OpAttrs::gather_nchw), which travels in the output's NCHW;
//   - element-wise ops of one input keep their input's layout;
//   - add, mul, sub and div of 4-D operands (or single elements) run channels-last when one
//     operand already is; concat of 4-D values and slices of a 4-D value likewise (their axis,
//     starts and steps permuted);
//   - every other op (reshape, transpose, resize, matmul, softmax, ...) reads NCHW.
// Where a value is needed in the other layout, one transpose op converts it (a reshape where
// the two layouts are the same bytes: H·W == 1 or C == 1) and every reader shares it. A
// channels-last graph output is computed under "<name>/nhwc" and converted back under its name.
#pragma once

#include "graph/graph.h"

namespace huddle {

// The graph with channels-last convolutions, pooling, row exchanges and the values between them;
// `graph` has concrete shapes (an imported graph, or a row-split program).
Graph to_channels_last(const Graph& graph);

}  // namespace huddle
