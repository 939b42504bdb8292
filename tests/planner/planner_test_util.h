// Shared helpers for the planner tests: paper-sized model graphs without weights, the Galaxy
// paper's device clusters.
#pragma once

#include "model/architecture.h"
#include "model/synth.h"
#include "planner/cluster.h"
#include "planner/cost_model.h"

#include <fmt/format.h>

#include <memory>
#include <string>

namespace huddle::testing {

// A model's config and graph at a preset's real size; no weights are needed to plan.
struct PaperModel {
  ModelConfig config;
  Graph graph;
  std::unique_ptr<CostModel> cost;
};

inline PaperModel paper_model(const std::string& arch_name, const std::string& preset) {
  const Architecture& arch = *find_architecture(arch_name);
  PaperModel m;
  m.config = find_preset(arch, preset);
  m.graph = arch.build_graph(m.config, [](const std::string&) { return true; });
  m.cost = std::make_unique<CostModel>(m.config, m.graph);
  return m;
}

// Jetson Nano-S/M/L at 403/825/1470 MHz: speeds in that ratio (GFLOP/s = MHz / 100).
inline DeviceSpec nano(char size, const std::string& name, std::int64_t memory_bytes) {
  const double mhz = size == 'L' ? 1470 : size == 'M' ? 825 : 403;
  DeviceSpec d;
  d.name = name;
  d.gflops = d.attention_gflops = d.mlp_gflops = d.connection_gflops = mhz / 100;
  d.memory_bytes = memory_bytes;
  return d;
}

// The Galaxy paper's environments: A/B/C = 2, 3, 4 x Nano-M; D = L+M; E = L+S; F = L+M+S.
inline std::string galaxy_env(char env) {
  switch (env) {
    case 'A':
      return "MM";
    case 'B':
      return "MMM";
    case 'C':
      return "MMMM";
    case 'D':
      return "LM";
    case 'E':
      return "LS";
    default:
      return "LMS";
  }
}

inline ClusterSpec nano_cluster(const std::string& sizes, std::int64_t memory_bytes,
                                LinkSpec link = {1e9, 0.0005}) {
  std::vector<DeviceSpec> devices;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    devices.push_back(nano(sizes[i], fmt::format("nano-{}{}", sizes[i], i), memory_bytes));
  }
  return ClusterSpec::uniform(std::move(devices), link);
}

}  // namespace huddle::testing
