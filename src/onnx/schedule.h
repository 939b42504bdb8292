// The order an imported graph's ops run in on every device: the file's, except that an op whose
// output is a graph output runs as soon as its inputs are there. A detection model's heads
// (YOLO's three 1x1 convolutions) come last in the file although the first reads a feature map
// made far earlier; split by rows across devices (EdgeFlow), each device's part of such an
// output then travels to device 0 while the rest of the network still runs, instead of all of
// them at the end. The result is the same graph (same ops, names, values); one device gives the
// same outputs in either order.
#pragma once

#include "graph/graph.h"

namespace huddle::onnx_import {

Graph outputs_early(const Graph& graph);

}  // namespace huddle::onnx_import
