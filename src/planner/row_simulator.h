// Predicted latency of a row-split CNN plan: a model of the runtime's execution units.
//
// Every device runs its units (a row layer's rows [begin, end) on that device) in graph order;
// device 0 also runs the tail ops, in graph order among its units. A unit starts when its device
// is free and every row it reads has arrived. When a unit finishes, its device sends the rows of
// its output each other device needs, as forwarding_table() says (one message per (src, dst)
// piece; a value's needed rows on a device are the hull of what its consumers there read, and
// all rows on device 0 for graph outputs and tail ops' inputs). A sender's queue
// (RowCosts::egress: one per device for the pairs on the default link, one per pair with a link
// of its own) carries its messages one after another in the sender's order (a message occupies
// it for bytes / bandwidth and arrives one latency later). Each message first costs its sender a
// fixed time (RowCosts::message_overhead_s: packing, framing, a sender thread) and its bytes'
// CPU (RowCosts::cpu_s_per_byte: sealing, copies), one after another over the messages of an
// exchange, and that time delays the sender's next unit too (the runtime's row_exchange returns
// once its sends are handed over). A receiver's rows are usable once all its pieces of the value
// have arrived and it has spent its bytes' CPU opening them. Values not made by a row
// layer (graph inputs, tail ops' outputs) are held whole by device 0: graph inputs from t = 0, a
// tail op's output once device 0 has run every tail op before its first reader (an upper bound: the
// RowGraph does not say which tail op made it). Beyond their fixed costs, sends do not delay
// compute. The latency ends when device 0 has run everything and holds every output.
#pragma once

#include "plan/row_graph.h"
#include "plan/split.h"
#include "planner/row_costs.h"

#include <cstdint>
#include <vector>

namespace huddle {

struct RowPrediction {
  double latency_s = 0;
  std::vector<std::int64_t> bytes_sent;  // per device, to other devices
  std::vector<double> busy_s;            // per device, computing
};

// `ranges`: per layer of `graph`, per device (costs.devices()), the output rows it computes.
// PlanError when a needed row is computed by no device.
RowPrediction simulate_rows(const rows::RowGraph& graph, const RowCosts& costs,
                            const std::vector<std::vector<Range>>& ranges);

// Per device, the rows of layer `producer`'s output that `consumer`'s units read (their hull;
// an empty range where it reads none).
std::vector<Range> consumer_needs(const rows::RowGraph& graph,
                                  const std::vector<std::vector<Range>>& ranges, int producer,
                                  int consumer);

// Per device, the rows of layer `producer`'s output that device needs: the hull over its
// consumers, and every row on device 0 when it is a graph output or a tail op reads it.
std::vector<Range> value_needs(const rows::RowGraph& graph,
                               const std::vector<std::vector<Range>>& ranges, int producer);

}  // namespace huddle
