// Layout assignment for an imported graph run whole on one device: convolutions and pooling run
// channels-last ([N,H,W,C]), and the values between them stay channels-last, so a chain of convs
// is not reordered out of and back into NCHW around every conv (oneDNN's convolutions work on
// channels-last or blocked tensors; measured in docs/cnn.md).
//
// The graph's contract is unchanged: inputs and outputs are NCHW under their names, and every
// output is the same math. Inside, a value is stored either NCHW or channels-last:
//   - conv2d, max_pool, avg_pool and global_avg_pool (4-D, not banded) run channels-last;
//   - element-wise ops of one input keep their input's layout;
//   - add, mul, sub and div of 4-D operands (or single elements) run channels-last when one
//     operand already is; concat of 4-D values and slices of a 4-D value likewise (their axis,
//     starts and steps permuted);
//   - every other op (reshape, transpose, resize, matmul, softmax, ...) reads NCHW.
// Where a value is needed in the other layout, one transpose op converts it (a reshape where
// the two layouts are the same bytes: H·W == 1 or C == 1) and every reader shares it. A
// channels-last graph output is computed under "<name>/nhwc" and converted back under its name.
//
// Row-split (EdgeFlow) and operator-assignment graphs stay NCHW: their planners reason about
// rows of NCHW values.
#pragma once

#include "graph/graph.h"

namespace huddle::onnx_import {

// The graph with channels-last convolutions, pooling and the values between them; `graph` is
// an imported graph (concrete shapes). Ops that move no data in either layout are unchanged.
Graph to_channels_last(const Graph& graph);

}  // namespace huddle::onnx_import
