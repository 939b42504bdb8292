#include "planner/pipeline_planners.h"

#include "core/error.h"
#include "planner/footprint.h"
#include "planner/strategies.h"

#include <fmt/format.h>

#include <algorithm>

namespace huddle {

std::int64_t pipeline_table_tokens(const ModelConfig& config) {
  return std::min(config.max_positions, kMaxSliceTable);
}

Plan plan_of_schedule(const PipelineSchedule& schedule, const ModelConfig& config,
                      const ClusterSpec& cluster) {
  // Plan devices: the primary, then every stage's devices in cluster order. Cluster device 0 is
  // plan device 0, so a group's leader (device 0 when it holds it) is the same in both.
  std::vector<int> used = {0};
  for (std::size_t s = 0; s < schedule.stage_devices.size(); ++s) {
    for (const int d : schedule.group(s).members) used.push_back(d);
  }
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  std::vector<std::string> names;
  for (int d : used) names.push_back(cluster.device(d).name);
  const auto plan_index = [&](int d) {
    return static_cast<int>(std::find(used.begin(), used.end(), d) - used.begin());
  };
  std::vector<PipelineStage> stages;
  for (std::size_t s = 0; s < schedule.stage_devices.size(); ++s) {
    const StageGroup g = schedule.group(s);
    std::vector<int> members;
    for (const int d : g.members) members.push_back(plan_index(d));
    stages.push_back(PipelineStage::of(
        std::move(members), {schedule.stage_units[s].first, schedule.stage_units[s].second},
        g.single() ? std::vector<double>{} : g.shares));
  }
  std::vector<std::vector<std::int64_t>> slices;
  if (schedule.sliced) {
    for (const std::vector<int>& entry : schedule.slices)
      slices.emplace_back(entry.begin(), entry.end());
  }
  return pipeline_plan(schedule.strategy, config, std::move(names), std::move(stages),
                       std::move(slices));
}

PipelineSchedule schedule_of_plan(const Plan& plan, const ClusterSpec& cluster,
                                  std::int64_t max_tokens) {
  HUDDLE_CHECK(plan.pipelined());
  const Pipeline& p = *plan.pipeline;
  const auto index = [&](int d) {
    return cluster.index_of(plan.devices.at(static_cast<std::size_t>(d)));
  };
  PipelineSchedule s;
  s.strategy = plan.strategy;
  for (const PipelineStage& stage : p.stages) {
    s.stage_devices.push_back(index(stage.device));
    std::vector<int> members;
    for (const int d : stage.group) members.push_back(index(d));
    s.stage_members.push_back(std::move(members));
    s.stage_shares.push_back(stage.shares);
    s.stage_units.emplace_back(static_cast<int>(stage.units.first),
                               static_cast<int>(stage.units.second));
  }
  s.sliced = p.sliced;
  s.max_tokens = p.sliced ? static_cast<std::int64_t>(p.slices.size()) : max_tokens;
  for (std::int64_t n = 1; n <= s.max_tokens; ++n) {
    const std::vector<std::int64_t> lengths = p.slices_for(n);
    s.slices.emplace_back(lengths.begin(), lengths.end());
  }
  return s;
}

Prediction predict_pipeline_plan(const CostModel& cost, const Plan& plan,
                                 const ClusterSpec& cluster, std::int64_t seq_len) {
  const PipelineSchedule schedule = schedule_of_plan(plan, cluster, seq_len);
  const PipelinePrediction pp = predict_pipeline(cost, cluster, schedule, seq_len);
  Prediction out;
  out.latency_s = pp.prefill_s;
  out.decode_s = pp.decode_s;
  for (int d = 0; d < plan.num_devices(); ++d) {
    DevicePrediction dp;
    dp.name = plan.devices[static_cast<std::size_t>(d)];
    const int stage = plan.pipeline->stage_of(d);
    if (stage >= 0) {
      const std::size_t i = static_cast<std::size_t>(stage);
      const PipelineStage& st = plan.pipeline->stages[i];
      dp.stage = stage;
      dp.units = st.units;
      dp.tokens = seq_len;
      dp.compute_s = pp.stage_busy_s[i];
      dp.memory = pipeline_device_memory(cost.footprint(), cost.config(), cost.unit_weight_bytes(),
                                         *plan.pipeline, d, cost.config().max_positions);
      if (st.grouped()) {
        const auto member = static_cast<std::size_t>(st.member_index(d));
        const Range h = st.member_heads(cost.config().heads)[member];
        const Range c = st.member_columns(cost.config().ffn)[member];
        dp.heads = h.second - h.first;
        dp.columns = c.second - c.first;
      }
    }
    out.devices.push_back(std::move(dp));
  }
  return out;
}

}  // namespace huddle
