#include "planner/row_costs.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
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
  return overhead_s(src) + latency_s[s][d] + bytes * transfer_s_per_byte(src, dst);
}

double RowCosts::transfer_s_per_byte(int src, int dst) const {
  if (src == dst) return 0;
  return seconds_per_byte[static_cast<std::size_t>(src)][static_cast<std::size_t>(dst)] +
         cpu_s(src) + cpu_s(dst);
}

double RowCosts::cpu_s(int device) const {
  const auto d = static_cast<std::size_t>(device);
  return d < cpu_s_per_byte.size() ? cpu_s_per_byte[d] : 0.0;
}

double RowCosts::overhead_s(int src) const {
  const auto s = static_cast<std::size_t>(src);
  return s < message_overhead_s.size() ? message_overhead_s[s] : 0.0;
}

namespace {

// Seconds that take `seconds_at_one_core` of CPU on `device`: longer on a fraction of a core.
double at_cores(const DeviceSpec& device, double seconds_at_one_core) {
  return seconds_at_one_core / (device.cores > 0 ? std::min(device.cores, 1.0) : 1.0);
}

// How `device` runs a layer of `kind`: FLOP/s and the fixed seconds of a unit.
struct Rate {
  double flops_per_s, fixed_s;
};

// A column layer's linear over one row of input (batch 1: a GEMV, bound by reading the weights)
// runs at the GEMV curve, over several at the GEMM curve; convs at the GEMM curve; the rest at the
// element-wise curve.
Rate layer_rate(const DeviceSpec& device, const rows::RowLayer& layer) {
  const bool linear = layer.kind == OpKind::Linear || layer.kind == OpKind::MatMul;
  const bool gemv = linear && layer.bytes_per_row <= static_cast<std::int64_t>(sizeof(float));
  if (!device.curves) {
    return {device.gflops * 1e9 / (gemv ? kRowGemvSlowdown : 1.0),
            at_cores(device, kRowUnitOverheadS)};
  }
  const OpCurve& curve = gemv                                     ? device.curves->gemv
                         : layer.kind == OpKind::Conv2d || linear ? device.curves->gemm
                                                                  : device.curves->elementwise;
  return {curve.gflops * 1e9, curve.overhead_s};
}

Rate tail_rate(const DeviceSpec& primary) {
  if (!primary.curves) return {primary.gflops * 1e9, at_cores(primary, kRowUnitOverheadS)};
  return {primary.curves->gemm.gflops * 1e9, primary.curves->gemm.overhead_s};
}

}  // namespace

RowCosts row_costs(const rows::RowGraph& graph, const ClusterSpec& cluster, WireFormat wire) {
  const int n = cluster.size();
  RowCosts c;
  for (const rows::RowLayer& layer : graph.layers) {
    std::vector<double> per_row, fixed;
    for (const DeviceSpec& d : cluster.devices()) {
      const Rate rate = layer_rate(d, layer);
      per_row.push_back(layer.flops_per_row / rate.flops_per_s);
      fixed.push_back(rate.fixed_s);
    }
    c.per_row.push_back(std::move(per_row));
    c.fixed.push_back(std::move(fixed));
  }
  const Rate primary = tail_rate(cluster.device(0));
  for (const rows::TailOp& t : graph.tail) {
    c.tail.push_back(t.flops / primary.flops_per_s + primary.fixed_s);
  }
  const double wire_share = wire_bytes_per_value(wire, kWireAllReduceRow) / 4.0;
  for (const DeviceSpec& d : cluster.devices()) {
    c.message_overhead_s.push_back(at_cores(d, kRowMessageOverheadS));
    c.cpu_s_per_byte.push_back(d.comm_cpu_s_per_byte * wire_share);
  }
  c.latency_s.assign(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(n)));
  c.seconds_per_byte = c.latency_s;
  c.egress.assign(static_cast<std::size_t>(n), std::vector<int>(static_cast<std::size_t>(n), n));
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      if (cluster.has_own_link(s, d))
        c.egress[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)] = d;
      const LinkSpec link = cluster.link(s, d);
      c.latency_s[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)] = link.latency_s;
      c.seconds_per_byte[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)] =
          8.0 / link.bandwidth_bps * wire_share;
    }
  }
  return c;
}

rows::RowGraph calibrate_row_graph(const rows::RowGraph& graph, const ClusterSpec& cluster,
                                   const RowProfile& profile) {
  if (profile.layer_s.size() != graph.layers.size() || profile.tail_s.size() != graph.tail.size()) {
    throw PlanError(fmt::format(
        "a profile of {} row layers and {} tail ops does not fit a graph of {} and {}",
        profile.layer_s.size(), profile.tail_s.size(), graph.layers.size(), graph.tail.size()));
  }
  rows::RowGraph out = graph;
  const DeviceSpec& primary = cluster.device(0);
  for (std::size_t l = 0; l < out.layers.size(); ++l) {
    rows::RowLayer& layer = out.layers[l];
    if (profile.layer_s[l] < 0 || layer.rows <= 0) continue;
    const Rate rate = layer_rate(primary, layer);
    layer.flops_per_row = std::max(0.0, profile.layer_s[l] - rate.fixed_s) /
                          static_cast<double>(layer.rows) * rate.flops_per_s;
  }
  const Rate rate = tail_rate(primary);
  for (std::size_t t = 0; t < out.tail.size(); ++t) {
    if (profile.tail_s[t] < 0) continue;
    out.tail[t].flops = std::max(0.0, profile.tail_s[t] - rate.fixed_s) * rate.flops_per_s;
  }
  return out;
}

}  // namespace huddle
