// HPipe planning (papers/hpipe-pipeline-sequence-slicing): pipeline stages over heterogeneous
// devices and the slicing of the prompt into token chunks, from the cost model and a cluster.
// Units and stages: plan/pipeline_units.h. The algorithms: planner/hpipe_dp.h.
//
// Costs (docs/planner.md, "HPipe", states them all):
//   compute   CostModel::unit_seconds of each unit on each device; a slice [a, b) of the prompt
//             is a step of b - a tokens with b keys;
//   transfer  the activation [tokens, hidden] float32 between consecutive stages over the link
//             between their devices (LinkSpec::transfer_s, one message); the sender is busy
//             while it sends (the paper's t_ij = t_c + t_t);
//   ends      device 0, the primary, sends the token ids to the first stage (4 bytes a token) and
//             receives the output of the last: one row of logits (vocab floats), or for a model
//             without a head the [tokens, hidden] hidden states; both are nothing when the stage
//             is on device 0. The LM head runs once per request, on the last row of the last slice;
//   memory    a device may take a range when its units' weights (pipeline_unit_weight_bytes)
//             plus their KV cache for max_tokens positions fit DeviceSpec::memory_bytes
//             (activations are not counted).
// Algorithm 1 balances the units at the whole prompt (prompt_len tokens, prompt_len keys).
//
// Fast islands (hpipe_islands.h): a stage may be a group of devices running its units
// tensor-parallel. plan_hpipe plans every view of the cluster (each set of disjoint islands
// collapsed into groups, and the plain view) and keeps the fastest predicted prefill.
#pragma once

#include "planner/cluster.h"
#include "planner/cost_model.h"
#include "planner/hpipe_islands.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace huddle {

struct PipelineSchedule {
  std::string strategy;            // "hpipe", "gpipe", "uniform-slices"
  std::vector<int> stage_devices;  // cluster indices, pipeline order (a group's leader)
  // Per stage, a tensor-parallel group's members (cluster indices, group order) and shares; an
  // empty entry, or empty vectors, for a one-device stage.
  std::vector<std::vector<int>> stage_members;
  std::vector<std::vector<double>> stage_shares;
  std::vector<std::pair<int, int>> stage_units;  // [begin, end) per stage, covering 0..U once
  bool sliced = false;                           // false: every prompt is one slice
  // slices[n-1]: slice lengths (summing to n) for an n-token prompt, n = 1..max_tokens. Unsliced
  // schedules hold {n} for every n.
  std::vector<std::vector<int>> slices;
  std::int64_t max_tokens = 0;     // the context length the schedule was made for
  std::int64_t prompt_len = 0;     // the prompt length of the predictions below
  double predicted_prefill_s = 0;  // predict_pipeline at prompt_len
  double predicted_decode_s = 0;
  std::vector<double> stage_busy_s;              // per stage, in the prefill: compute + sends
  std::vector<std::int64_t> stage_memory_bytes;  // per stage: weights + KV cache
  std::string note;                              // why unsliced, approximations used

  // Stage i's devices: its group, or its device alone.
  StageGroup group(std::size_t i) const;
  bool hybrid() const;  // some stage is a group
};

struct PipelinePrediction {
  double prefill_s = 0;              // prompt in, last token's output at device 0
  double decode_s = 0;               // one token through every stage, its output at device 0
  std::vector<double> stage_busy_s;  // per stage: its compute and sends over all slices
};

struct HpipeOptions {
  bool sliced = true;  // false: every prompt is one slice (forced for encoders)
  // Prompt lengths up to this are sliced exactly (every boundary, every cap: O(n^4)); longer
  // ones in tiers (exact_tokens+1 .. 4 x exact_tokens, then up to 4x that, ...), each with slice
  // boundaries on a granule of tokens and thinned caps (hpipe_dp.h, SlicingOptions).
  int exact_tokens = 48;
  int granule = 0;     // the tiers' granule; 0: each tier's longest length / 64, at least 1
  int max_caps = 192;  // caps kept beyond exact_tokens
  int max_uniform_slices = 64;  // uniform-slices: largest slice count tried
  // Beyond the paper (hpipe_dp.h, SlicingOptions::refine): equal slicings as candidates too and a
  // local search of the boundaries on the simulated makespan. false: HPipe's Algorithm 2 alone.
  bool refine = true;
  // Fast islands (hpipe_islands.h): plan_hpipe also tries stages made of islands whose internal
  // links have at least island_ratio times the bandwidth of their links out.
  bool islands = true;
  double island_ratio = 4.0;
};

// HPipe: Algorithm 1 over every device order (hpipe_dp.h), then Algorithm 2 for every prompt
// length 1..max_tokens; with options.islands, for every island view of the cluster, keeping the
// plan of the smallest predicted prefill (the note says which islands, and the plain pipeline's
// prediction). Encoders (config.causal false, attention reads every token) are planned
// without slicing, and `note` says so. PlanError when prompt_len is not in 1..max_tokens, when
// max_tokens exceeds the model's max_positions, or when no assignment fits in memory (naming
// the largest need and the devices' budgets).
PipelineSchedule plan_hpipe(const CostModel& cost, const ClusterSpec& cluster,
                            std::int64_t prompt_len, std::int64_t max_tokens,
                            const HpipeOptions& options = {});

// GPipe-like baseline: the transformer layers split evenly over the devices in cluster order
// (the first devices get one more when they do not divide), the embedding with the first stage,
// the head with the last; every prompt one slice. With more devices than layers, the first
// `layers` devices. PlanError when a stage does not fit its device.
PipelineSchedule plan_gpipe(const CostModel& cost, const ClusterSpec& cluster,
                            std::int64_t prompt_len, std::int64_t max_tokens);

// TeraPipe-like baseline: HPipe's stages (Algorithm 1, over the same island views as plan_hpipe),
// the prompt cut into k equal slices (the first n mod k one token longer), k = 1..min(n,
// max_uniform_slices) chosen by the simulated makespan. Encoders unsliced, as plan_hpipe.
PipelineSchedule plan_uniform_slices(const CostModel& cost, const ClusterSpec& cluster,
                                     std::int64_t prompt_len, std::int64_t max_tokens,
                                     const HpipeOptions& options = {});

// The flow-shop prediction of `schedule` for a prompt of prompt_len tokens (the slices of its
// table). PlanError when prompt_len is not in 1..schedule.max_tokens or the schedule is
// malformed (stages not covering the units exactly once, a slice table entry missing or not
// summing to its length, a device index outside the cluster).
PipelinePrediction predict_pipeline(const CostModel& cost, const ClusterSpec& cluster,
                                    const PipelineSchedule& schedule, std::int64_t prompt_len);

// Checks the structure of `schedule` against the model and cluster; PlanError naming the fault.
void validate_schedule(const PipelineSchedule& schedule, const ModelConfig& config,
                       const ClusterSpec& cluster);

}  // namespace huddle
