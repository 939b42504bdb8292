// The fixed strategies, as plans: local, megatron, sp, galaxy, and the pipelines `pipeline`
// (units in proportion to the shares, in device order, each step cut into as many equal slices
// as there are stages; encoders unsliced) and `gpipe` (even units, whole steps). Splits follow
// relative device speeds (`shares`, primary first); measured shares and the optimising planners
// (Galaxy's memory rebalancing, Hepti's MILP) build on these.
#pragma once

#include "model/model_config.h"
#include "plan/plan.h"

#include <string>
#include <vector>

namespace huddle {

// Names accepted by make_plan.
const std::vector<std::string>& strategy_names();

// `devices` names the devices, primary first; `shares` has one positive entry per device (empty:
// equal shares). A causal model's head is split by vocabulary on several devices (vocab_split).
// UsageError for an unknown strategy or a share count that does not match; PlanError when the model
// cannot be split that way (more devices than heads for tensor parallelism).
Plan make_plan(const std::string& strategy, const ModelConfig& config,
               const std::vector<std::string>& devices, std::vector<double> shares);

// Plan::vocab for a layer-split plan of several devices: `vocab` rows in proportion to each
// device's FFN columns in the last layer (its share of the MLP, which planners size to its speed
// and memory), or to the token shares when that layer splits the MLP by tokens; at least one row
// each.
std::vector<Range> vocab_split(const Plan& plan, std::int64_t vocab);

// The slice table of a pipeline that cuts a step of n tokens into min(n, count) equal slices,
// for n = 1..min(max_tokens, kMaxSliceTable).
inline constexpr std::int64_t kMaxSliceTable = 8192;
std::vector<std::vector<std::int64_t>> equal_slice_table(std::int64_t max_tokens,
                                                         std::int64_t count);

// A pipeline plan over `devices` (primary first): stage s runs `stage_units[s]` on device
// `stage_devices[s]` (indices into `devices`); `slices` is the slice table (empty: unsliced).
Plan pipeline_plan(std::string strategy, const ModelConfig& config,
                   std::vector<std::string> devices, const std::vector<int>& stage_devices,
                   const std::vector<Range>& stage_units,
                   std::vector<std::vector<std::int64_t>> slices);
// The same with stages given whole (group stages among them: plan/pipeline.h).
Plan pipeline_plan(std::string strategy, const ModelConfig& config,
                   std::vector<std::string> devices, std::vector<PipelineStage> stages,
                   std::vector<std::vector<std::int64_t>> slices);

}  // namespace huddle
