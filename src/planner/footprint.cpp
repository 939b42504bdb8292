#include "planner/footprint.h"

#include "core/error.h"
#include "plan/pipeline_units.h"
#include "planner/constants.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

namespace huddle {
namespace {

std::int64_t weight_bytes(const Graph& g, ValueId id) {
  return static_cast<std::int64_t>(weight_value_bytes(g.value(id)));
}

bool is_connection(OpRole role) {
  return block_of(role) == BlockKind::Connection;
}

}  // namespace

ModelFootprint ModelFootprint::of(const Graph& graph, const ModelConfig& c) {
  ModelFootprint f;
  f.layers.resize(static_cast<std::size_t>(c.layers));
  // The embedding runs on device 0 only (lowering scatters or broadcasts its output), so its
  // tables are primary-only, like the head (which may share them, tied). Norms are everywhere.
  std::set<ValueId> seen;
  for (const bool embed : {true, false}) {
    for (const Op& op : graph.ops()) {
      if (!is_connection(op.role) || (op.role == OpRole::Embed) != embed) continue;
      for (ValueId in : op.inputs) {
        if (graph.value(in).kind != ValueKind::Weight || !seen.insert(in).second) continue;
        (embed ? f.primary_bytes : f.shared_bytes) += weight_bytes(graph, in);
      }
    }
  }
  for (const Op& op : graph.ops()) {
    if (op.role == OpRole::MlpGate) f.gated_mlp = true;
    if (op.role == OpRole::Head && op.kind == OpKind::Linear) {
      f.head_outputs = graph.value(op.output).shape.back();
      f.head_weight_bytes = weight_bytes(graph, op.inputs.at(1));
      f.head_tied = seen.contains(op.inputs.at(1));  // the embedding's tables are seen first
      for (std::size_t i = 1; i < op.inputs.size(); ++i)
        f.head_bytes += weight_bytes(graph, op.inputs[i]);
    }
    if (is_connection(op.role)) continue;
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      const ValueId in = op.inputs[i];
      if (graph.value(in).kind != ValueKind::Weight || !seen.insert(in).second) continue;
      const std::int64_t bytes = weight_bytes(graph, in);
      if (op.role == OpRole::Head) {
        f.primary_bytes += bytes;
        continue;
      }
      if (op.layer < 0 || op.layer >= c.layers) {
        throw PlanError(fmt::format(
            "weight '{}' of op '{}' is outside the transformer blocks; the planner cannot "
            "place it",
            graph.value(in).name, op.name));
      }
      LayerFootprint& l = f.layers[static_cast<std::size_t>(op.layer)];
      const bool bias = i == 2;
      switch (op.role) {
        case OpRole::AttnQ:
          l.heads_bytes += bytes;
          if (bias) l.heads_bias_bytes += bytes;
          break;
        case OpRole::AttnK:
        case OpRole::AttnV:
          l.kv_heads_bytes += bytes;
          if (bias) l.kv_heads_bias_bytes += bytes;
          break;
        case OpRole::AttnOut:
          (bias ? l.attn_primary_bytes : l.heads_bytes) += bytes;
          break;
        case OpRole::MlpUp:
        case OpRole::MlpGate:
          l.columns_bytes += bytes;
          if (bias) l.columns_bias_bytes += bytes;
          break;
        case OpRole::MlpDown:
          (bias ? l.mlp_primary_bytes : l.columns_bytes) += bytes;
          break;
        default:
          throw PlanError(fmt::format(
              "weight '{}' of op '{}' ({}) has no place in the planner's memory accounting",
              graph.value(in).name, op.name, op_role_name(op.role)));
      }
    }
  }
  for (const Op& op : graph.ops()) {
    if (op.role == OpRole::AttnCore && op.attrs.cache_slot >= 0 && op.layer >= 0 &&
        op.layer < c.layers) {
      f.layers[static_cast<std::size_t>(op.layer)].kv_cache = true;
    }
  }
  return f;
}

std::int64_t share_bytes(std::int64_t total, std::int64_t n, std::int64_t units) {
  HUDDLE_CHECK(units > 0 && n >= 0 && n <= units, "share {} of {}", n, units);
  return n == units ? total : total * n / units;
}

std::int64_t LayerFootprint::heads_share(std::int64_t n, const ModelConfig& c) const {
  return share_bytes(heads_bytes, n, c.heads);
}
std::int64_t LayerFootprint::kv_heads_share(std::int64_t n, const ModelConfig& c) const {
  return share_bytes(kv_heads_bytes, n, c.kv_heads);
}
std::int64_t LayerFootprint::columns_share(std::int64_t n, const ModelConfig& c) const {
  return share_bytes(columns_bytes, n, c.ffn);
}

std::int64_t ModelFootprint::attention_block_bytes(std::size_t layer, const ModelConfig&) const {
  const LayerFootprint& l = layers.at(layer);
  return l.heads_bytes + l.kv_heads_bytes + l.attn_primary_bytes;
}

