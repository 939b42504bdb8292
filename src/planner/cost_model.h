// Cost model / simulator: predicts each device's compute and communication and the end-to-end
// latency of any Plan on a ClusterSpec (docs/planner.md states every assumption).
//
// Compute: FLOPs per device per op (2·rows·K·N for its slice of each linear, 4·rows·context·
// head_dim per attention head, a few FLOPs per element for norms, activations and residuals)
// over the device's fitted curve for the op's class (GEMM, attention, element-wise: a fixed cost
// per op plus FLOPs over throughput) when the cluster file has one, else divided by the device's
// speed for the op's block type.
// Communication: the data movement lowering inserts for the plan's layouts, over ring order
// 0 -> 1 -> ... -> n-1 -> 0. A ring all-gather / reduce-scatter runs n-1 steps; in each step every
// device sends one part to its successor and the step lasts as long as its slowest transfer
// (latency + bytes / bandwidth). An all-reduce is a reduce-scatter plus an all-gather of equal
// parts. gather_to_primary sends every part straight to device 0, and with several devices the
// embedding runs on device 0, which sends each device its rows (token-split) or all rows
// (replicated) straight (transfers in parallel, each on its own link).
// Synchronisation: a collective starts when every device has finished the compute before it
// (bulk-synchronous). Galaxy overlap: an all-gather whose consumers are linears takes
// max(comm, their compute but that on the last chunk to arrive) + the last chunk's compute per
// device (the plan's gather_chunks chunks per part, each chunk beyond one costing a message's
// fixed time per ring step); a reduce-scatter whose producer is a linear takes max(comm, that
// linear's compute) (ideal tiling); megatron's all-reduce and sp's K/V all-gather (one, of
// their joined columns, except with int8 on the wire: two) do not overlap (as in the executor).
#pragma once

#include "graph/graph.h"
#include "model/model_config.h"
#include "plan/plan.h"
#include "planner/cluster.h"
#include "planner/footprint.h"

#include <cstdint>
#include <string>
#include <vector>

namespace huddle {

struct DevicePrediction {
  std::string name;
  std::int64_t tokens = 0;    // rows of the step this device computes in connection blocks
  std::int64_t heads = 0;     // query heads it computes in the first layer
  std::int64_t columns = 0;   // FFN columns it computes in the first layer
  double compute_s = 0;       // its own compute
  double comm_s = 0;          // time inside collectives it takes part in
  double exposed_comm_s = 0;  // part of comm_s no compute of its own overlaps
  int stage = -1;             // pipeline plans: the stage it runs (-1: none, or not a pipeline)
  Range units{0, 0};          // pipeline plans: its stage's units
  double busy_s() const { return compute_s + exposed_comm_s; }
  DeviceMemory memory;
};

struct Prediction {
  double latency_s = 0;                   // prefill of seq_len tokens, end to end
  double decode_s = 0;                    // one decode step with seq_len tokens of context
  std::vector<DevicePrediction> devices;  // plan order
  // The first device whose memory exceeds its budget, -1 if all fit.
  int first_over_budget(const ClusterSpec& cluster) const;
};

class CostModel {
 public:
  // Plans are predicted, and planners plan, for activations that travel between devices in
  // `wire` (core/wire_format.h); the model's outputs are counted as f32.
  CostModel(const ModelConfig& config, const Graph& graph, WireFormat wire = WireFormat::F32);

  const ModelConfig& config() const { return config_; }
  WireFormat wire() const { return wire_; }
  // Bytes of `rows` activation rows of `width` values in wire().
  double activation_bytes(double rows, std::int64_t width) const {
    return rows * static_cast<double>(width) * wire_bytes_per_value(wire_, width);
  }
  const ModelFootprint& footprint() const { return footprint_; }

  // Plan devices are looked up in `cluster` by name (PlanError naming a missing one). 2d-tiled
  // plans get predict_tiled_2d's estimate.
  Prediction predict(const Plan& plan, const ClusterSpec& cluster, std::int64_t seq_len) const;
  // An estimate for a 2d-tiled plan, not a step-by-step simulation: each device does its tile's
  // fraction of every block's FLOPs at its speed; the collectives lowering_2d.cpp runs per layer
  // are timed in device 0's row and column groups; bulk-synchronous, no overlap credited. No
  // decode figure (0).
  Prediction predict_tiled_2d(const Plan& plan, const ClusterSpec& cluster,
                              std::int64_t seq_len) const;
  // One step of `tokens` new tokens with `context` positions in the KV cache after it; fills
  // the devices' compute/comm and returns the latency. PlanError for a 2d-tiled plan.
  double simulate_step(const Plan& plan, const ClusterSpec& cluster, std::int64_t tokens,
                       std::int64_t context, std::vector<DevicePrediction>* devices) const;

  // FLOPs per unit of work for a step of `tokens` rows with `context` keys, with the
  // simulator's constants (the optimising planners' linear cost coefficients).
  struct UnitFlops {
    double per_head = 0;           // one query head: q, out and attention, plus 1/group of k and v
    double per_column = 0;         // one FFN column (all rows)
    double conn_per_row = 0;       // norms and residuals of one layer, one row
    double attention_per_row = 0;  // a whole attention block, one query row (split by tokens)
    double mlp_per_row = 0;        // a whole MLP block, one row
  };
  UnitFlops unit_flops(std::int64_t tokens, std::int64_t context) const;

  // Pipeline plans (plan/pipeline_units.h): seconds `device` takes for pipeline unit `unit`
  // alone in a step of `tokens` new tokens with `context` keys, with the simulator's FLOPs and
  // curves: summed over all units, simulate_step of a local plan on that device. The last unit
  // includes the LM head over one row (the last token's logits) when `logits`. Linear in
  // `context` for context >= 1 (only attention reads it). PlanError for an out-of-range unit.
  // `share` (0, 1]: the device computes only that fraction of the unit's attention heads (with
  // their kv heads) or FFN columns, as a member of a tensor-parallel group stage; its norms,
  // residuals, embedding and head stay whole.
  double unit_seconds(int unit, const DeviceSpec& device, std::int64_t tokens, std::int64_t context,
                      bool logits = true, double share = 1.0) const;
  // The LM head over one row on `device` (0 for a model without a head).
  double head_seconds(const DeviceSpec& device) const;
  // pipeline_unit_weight_bytes of the model's graph (footprint.h), [unit_count].
  const std::vector<std::int64_t>& unit_weight_bytes() const { return unit_weight_bytes_; }

 private:
  ModelConfig config_;
  WireFormat wire_ = WireFormat::F32;
  ModelFootprint footprint_;
  std::vector<std::int64_t> unit_weight_bytes_;
  bool rotary_ = false;  // the graph has RoPE ops
};

// Ring collective times over devices `ring` (cluster indices, in ring order); `part_bytes` per
// ring position. Exposed for tests and the Hepti formulation.
double ring_all_gather_s(const ClusterSpec& cluster, const std::vector<int>& ring,
                         const std::vector<double>& part_bytes);
double ring_reduce_scatter_s(const ClusterSpec& cluster, const std::vector<int>& ring,
                             const std::vector<double>& part_bytes);
double ring_all_reduce_s(const ClusterSpec& cluster, const std::vector<int>& ring,
                         double total_bytes);

}  // namespace huddle
