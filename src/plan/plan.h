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
//  "token_shares": [5, 3],
//  "layers": [{"attention": "heads", "heads": [[0, 8], [8, 12]],
//              "mlp": "columns", "columns": [[0, 1920], [1920, 3072]],
//              "residual": "tokens"}, ...]}
// ("attention": "tokens" / "mlp": "tokens" need no ranges.)
#pragma once

#include "model/model_config.h"
#include "plan/split.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace huddle {

enum class BlockSplit : std::uint8_t { Heads, Columns, Tokens };
enum class ResidualLayout : std::uint8_t { Replicated, Tokens };

struct LayerPlan {
  BlockSplit attention = BlockSplit::Heads;  // Heads or Tokens
  std::vector<Range> heads;                  // per device, when Heads; contiguous, cover all
  BlockSplit mlp = BlockSplit::Columns;      // Columns or Tokens
  std::vector<Range> columns;                // per device, when Columns
  ResidualLayout residual = ResidualLayout::Replicated;
};

// The model facts a plan depends on; a plan for another model is refused.
struct PlanModel {
  std::string architecture;
  std::int64_t layers = 0, hidden = 0, ffn = 0;
  int heads = 0, kv_heads = 0;
  static PlanModel of(const ModelConfig& config);
  bool operator==(const PlanModel&) const = default;
};

struct Plan {
  std::string strategy;
  PlanModel model;
  std::vector<std::string> devices;  // device 0 is the primary
  std::vector<double> token_shares;  // per device, >= 0, not all 0
  std::vector<LayerPlan> layers;

  int num_devices() const { return static_cast<int>(devices.size()); }

  nlohmann::json to_json() const;
  // Parses and checks structure; PlanError naming `source` and the field at fault.
  static Plan from_json(const nlohmann::json& json, const std::string& source);
  static Plan load(const std::string& path);
  void save(const std::string& path) const;
  // Checks the plan against the model it is to run (ranges cover heads and columns, layer
  // count, ...); PlanError naming `source` and the field.
  void validate(const ModelConfig& config, const std::string& source) const;
};

}  // namespace huddle