std::int64_t ModelFootprint::mlp_block_bytes(std::size_t layer, const ModelConfig&) const {
  const LayerFootprint& l = layers.at(layer);
  return l.columns_bytes + l.mlp_primary_bytes;
}

std::int64_t ModelFootprint::total_weight_bytes(const ModelConfig& c) const {
  std::int64_t total = shared_bytes + primary_bytes;
  for (std::size_t l = 0; l < layers.size(); ++l)
    total += attention_block_bytes(l, c) + mlp_block_bytes(l, c);
  return total;
}

LayerShare layer_share(const LayerPlan& layer, const ModelConfig& c, int rank) {
  HUDDLE_CHECK(layer.attention != BlockSplit::Tiled2D, "2d-tiled layers need the plan's grid");
  LayerShare s{c.heads, c.kv_heads, c.ffn};
  const auto r = static_cast<std::size_t>(rank);
  if (layer.attention == BlockSplit::Heads) {
    const auto [hb, he] = layer.heads.at(r);
    const std::int64_t group = c.heads / c.kv_heads;
    s.heads = he - hb;
    s.kv_heads = he > hb ? (he - 1) / group + 1 - hb / group : 0;
  }
  if (layer.mlp == BlockSplit::Columns) {
    const auto [cb, ce] = layer.columns.at(r);
    s.columns = ce - cb;
  }
  return s;
}

LayerShare layer_share(const Plan& plan, std::size_t layer, const ModelConfig& c, int rank) {
  const LayerPlan& l = plan.layers.at(layer);
  if (!plan.grid) return layer_share(l, c, rank);
  const auto [hb, he] = l.heads.at(static_cast<std::size_t>(plan.grid->col_of(rank)));
  const auto [cb, ce] = l.columns.at(static_cast<std::size_t>(plan.grid->col_of(rank)));
  const std::int64_t group = c.heads / c.kv_heads;
  return LayerShare{he - hb, (he - 1) / group + 1 - hb / group, ce - cb};
}

namespace {

// Weights of device `rank`'s tiles of layer `i` of a 2D-tiled plan (see lowering_2d.cpp): the
// hidden-spanning weights of its heads and columns, scaled by its hidden rows (its share of the
// units first, then of the hidden rows: each step exact on block boundaries, and the product
// stays far inside int64); column-tiled biases live on grid row 0, the hidden rows of row-tiled
// biases on grid column 0.
std::int64_t tile_weight_bytes(const LayerFootprint& l, const ModelConfig& c, const Plan& plan,
                               std::size_t i, int rank, const LayerShare& s) {
  const Grid& g = *plan.grid;
  const auto [hb, he] = plan.layers[i].hidden.at(static_cast<std::size_t>(g.row_of(rank)));
  const std::int64_t h = he - hb, H = c.hidden;
  const bool first_row = g.row_of(rank) == 0, first_col = g.col_of(rank) == 0;
  const auto tile = [&](std::int64_t total, std::int64_t bias, std::int64_t n, std::int64_t units) {
    return share_bytes(share_bytes(total - bias, n, units), h, H) +
           (first_row ? share_bytes(bias, n, units) : 0);
  };
  std::int64_t bytes = tile(l.heads_bytes, l.heads_bias_bytes, s.heads, c.heads) +
                       tile(l.kv_heads_bytes, l.kv_heads_bias_bytes, s.kv_heads, c.kv_heads) +
                       tile(l.columns_bytes, l.columns_bias_bytes, s.columns, c.ffn);
  if (first_col) bytes += share_bytes(l.attn_primary_bytes + l.mlp_primary_bytes, h, H);
  return bytes;
}

}  // namespace

DeviceMemory device_memory(const ModelFootprint& f, const ModelConfig& c, const Plan& plan,
                           int rank, std::int64_t seq_len) {
  DeviceMemory m;
  m.weights = f.shared_bytes + (rank == 0 ? f.primary_bytes : 0);
  if (!plan.vocab.empty() && f.head_outputs > 0) {
    const auto [vb, ve] = plan.vocab.at(static_cast<std::size_t>(rank));
    if (rank == 0 && !f.head_tied) m.weights -= f.head_bytes;  // only its rows of the head
    m.weights += share_bytes(f.head_bytes, ve - vb, f.head_outputs);
  }
  std::int64_t widest = 0;  // activation columns of the widest layer on this device
  for (std::size_t i = 0; i < plan.layers.size(); ++i) {
    const LayerPlan& lp = plan.layers[i];
    const LayerFootprint& l = f.layers.at(i);
    const LayerShare s = layer_share(plan, i, c, rank);
    if (plan.grid) {
      m.weights += tile_weight_bytes(l, c, plan, i, rank, s);
    } else if (lp.attention == BlockSplit::Heads) {
      m.weights += l.heads_share(s.heads, c) + l.kv_heads_share(s.kv_heads, c) +
                   (rank == 0 ? l.attn_primary_bytes : 0);
    } else {
      m.weights += f.attention_block_bytes(i, c);
    }
    if (plan.grid) {
      // counted with the attention tiles
    } else if (lp.mlp == BlockSplit::Columns) {
      m.weights += l.columns_share(s.columns, c) + (rank == 0 ? l.mlp_primary_bytes : 0);
    } else {
      m.weights += f.mlp_block_bytes(i, c);
    }
    const std::int64_t kv_width = s.kv_heads * c.head_dim;
    if (l.kv_cache) m.kv_cache += 2 * c.max_positions * kv_width * kF32Bytes;
    // Live at once, roughly: the residual stream, a normed copy and a block output ([T, hidden]
    // each), q/k/v, the MLP intermediate (twice when gated) and one head's attention scores.
    const std::int64_t cols = 3 * c.hidden + (s.heads + 2 * s.kv_heads) * c.head_dim +
                              s.columns * (f.gated_mlp ? 2 : 1) + seq_len;
    widest = std::max(widest, cols);
  }
  m.activations = seq_len * widest * kF32Bytes;
  return m;
}

