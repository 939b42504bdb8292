// Plan: how one model runs on a cluster — plain data, JSON in and out, validated against the
// model. Planners write plans; lowering turns a plan into one Program per device; the runtime
// only executes.
//
// Per transformer block the plan chooses, for the attention and MLP sub-blocks, tensor
// parallelism (each device computes a range of heads / FFN columns) or sequence parallelism
// (each device computes its own tokens with the whole weights), and for the connection blocks
// (residual adds and norms) whether the residual stream is replicated or split by tokens:
//   megatron = heads + columns + replicated;  sp = tokens everywhere;
//   galaxy   = heads + columns + tokens (all-gather before, reduce-scatter after each block).
// Tokens are split at run time in proportion to `token_shares` (the step's T is not known when
// planning); heads and columns are fixed ranges.
//
// JSON:
// {"version": 1, "strategy": "galaxy",
//  "model": {"architecture": "gpt2", "layers": 12, "hidden": 768, "heads": 12, "kv_heads": 12,
//            "ffn": 3072},
//  "devices": [{"name": "primary"}, {"name": "127.0.0.1:7001"}],
//  "token_shares": [5, 3], "wire": "f16" (optional: f32, f16, bf16 or int8),
//  "gather_chunks": 4 (optional, default 1),
//  "layers": [{"attention": "heads", "heads": [[0, 8], [8, 12]],
//              "mlp": "columns", "columns": [[0, 1920], [1920, 3072]],
//              "residual": "tokens"}, ...],
//  "vocab": [[0, 31000], [31000, 50257]] (optional)}
// ("attention": "tokens" / "mlp": "tokens" need no ranges.)
// "vocab" splits the LM head by output rows (vocabulary ids): every device computes the logits
// of its range for the last row, which is on every device, and device 0 gathers them. Without
// it device 0 computes the whole head. Layer-split (1D) plans only; a range may be empty.
//
// 2D-tiled (Hepti's 2D-tiled weight-stationary mode; lowering_2d.cpp): the devices form a
// grid of `rows` x `cols`, device r at grid row r / cols, grid column r % cols (row-major, the
// primary at (0, 0)). Per layer, hidden ranges per grid row and head / FFN-column ranges per grid
// column (uneven allowed, at least one unit each); device (i, j) holds the (hidden[i]) x
// (heads[j] / columns[j]) tile of every weight of the layer. Every layer is 2d-tiled and the
// residual stream is replicated:
// {"version": 1, "strategy": "hepti", "model": {...}, "devices": [...4 devices...],
//  "token_shares": [1, 1, 1, 1], "grid": {"rows": 2, "cols": 2},
//  "layers": [{"attention": "2d-tiled", "mlp": "2d-tiled", "residual": "replicated",
//              "hidden": [[0, 40], [40, 64]], "heads": [[0, 2], [2, 4]],
//              "columns": [[0, 100], [100, 256]]}, ...]}
// Token shares split a grid column's work on its tokens among the column's devices.
//
// Pipeline (HPipe; plan/pipeline.h): a "pipeline" object gives each stage's device and units and
// the slice table; "layers" is empty, since each stage runs its units whole.
//
// Operator-assignment plans (plan/assignment.h): "assignment" puts each op on one provider;
// "layers" is empty.
//
// Row-split CNN plans (EdgeFlow; plan/row_plan.h): "rows" gives each row layer's output rows per
// device; "model" is {"architecture": "onnx", "layers": <row layers>, the rest 0} and "layers" is
// empty.
#pragma once

#include "core/wire_format.h"
#include "model/model_config.h"
#include "plan/assignment.h"
#include "plan/pipeline.h"
#include "plan/row_plan.h"
#include "plan/split.h"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <vector>

