// Row plans (EdgeFlow and its baselines): for each row layer of a CNN (plan/row_graph.h), the
// output rows [begin, end) each device computes. Ranges may be empty (a zero-row unit) and may
// overlap (fused tiles compute halo rows redundantly); together they cover every row. A row layer
// the plan does not name runs whole on device 0.
//
// Column layers (a CNN's fully connected head, plan/row_graph.h) are entries of the same list
// that give output columns instead: each device holds only its columns' weights.
//
// JSON (inside a Plan, whose "layers" is empty):
//   "rows": [{"op": "conv1", "ranges": [[0, 40], [40, 64]]}, ...,
//            {"op": "fc6", "columns": [[0, 2500], [2500, 4096]]}, ...]
//
// The forwarding table of a value says which rows go from which device to which: a device that
// needs rows [b, e) of a value takes those it holds itself, and each other row from the first
// device (in device order) that holds it.
#pragma once

#include "plan/row_graph.h"
#include "plan/split.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace huddle {

struct RowSplit {
  std::string op;             // the row layer's op name
  std::vector<Range> ranges;  // per device: output rows [begin, end) (columns: columns)
  bool columns = false;       // a column layer's entry ("columns" in JSON)
  bool operator==(const RowSplit&) const = default;
};

struct RowPlan {
  std::vector<RowSplit> ops;

  nlohmann::json to_json() const;
  // PlanError naming `source` and the field at fault.
  static RowPlan from_json(const nlohmann::json& json, const std::string& source);
  // Checks the plan against the graph's row layers: every op named is a row layer (once), has a
  // range per device inside its height (columns: its width), and the ranges cover every row; an
  // entry gives "columns" exactly when it names a column layer.
  void validate(const rows::RowGraph& graph, int devices, const std::string& source) const;
  // Per row layer of `graph` (in its order), per device, the rows it computes.
  std::vector<std::vector<Range>> layer_ranges(const rows::RowGraph& graph, int devices) const;
  // The plan giving `ranges` (per layer, per device) to every layer of `graph`.
  static RowPlan of_ranges(const rows::RowGraph& graph,
                           const std::vector<std::vector<Range>>& ranges);
};

// One piece of a forwarding table: rows [begin, end) of a value go from device src to dst
// (src == dst: the device's own rows, copied locally).
struct RowTransfer {
  int src = 0, dst = 0;
  std::int64_t begin = 0, end = 0;
  bool operator==(const RowTransfer&) const = default;
};

// For a value whose rows device d holds in held[d] and needs in need[d] (empty: [x, x)), every
// transfer, by destination then row. PlanError when a needed row is held by no device.
std::vector<RowTransfer> forwarding_table(const std::vector<Range>& held,
                                          const std::vector<Range>& need);

}  // namespace huddle
