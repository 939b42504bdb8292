// Halo fusion (see halo_fusion.h).
#include "planner/halo_fusion.h"

#include "planner/row_simulator.h"

namespace huddle {
std::vector<std::vector<Range>> fuse_halos(const rows::RowGraph& graph, const RowCosts& costs,
                                           std::vector<std::vector<Range>> ranges, int sweeps) {
  double best = simulate_rows(graph, costs, ranges).latency_s;
  // Keeps `candidate` when it is predicted faster (by more than rounding).
  auto try_keep = [&](std::vector<std::vector<Range>>& candidate) {
    const double s = simulate_rows(graph, costs, candidate).latency_s;
    if (s >= best * (1.0 - 1e-9)) return false;
    best = s;
    ranges.swap(candidate);
    return true;
  };
  const int devices = costs.devices();
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    bool changed = false;
    for (int l = static_cast<int>(graph.layers.size()) - 1; l >= 0; --l) {
      const auto layer = static_cast<std::size_t>(l);
      if (graph.layers[layer].columns) continue;  // a head's columns are not halos
      // What the layer's row consumers on each device read of it (not device 0's whole copy for
      // a tail op or an output: computing all of a layer there is the local plan's business).
      std::vector<Range> needs(static_cast<std::size_t>(devices));
      for (int consumer : graph.consumers[layer]) {
        const std::vector<Range> reads = consumer_needs(graph, ranges, l, consumer);
        for (std::size_t d = 0; d < needs.size(); ++d) needs[d] = hull(needs[d], reads[d]);
      }
      std::vector<int> short_of;  // devices whose consumers read rows they did not compute
      for (int d = 0; d < devices; ++d) {
        const auto i = static_cast<std::size_t>(d);
        if (!contains(ranges[layer][i], needs[i])) short_of.push_back(d);
      }
      if (short_of.empty()) continue;
      auto widened = [&](const std::vector<int>& which) {
        std::vector<std::vector<Range>> c = ranges;
        for (int d : which) {
          const auto i = static_cast<std::size_t>(d);
          c[layer][i] = hull(c[layer][i], needs[i]);
        }
        return c;
      };
      auto all = widened(short_of);
      if (try_keep(all)) {
        changed = true;
        continue;
      }
      if (short_of.size() == 1) continue;
      for (int d : short_of) {
        auto one = widened({d});
        changed = try_keep(one) || changed;
      }
    }
    if (!changed) break;
  }
  return ranges;
}

}  // namespace huddle