namespace huddle {

enum class BlockSplit : std::uint8_t { Heads, Columns, Tokens, Tiled2D };
enum class ResidualLayout : std::uint8_t { Replicated, Tokens };

struct LayerPlan {
  BlockSplit attention = BlockSplit::Heads;  // Heads, Tokens or Tiled2D
  std::vector<Range> heads;  // per device when Heads, per grid column when Tiled2D; cover all
  BlockSplit mlp = BlockSplit::Columns;  // Columns, Tokens or Tiled2D (with attention)
  std::vector<Range> columns;            // per device when Columns, per grid column when Tiled2D
  std::vector<Range> hidden;             // per grid row, when Tiled2D
  ResidualLayout residual = ResidualLayout::Replicated;
};

// The device grid of a 2D-tiled plan: device r is at (r / cols, r % cols).
struct Grid {
  int rows = 1, cols = 1;
  int row_of(int rank) const { return rank / cols; }
  int col_of(int rank) const { return rank % cols; }
  int rank_at(int row, int col) const { return row * cols + col; }
  // Global ranks of grid row `row` (a row group: same hidden range), in column order, and of
  // grid column `col` (a column group: same heads / FFN columns), in row order.
  std::vector<int> row_group(int row) const;
  std::vector<int> column_group(int col) const;
  bool operator==(const Grid&) const = default;
};

// The model facts a plan depends on; a plan for another model is refused.
struct PlanModel {
  std::string architecture;
  std::int64_t layers = 0, hidden = 0, ffn = 0;
  int heads = 0, kv_heads = 0;
  static PlanModel of(const ModelConfig& config);
  static PlanModel of(const rows::RowGraph& graph);  // {"onnx", row (not column) layers, 0...}
  bool operator==(const PlanModel&) const = default;
};

struct Plan {
  std::string strategy;
  PlanModel model;
  std::vector<std::string> devices;  // device 0 is the primary
  std::vector<double> token_shares;  // per device, >= 0, not all 0
  // The form activations travel in between devices (core/wire_format.h); JSON "wire", omitted
  // for f32 (exact, the default). The model's outputs (logits) always travel exactly.
  WireFormat wire = WireFormat::F32;
  // Galaxy's overlap granularity: each device's rows of an all-gather whose readers are linears
  // travel as this many chunks (1 to kMaxGatherChunks; also at most 1 MiB each), and the linears
  // run on each chunk as it lands, so compute on arrived rows covers the transfer of the rest.
  // Planners choose it with the cost model; JSON "gather_chunks", omitted for 1.
  int gather_chunks = 1;
  static constexpr int kMaxGatherChunks = 64;
  std::vector<LayerPlan> layers;
  // The LM head's vocabulary rows per device (1D plans; contiguous, in device order, covering
  // the head's outputs); empty: the head runs whole on device 0. JSON "vocab", omitted if empty.
  std::vector<Range> vocab;
  std::optional<Grid> grid;          // 2D-tiled plans only; then every layer is Tiled2D
  std::optional<Pipeline> pipeline;  // pipeline plans only; then `layers` is empty
  std::optional<RowPlan> rows;       // row-split CNN plans only; then `layers` is empty
  // Operator-assignment plans only; then `layers` is empty.
  std::optional<OpAssignment> assignment;

  int num_devices() const { return static_cast<int>(devices.size()); }
  bool tiled_2d() const { return grid.has_value(); }
  bool pipelined() const { return pipeline.has_value(); }
  bool row_split() const { return rows.has_value(); }
  bool op_assigned() const { return assignment.has_value(); }

  nlohmann::json to_json() const;
  // Parses and checks structure; PlanError naming `source` and the field at fault.
  static Plan from_json(const nlohmann::json& json, const std::string& source);
  static Plan load(const std::string& path);
  void save(const std::string& path) const;
  // Checks the plan against the model it is to run (ranges cover heads, columns and the
  // vocabulary, layer count, ...); PlanError naming `source` and the field.
  void validate(const ModelConfig& config, const std::string& source) const;
  // The same for a row-split or operator-assignment plan against an imported CNN's row layers
  // (the model facts; an assignment's ops are checked against the graph when lowering).
  void validate(const rows::RowGraph& graph, const std::string& source) const;

  // This plan with its MLP-column and hidden ranges cut at multiples of `granule` — 32 for a
  // model with Q8_0/Q4_0 weights, whose columns split only between blocks (Model::weight_block);
  // a pipeline's group stages get fixed member columns (PipelineStage::columns) cut so. Head
  // ranges are left (whole heads of a head_dim that is a multiple of 32 are whole blocks).
  // PlanError naming the layer or stage when a device's share becomes empty (too narrow a model).
  Plan aligned_to_blocks(std::int64_t granule, const ModelConfig& config) const;
};

}  // namespace huddle
