#include "planner/row_costs.h"

#include <cstddef>

namespace huddle {

double RowCosts::unit_s(int layer, int device, std::int64_t rows) const {
  if (rows <= 0) return 0;
  const auto l = static_cast<std::size_t>(layer), d = static_cast<std::size_t>(device);
  return per_row[l][d] * static_cast<double>(rows) + fixed[l][d];
}

double RowCosts::message_s(int src, int dst, double bytes) const {
  if (src == dst || bytes <= 0) return 0;
  const auto s = static_cast<std::size_t>(src), d = static_cast<std::size_t>(dst);
  return latency_s[s][d] + bytes * seconds_per_byte[s][d];
}

RowCosts row_costs(const rows::RowGraph& graph, const ClusterSpec& cluster) {
  const int n = cluster.size();
  RowCosts c;
  for (const rows::RowLayer& layer : graph.layers) {
    std::vector<double> per_row, fixed;
    for (const DeviceSpec& d : cluster.devices()) {
      if (d.curves) {
        const OpCurve& curve =
            layer.kind == OpKind::Conv2d ? d.curves->gemm : d.curves->elementwise;
        per_row.push_back(layer.flops_per_row / (curve.gflops * 1e9));
        fixed.push_back(curve.overhead_s);
      } else {
        per_row.push_back(layer.flops_per_row / (d.gflops * 1e9));
        fixed.push_back(kRowUnitOverheadS);
      }
    }
    c.per_row.push_back(std::move(per_row));
    c.fixed.push_back(std::move(fixed));
  }
  const DeviceSpec& primary = cluster.device(0);
  for (const rows::TailOp& t : graph.tail) {
    c.tail.push_back(primary.curves ? primary.curves->gemm.seconds(t.flops)
                                    : t.flops / (primary.gflops * 1e9) + kRowUnitOverheadS);
  }
  c.latency_s.assign(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(n)));
  c.seconds_per_byte = c.latency_s;
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      const LinkSpec link = cluster.link(s, d);
      c.latency_s[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)] = link.latency_s;
      c.seconds_per_byte[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)] =
          8.0 / link.bandwidth_bps;
    }
  }
  return c;
}

}  // namespace huddle
