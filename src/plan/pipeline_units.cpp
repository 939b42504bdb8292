#include "plan/pipeline_units.h"

#include "core/error.h"

#include <fmt/format.h>

namespace huddle::pipeline {

UnitKind unit_kind(int unit, std::int64_t layers) {
  HUDDLE_CHECK(unit >= 0 && unit < unit_count(layers), "unit out of range");
  if (unit == kEmbeddingUnit) return UnitKind::Embedding;
  if (unit == head_unit(layers)) return UnitKind::Head;
  return unit % 2 == 1 ? UnitKind::Attention : UnitKind::Mlp;
}

std::int64_t unit_layer(int unit, std::int64_t layers) {
  const UnitKind k = unit_kind(unit, layers);
  if (k == UnitKind::Embedding || k == UnitKind::Head) return -1;
  return (unit - 1) / 2;
}

std::string unit_name(int unit, std::int64_t layers) {
  switch (unit_kind(unit, layers)) {
    case UnitKind::Embedding:
      return "embedding";
    case UnitKind::Head:
      return "head";
    case UnitKind::Attention:
      return fmt::format("layer {} attention", unit_layer(unit, layers));
    case UnitKind::Mlp:
      break;
  }
  return fmt::format("layer {} mlp", unit_layer(unit, layers));
}

std::string describe_units(int begin, int end, std::int64_t layers) {
  HUDDLE_CHECK(0 <= begin && begin < end && end <= unit_count(layers), "bad unit range");
  std::vector<std::string> parts;
  int u = begin;
  if (u == kEmbeddingUnit) parts.push_back(unit_name(u++, layers));
  if (u < end && u != head_unit(layers) && unit_kind(u, layers) == UnitKind::Mlp)
    parts.push_back(unit_name(u++, layers));  // the second half of a layer
  // Whole layers: attention and MLP units both inside the range.
  const std::int64_t first = u < end && u != head_unit(layers) ? unit_layer(u, layers) : -1;
  std::int64_t last = first - 1;
  while (u + 1 < end && u != head_unit(layers) && unit_kind(u, layers) == UnitKind::Attention) {
    last = unit_layer(u, layers);
    u += 2;
  }
  if (last == first) parts.push_back(fmt::format("layer {}", first));
  if (last > first) parts.push_back(fmt::format("layers {}-{}", first, last));
  for (; u < end; ++u) parts.push_back(unit_name(u, layers));  // a lone attention, the head
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::vector<int> unit_of_ops(const Graph& graph, std::int64_t layers) {
  std::vector<int> units;
  std::vector<bool> mlp_seen(static_cast<std::size_t>(layers), false);
  bool any_layer = false;
  for (const Op& op : graph.ops()) {
    const std::optional<BlockKind> block = block_of(op.role);
    int u = 0;
    if (op.role == OpRole::Embed) {
      u = kEmbeddingUnit;
    } else if (op.role == OpRole::FinalNorm || op.role == OpRole::Head) {
      u = head_unit(layers);
    } else if (op.layer < 0 || op.layer >= layers) {
      u = any_layer ? head_unit(layers) : kEmbeddingUnit;
    } else {
      any_layer = true;
      const auto l = static_cast<std::size_t>(op.layer);
      const bool mlp =
          block == BlockKind::Mlp || op.role == OpRole::MlpNorm || op.role == OpRole::MlpResidual;
      if (mlp) mlp_seen[l] = true;
      const bool attention = op.role == OpRole::AttnNorm || op.role == OpRole::AttnResidual ||
                             block == BlockKind::Attention;
      u = attention            ? attention_unit(op.layer)
          : mlp || mlp_seen[l] ? mlp_unit(op.layer)
                               : attention_unit(op.layer);
    }
    units.push_back(u);
  }
  return units;
}

}  // namespace huddle::pipeline