std::vector<std::int64_t> pipeline_unit_weight_bytes(const Graph& graph, const ModelConfig& c) {
  const std::vector<int> unit = pipeline::unit_of_ops(graph, c.layers);
  std::vector<std::int64_t> bytes(static_cast<std::size_t>(pipeline::unit_count(c.layers)), 0);
  std::set<std::pair<int, ValueId>> seen;  // (unit, weight)
  for (std::size_t i = 0; i < graph.ops().size(); ++i) {
    const Op& op = graph.ops()[i];
    for (const ValueId in : op.inputs) {
      if (graph.value(in).kind != ValueKind::Weight || !seen.insert({unit[i], in}).second) continue;
      bytes[static_cast<std::size_t>(unit[i])] += weight_bytes(graph, in);
    }
  }
  return bytes;
}

std::vector<std::int64_t> pipeline_unit_kv_bytes(const ModelFootprint& f, const ModelConfig& c,
                                                 std::int64_t context) {
  std::vector<std::int64_t> bytes(static_cast<std::size_t>(pipeline::unit_count(c.layers)), 0);
  for (std::int64_t l = 0; l < c.layers; ++l) {
    if (!f.layers.at(static_cast<std::size_t>(l)).kv_cache) continue;
    bytes[static_cast<std::size_t>(pipeline::attention_unit(l))] =
        2 * context * c.kv_heads * c.head_dim * kF32Bytes;
  }
  return bytes;
}

DeviceMemory pipeline_device_memory(const ModelFootprint& f, const ModelConfig& c,
                                    const std::vector<std::int64_t>& unit_weight_bytes,
                                    const Pipeline& pipeline, int rank, std::int64_t context) {
  DeviceMemory m;
  const int stage_index = pipeline.stage_of(rank);
  if (stage_index < 0) return m;
  const PipelineStage& stage = pipeline.stages[static_cast<std::size_t>(stage_index)];
  const auto member = static_cast<std::size_t>(stage.member_index(rank));
  const bool leader = stage.device == rank;
  const auto [hb, he] = stage.member_heads(c.heads)[member];
  const auto [cb, ce] = stage.member_columns(c.ffn)[member];
  const std::int64_t group = c.heads / c.kv_heads;
  const std::int64_t heads = he - hb, kv = (he - 1) / group + 1 - hb / group, columns = ce - cb;
  const std::vector<std::int64_t> kv_bytes = pipeline_unit_kv_bytes(f, c, context);
  for (std::int64_t u = stage.units.first; u < stage.units.second; ++u) {
    const auto i = static_cast<std::size_t>(u);
    const std::int64_t whole = unit_weight_bytes.at(i);
    if (!stage.grouped()) {
      m.weights += whole;
      m.kv_cache += kv_bytes[i];
      continue;
    }
    const int unit = static_cast<int>(u);
    const std::int64_t layer = pipeline::unit_layer(unit, c.layers);
    switch (pipeline::unit_kind(unit, c.layers)) {
      case pipeline::UnitKind::Embedding:
        m.weights += whole;
        break;
      case pipeline::UnitKind::Head:
        m.weights += leader ? whole : whole - f.head_weight_bytes;
        break;
      case pipeline::UnitKind::Attention: {
        const LayerFootprint& l = f.layers.at(static_cast<std::size_t>(layer));
        const std::int64_t split = l.heads_bytes + l.kv_heads_bytes + l.attn_primary_bytes;
        m.weights += whole - split + l.heads_share(heads, c) + l.kv_heads_share(kv, c) +
                     (leader ? l.attn_primary_bytes : 0);
        m.kv_cache += kv_bytes[i] / c.kv_heads * kv;
        break;
      }
      case pipeline::UnitKind::Mlp: {
        const LayerFootprint& l = f.layers.at(static_cast<std::size_t>(layer));
        const std::int64_t split = l.columns_bytes + l.mlp_primary_bytes;
        m.weights +=
            whole - split + l.columns_share(columns, c) + (leader ? l.mlp_primary_bytes : 0);
        break;
      }
    }
  }
  return m;
}

}  // namespace huddle
