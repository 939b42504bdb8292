// Memory a plan puts on each device: weights (exact, derived from the model graph by op role),
// KV cache and an activation estimate.
//
// Weights are counted in the dtype the loaded model keeps each in (the graph's Value::dtype, set by
// Model::load: F32, F16, BF16, or Q8_0 / Q4_0 blocks, dtype_bytes); KV cache and activations are
// F32, as at run time. Weights fall into: shared (every device: norms), primary-only (the
// embedding, which lowering runs on device 0 only, and the head), and per layer the parts a plan
// slices: the query heads' (q rows, out-projection columns), the kv heads' (k and v rows), the
// FFN columns' (up/gate rows, down columns), and the row-parallel biases that only device 0 holds
// when a block is split. A block split by tokens holds its whole weights on every device.
//
// A device's share of a sliced part, n of its `units` (heads, kv heads, FFN columns; and h of the
// hidden rows for a 2D tile), is total x n / units, rounded down. That is exact whenever the share
// is whole blocks of every block-quantised weight it cuts: always for scalar dtypes and for cuts
// across rows; along a row (out-projection and down-projection columns, the hidden columns of a
// 2D tile) at the multiples of 32 that Plan::aligned_to_blocks cuts FFN columns and hidden rows
// at, and for whole heads of a head_dim that is a multiple of 32. A share that cuts a block
// cannot be loaded (resolve_weight refuses it); its figure is then the rounded-down fraction. A
// single unit of a block-quantised part is not a whole number of bytes: per-unit rates (Hepti's
// coefficients, Galaxy's rebalancing step) use the fraction total / units.
//
// tests/planner checks that these sums equal program_weight_bytes(lower(...)) for every device of
// every strategy, for F32, F16, Q8_0 and Q4_0 models, 2D-tiled plans too (device (i, j) holds the
// hidden[i] x (heads[j] / columns[j]) tile of each layer weight, the column-tiled biases on grid
// row 0 and the row-tiled ones' hidden[i] rows on grid column 0).
#pragma once

#include "graph/graph.h"
#include "model/model_config.h"
#include "plan/plan.h"

#include <cstdint>
#include <vector>

namespace huddle {

// n of `units` of a part of `total` bytes: total x n / units, rounded down (see above).
std::int64_t share_bytes(std::int64_t total, std::int64_t n, std::int64_t units);

struct LayerFootprint {
  std::int64_t heads_bytes = 0;         // every query head's q rows and out-projection columns
  std::int64_t kv_heads_bytes = 0;      // every kv head's k and v rows
  std::int64_t attn_primary_bytes = 0;  // out-projection bias
  std::int64_t columns_bytes = 0;       // every FFN column's up/gate rows and down columns
  std::int64_t mlp_primary_bytes = 0;   // down-projection bias
  // The bias parts of the sliced figures above (q; k and v; MLP up and gate); the rest of each
  // is weights that span the hidden dimension, which 2D tiles split.
  std::int64_t heads_bias_bytes = 0;
  std::int64_t kv_heads_bias_bytes = 0;
  std::int64_t columns_bias_bytes = 0;
  bool kv_cache = false;  // attention keeps a KV cache (causal models)

  // The weights of n query heads, n kv heads, n FFN columns (share_bytes).
  std::int64_t heads_share(std::int64_t n, const ModelConfig& c) const;
  std::int64_t kv_heads_share(std::int64_t n, const ModelConfig& c) const;
  std::int64_t columns_share(std::int64_t n, const ModelConfig& c) const;
};

struct ModelFootprint {
  std::int64_t shared_bytes = 0;   // every device: norms
  std::int64_t primary_bytes = 0;  // device 0 only: embedding tables, head
  std::vector<LayerFootprint> layers;
  bool gated_mlp = false;         // MLP has a gate projection (llama)
  std::int64_t head_outputs = 0;  // output width of the LM head, 0 if none
  // The LM head's matrix (tied: the embedding table); its weights, matrix and bias; 0 if none.
  std::int64_t head_weight_bytes = 0;
  std::int64_t head_bytes = 0;
  bool head_tied = false;  // the head's matrix is the embedding table (counted there)

  // PlanError if the graph has a weight the accounting does not know how to place.
  static ModelFootprint of(const Graph& graph, const ModelConfig& config);

  std::int64_t attention_block_bytes(std::size_t layer, const ModelConfig& c) const;
  std::int64_t mlp_block_bytes(std::size_t layer, const ModelConfig& c) const;
  std::int64_t total_weight_bytes(const ModelConfig& c) const;
};

// What device `rank` of a plan computes in one layer.
struct LayerShare {
  std::int64_t heads = 0;     // query heads (all, when attention is split by tokens)
  std::int64_t kv_heads = 0;  // kv heads those read
  std::int64_t columns = 0;   // FFN columns (all, when the MLP is split by tokens)
};
// For a 2D-tiled layer use the Plan overload (the grid places the rank).
LayerShare layer_share(const LayerPlan& layer, const ModelConfig& config, int rank);
// Device `rank`'s share of layer `layer` of `plan`; 2D-tiled: its grid column's heads / columns.
LayerShare layer_share(const Plan& plan, std::size_t layer, const ModelConfig& config, int rank);

struct DeviceMemory {
  std::int64_t weights = 0;
  std::int64_t kv_cache = 0;     // max_positions rows of this device's k and v widths, f32
  std::int64_t activations = 0;  // estimate for a step of seq_len tokens (see footprint.cpp)
  std::int64_t total() const { return weights + kv_cache + activations; }
};

// With Plan::vocab, device r holds its vocabulary rows of the head's weights (share_bytes of
// head_bytes: exact, a row of every head weight per id), and device 0 the embedding tables whole
// besides (a tied table once more, for its rows of the head).
DeviceMemory device_memory(const ModelFootprint& footprint, const ModelConfig& config,
                           const Plan& plan, int rank, std::int64_t seq_len);

// Pipeline plans (plan/pipeline_units.h): the weight bytes of each unit, [unit_count], from
// the ops of each unit; a weight read by several units (tied embedding and head) is counted in
// each, as each stage holding one of them needs its own copy.
std::vector<std::int64_t> pipeline_unit_weight_bytes(const Graph& graph, const ModelConfig& config);
// The KV cache of each unit for `context` positions, [unit_count]: attention units of layers that
// keep a cache hold 2 x context x kv_heads x head_dim float32; other units none.
std::vector<std::int64_t> pipeline_unit_kv_bytes(const ModelFootprint& footprint,
                                                 const ModelConfig& config, std::int64_t context);
// Device `rank` of a pipeline plan: the weights and KV cache (`context` positions) of its stage's
// units (`unit_weight_bytes`: pipeline_unit_weight_bytes); none outside every stage. A member of
// a group stage holds its heads' (and the kv heads they read) and its FFN columns' parts of the
// attention and MLP units, their norms and the embedding whole, and, on the leader only, the
// row-parallel biases and the head's matrix (head_weight_bytes). No activation estimate (0).
DeviceMemory pipeline_device_memory(const ModelFootprint& footprint, const ModelConfig& config,
                                    const std::vector<std::int64_t>& unit_weight_bytes,
                                    const Pipeline& pipeline, int rank, std::int64_t context);

}  // namespace huddle
