// Row geometry of a CNN graph (EdgeFlow): which ops can be split by output rows, and which input
// rows each band of output rows reads.
//
// A row layer is an op whose output is a 4-D NCHW activation that can be computed band by band
// along H (dim 2): conv2d, max_pool, avg_pool, resize, element-wise ops (sub, div, add, mul,
// relu, clip, sigmoid, hard_sigmoid, hard_swish, batch_norm), concat and slice along any axis
// but H. Every other op (global_avg_pool, reshape, transpose, matmul, linear, softmax, ...) is a
// tail op: it runs whole on device 0, which gathers the rows of its 4-D inputs first.
//
// A column layer is split by the last axis of its output instead (a CNN's fully connected head):
// a linear or matmul whose second operand is a 2-D weight, over an activation of concrete shape
// and rank 2 or 3 (output [..., O]: each device holds only its columns' weight rows/columns and
// computes those output columns from the whole input), and a unary activation (relu, clip,
// sigmoid, hard_sigmoid, hard_swish) of a column layer's output. In a RowLayer, `rows` then
// counts output columns and a "row" is one column over every leading index; everything else
// (forwarding tables, exchanges, planners, the simulator) treats it as a row layer.
//
// For each input of a row layer, a RowMap gives the input rows [begin, end) that output rows
// [a, b) read, clipped to the input's height (rows outside it are the window's zero/ignored
// padding, which the kernels add themselves where a band touches the border: EdgeFlow's
// pre-padding). Inputs that are not split by rows (a broadcast [N, C, 1, 1] operand, a value a
// tail op made) are needed whole (RowMap::Kind::Whole). Weights are not inputs here: every device
// holds the weights of the layers it computes.
#pragma once

#include "graph/graph.h"
#include "kernels/cnn.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace huddle::rows {

// The extent a value is split and exchanged along: H of a 4-D NCHW value, else its last axis (1 for
// a scalar). A value held whole is rows [0, split_extent).
std::int64_t split_extent(const Shape& shape);

struct RowMap {
  enum class Kind : std::uint8_t {
    Same,    // element-wise, concat, slice: output rows [a, b) read input rows [a, b)
    Window,  // conv2d, pools: kernels::input_rows_for(window, a, b, in_rows)
    Resize,  // resize along H: the source rows of the output rows' sampling coordinates
    Whole,   // the whole input, whatever the rows (broadcast operands, non-4-D values)
  };
  Kind kind = Kind::Same;
  std::int64_t in_rows = 0;    // the input's split_extent (H of a 4-D input)
  kernels::Window2d window;    // Window
  kernels::ResizeSpec resize;  // Resize
  std::int64_t out_rows = 0;   // Resize: the output's height

  // Input rows read by output rows [a, b); empty ({0, 0}) when a == b. Whole: {0, in_rows}.
  kernels::RowSpan input_rows(std::int64_t a, std::int64_t b) const;
};

struct RowInput {
  // The value read. For a column layer whose input is a Flatten/Reshape of a row layer's output
  // (VGG's pool5 -> flatten -> fc6), the reshape's input: each device with columns gathers those
  // rows whole from the devices that hold them and reshapes them itself (`reshape` is then that
  // op's index in Graph::ops()), instead of device 0 gathering them, reshaping and sending the
  // result to every device.
  ValueId value = -1;
  int reshape = -1;
  // Index in RowGraph::layers of the row layer that makes this value, or -1 when it is a graph
  // input or a tail op's output (held whole by device 0).
  int producer = -1;
  RowMap map;
  // Bytes of one input row over every batch item and channel (N·C·W·4; a column: its elements
  // over the leading axes, ·4); Whole: the value's bytes.
  std::int64_t bytes_per_row = 0;
};

struct RowLayer {
  std::size_t op = 0;  // index in Graph::ops()
  std::string name;
  OpKind kind = OpKind::Conv2d;
  bool columns = false;            // a column layer (split by the output's last axis)
  std::int64_t rows = 0;           // output height H (column layer: output columns O)
  std::int64_t bytes_per_row = 0;  // output bytes per row (N·C·W·4; column: M·4, M = numel / O)
  // conv: 2·N·O·W·(C/groups)·kh·kw; linear/matmul column: 2·M·K; others: elements per row
  double flops_per_row = 0;
  std::vector<RowInput> inputs;  // activation inputs in op order (weights left out)
};

// A tail op and the row layers whose outputs it reads (gathered whole to device 0).
struct TailOp {
  std::size_t op = 0;
  std::vector<int> row_inputs;  // indices in RowGraph::layers
  double flops = 0;             // rough: output elements, or 2·M·K·N for matmul / linear
};

struct RowGraph {
  std::vector<RowLayer> layers;  // in graph (topological) order
  std::vector<TailOp> tail;      // in graph order
  // Reshapes folded into the column layers that read them (RowInput::reshape), in graph order:
  // neither row layers nor tail ops.
  std::vector<std::size_t> folded;
  // Row layers whose output is a graph output (gathered to device 0 at the end).
  std::vector<int> output_layers;
  // For each layer, the later layers that read it (indices), in order.
  std::vector<std::vector<int>> consumers;
};

// Whether `op` of `graph` is a row layer.
bool row_splittable(const Graph& graph, const Op& op);

// Whether `op` of `graph` is a column layer; `column_values[v]` says whether value v is the output
// of a column layer (a unary activation is one only after one).
bool column_splittable(const Graph& graph, const Op& op, const std::vector<bool>& column_values);

// The row layers and tail ops of an imported graph (any graph: a transformer has no row layers).
RowGraph build_row_graph(const Graph& graph);

// `rg` (of `graph`) with the rows of each batch-1, 4-D graph input of `inputs` (by name) whose
// every channel takes at most 256 values (a camera's image) costed at a byte per value, as a row
// exchange in f32 sends them (palette-coded, OpAttrs::palette; every piece of such an input
// qualifies), instead of four; the tables are left out. Other inputs and values are unchanged.
RowGraph with_palette_inputs(const RowGraph& rg, const Graph& graph,
                             const std::map<std::string, Tensor>& inputs);

}  // namespace huddle::rows
