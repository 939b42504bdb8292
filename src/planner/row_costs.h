// Costs of row-split CNN plans (EdgeFlow and its baselines): per device and row layer, the time of
// a unit as a function of its rows, Y_i(rows) = per_row·rows + fixed (0 for 0 rows); per tail op
// its time on device 0; per ordered pair of devices, the time of a message.
//
// `row_costs` derives them from a cluster file; tests fill the struct by hand.
#pragma once

#include "plan/row_graph.h"
#include "planner/cluster.h"

#include <cstdint>
#include <vector>

namespace huddle {

struct RowCosts {
  // [layer][device] (layers of the RowGraph, in its order): seconds per output row, and the fixed
  // seconds of a unit with at least one row.
  std::vector<std::vector<double>> per_row, fixed;
  std::vector<double> tail;  // seconds of each tail op (RowGraph::tail) on device 0
  // [src][dst]: one-way latency per message and seconds per byte (8 / bandwidth in bit/s).
  std::vector<std::vector<double>> latency_s, seconds_per_byte;
  // [src]: fixed seconds each message occupies its sender's link before its bytes (packing, the
  // frame and its encryption, a sender thread: the runtime's cost per message, beside the
  // network's latency); empty: none.
  std::vector<double> message_overhead_s;
  // [device]: seconds of the device's CPU (at its share) per byte of f32 rows it sends or
  // receives: sealing or opening the frames, the copies, the kernel's TCP work. On a device of a
  // fraction of a core this is time neither its units nor its other messages get. Empty: none.
  std::vector<double> cpu_s_per_byte;
  // [src][dst]: the sender's queue a message takes (0..devices()). Messages on one queue go one
  // after another. Pairs on the cluster's default link share one queue per sender, queue
  // devices(): one network interface, as the testbed shapes a device's egress. A pair with a link
  // of its own has its own queue, dst. Empty: every pair its own.
  std::vector<std::vector<int>> egress;

  int devices() const { return static_cast<int>(latency_s.size()); }
  // Y_d(rows) of `layer` on `device`; 0 when rows <= 0.
  double unit_s(int layer, int device, std::int64_t rows) const;
  // One message of `bytes` from src to dst: overhead + latency + bytes · transfer_s_per_byte;
  // 0 when src == dst or bytes <= 0.
  double message_s(int src, int dst, double bytes) const;
  // Seconds a byte adds to a message from src to dst: the link's time and both ends' CPU; 0 when
  // src == dst (nothing moves).
  double transfer_s_per_byte(int src, int dst) const;
  // The fixed seconds of a message from `src` (message_overhead_s; 0 when empty).
  double overhead_s(int src) const;
  // Seconds of `device`'s CPU per byte it sends or receives (cpu_s_per_byte; 0 when empty).
  double cpu_s(int device) const;
};

// Fixed cost of one unit when the cluster file has no op curves (a kernel call, the band's
// bookkeeping) on a device of one full core, kRowUnitOverheadS / DeviceSpec::cores below one
// core: small against any real layer, but YOLOv5s runs ~100 units per device per image. Measured
// in a trace of its edgeflow plan on the testbed: its element-wise and concat units take a
// median 18-47 us of CPU each.
inline constexpr double kRowUnitOverheadS = 20e-6;

// Without curves, a batch-1 linear (a GEMV: each weight read once, from memory) runs this many
// times slower per FLOP than the device's `gflops` (a GEMM rate). Measured on the development VM:
// VGG-16's head (247 MFLOP, 494 MB of weights) in 23.3 ms on one thread, 10.6 GFLOP/s, against
// the testbed's 86.6 GFLOP/s per core for its GEMM (docs/cnn.md).
inline constexpr double kRowGemvSlowdown = 8.0;

// Fixed cost of one message of a row exchange on a device of one full core (kRowMessageOverheadS /
// DeviceSpec::cores below one core): measured on 127.0.0.1 (docs/cnn.md).
inline constexpr double kRowMessageOverheadS = 150e-6;

// Costs of `graph`'s layers on `cluster`: a conv's rows at the device's GEMM curve, a column
// layer's linear at the GEMV curve (one input row) or the GEMM curve, every other row layer at its
// element-wise curve (flops_per_row / throughput + the curve's overhead), or at `gflops` plus
// kRowUnitOverheadS (at the device's cores) without curves (a batch-1 linear at
// gflops / kRowGemvSlowdown). Tail ops: their
// FLOPs at device 0's GEMM curve (or `gflops`) — tail ops are small (pooling heads, reshapes).
// Links from ClusterSpec::link (PlanError naming both devices when a pair has none); per message
// kRowMessageOverheadS, and per byte a device sends or receives its
// DeviceSpec::comm_cpu_s_per_byte. Rows travel in `wire` (core/wire_format.h): a byte of f32 rows
// costs wire_bytes_per_value(wire, kWireAllReduceRow) / 4 bytes of link time and of CPU.
RowCosts row_costs(const rows::RowGraph& graph, const ClusterSpec& cluster,
                   WireFormat wire = WireFormat::F32);

// EdgeFlow's profiling step: the measured seconds of every row layer (all its rows) and tail op
// when device 0 runs the whole graph. A FLOP count misjudges layers whose kernels are much faster
// or slower than the cluster file's GEMM rate (oneDNN's 3x3 and 1x1 convolutions, memory-bound
// pooling): measured, each layer's cost is right on device 0 and scales to the other devices by
// their speed relative to device 0's.
struct RowProfile {
  std::vector<double> layer_s;  // [layer of the RowGraph]; < 0: not measured (kept as counted)
  std::vector<double> tail_s;   // [tail op]; < 0: not measured
};

// `graph` with each measured layer's flops_per_row (tail op's flops) replaced by the work that
// makes row_costs(result, cluster) give device 0 the measured time (less its fixed cost).
// PlanError when the profile's sizes do not match the graph's.
rows::RowGraph calibrate_row_graph(const rows::RowGraph& graph, const ClusterSpec& cluster,
                                   const RowProfile& profile);

}  // namespace huddle
