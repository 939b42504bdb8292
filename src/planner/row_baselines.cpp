#include "planner/row_baselines.h"

#include "planner/row_simulator.h"

#include <algorithm>
#include <cstddef>

namespace huddle {
namespace {

using std::size_t;

std::vector<double> row_speeds(const RowCosts& costs, size_t layer) {
  std::vector<double> s;
  for (double a : costs.per_row[layer]) s.push_back(1.0 / std::max(a, 1e-300));
  return s;
}

// Extends the ranges (per device) so that together they cover [0, rows): each uncovered row
// joins the device whose non-empty range is nearest (device 0 when all are empty).
void cover(std::vector<Range>& ranges, std::int64_t rows) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const bool held = std::any_of(ranges.begin(), ranges.end(),
                                  [r](const Range& q) { return r >= q.first && r < q.second; });
    if (held) continue;
    size_t best = 0;
    std::int64_t best_gap = -1;
    for (size_t d = 0; d < ranges.size(); ++d) {
      if (empty(ranges[d])) continue;
      const std::int64_t gap = r < ranges[d].first ? ranges[d].first - r : r - ranges[d].second + 1;
      if (best_gap < 0 || gap < best_gap) {
        best = d;
        best_gap = gap;
      }
    }
    Range& q = ranges[best];
    q = empty(q) ? Range{r, r + 1} : Range{std::min(q.first, r), std::max(q.second, r + 1)};
  }
}

}  // namespace

std::vector<std::vector<Range>> plan_rows_local(const rows::RowGraph& graph, int devices) {
  std::vector<std::vector<Range>> out;
  for (const rows::RowLayer& l : graph.layers) {
    std::vector<Range> r(static_cast<size_t>(devices), Range{0, 0});
    r[0] = {0, l.rows};
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::vector<Range>> plan_rows_equal(const rows::RowGraph& graph, int devices) {
  std::vector<std::vector<Range>> out;
  for (const rows::RowLayer& l : graph.layers) {
    out.push_back(split_ranges(l.rows, std::vector<double>(static_cast<size_t>(devices), 1.0)));
  }
  return out;
}

std::vector<std::vector<Range>> plan_rows_proportional(const rows::RowGraph& graph,
                                                       const RowCosts& costs) {
  std::vector<std::vector<Range>> out;
  for (size_t l = 0; l < graph.layers.size(); ++l) {
    out.push_back(split_ranges(graph.layers[l].rows, row_speeds(costs, l)));
  }
  return out;
}

int default_last_fused(const rows::RowGraph& graph) {
  std::int64_t height = 0;
  for (const rows::RowLayer& l : graph.layers) {
    for (const rows::RowInput& in : l.inputs) {
      if (height == 0 && in.producer < 0 && in.map.kind != rows::RowMap::Kind::Whole) {
        height = in.map.in_rows;
      }
    }
  }
  int last_row_layer = static_cast<int>(graph.layers.size()) - 1;
  for (size_t l = 0; l < graph.layers.size(); ++l) {
    if (graph.layers[l].columns) continue;  // a fully connected head is not fused into tiles
    last_row_layer = static_cast<int>(l);
    if (height > 0 && graph.layers[l].rows * 4 <= height) return static_cast<int>(l);
  }
  return last_row_layer;
}

std::vector<std::vector<Range>> plan_rows_tiles(const rows::RowGraph& graph, const RowCosts& costs,
                                                int last_fused) {
  std::vector<std::vector<Range>> out = plan_rows_proportional(graph, costs);
  if (graph.layers.empty()) return out;
  if (last_fused < 0) last_fused = default_last_fused(graph);
  last_fused = std::min(last_fused, static_cast<int>(graph.layers.size()) - 1);
  const size_t n = static_cast<size_t>(costs.devices());
  for (int l = last_fused - 1; l >= 0; --l) {
    std::vector<Range> hull(n, Range{0, 0});
    bool read_in_block = false;
    for (int c : graph.consumers[static_cast<size_t>(l)]) {
      if (c > last_fused) continue;
      read_in_block = true;
      const std::vector<Range> need = consumer_needs(graph, out, l, c);
      for (size_t d = 0; d < n; ++d) {
        if (empty(need[d])) continue;
        hull[d] = empty(hull[d]) ? need[d]
                                 : Range{std::min(hull[d].first, need[d].first),
                                         std::max(hull[d].second, need[d].second)};
      }
    }
    if (!read_in_block) continue;  // stays proportional
    cover(hull, graph.layers[static_cast<size_t>(l)].rows);
    out[static_cast<size_t>(l)] = std::move(hull);
  }
  return out;
}

}  // namespace huddle
