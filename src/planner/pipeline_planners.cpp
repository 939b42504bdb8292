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
  // Plan devices: the primary, then every stage device in cluster order.
  std::vector<int> used = {0};
  for (int d : schedule.stage_devices) used.push_back(d);
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  std::vector<std::string> names;
  for (int d : used) names.push_back(cluster.device(d).name);
  std::vector<int> stage_devices;
  std::vector<Range> stage_units;
  for (std::size_t s = 0; s < schedule.stage_devices.size(); ++s) {
    const auto at = std::find(used.begin(), used.end(), schedule.stage_devices[s]);
    stage_devices.push_back(static_cast<int>(at - used.begin()));
    stage_units.emplace_back(schedule.stage_units[s].first, schedule.stage_units[s].second);
  }
  std::vector<std::vector<std::int64_t>> slices;
  if (schedule.sliced) {
    for (const std::vector<int>& entry : schedule.slices)
      slices.emplace_back(entry.begin(), entry.end());
  }
  return pipeline_plan(schedule.strategy, config, std::move(names), stage_devices, stage_units,
                       std::move(slices));
}

PipelineSchedule schedule_of_plan(const Plan& plan, const ClusterSpec& cluster,
                                  std::int64_t max_tokens) {
  HUDDLE_CHECK(plan.pipelined());
  const Pipeline& p = *plan.pipeline;
  PipelineSchedule s;
  s.strategy = plan.strategy;
  for (const PipelineStage& stage : p.stages) {
    s.stage_devices.push_back(
        cluster.index_of(plan.devices.at(static_cast<std::size_t>(stage.device))));
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
  const std::vector<std::int64_t> kv =
      pipeline_unit_kv_bytes(cost.footprint(), cost.config(), cost.config().max_positions);
  const std::vector<std::int64_t>& weights = cost.unit_weight_bytes();
  Prediction out;
  out.latency_s = pp.prefill_s;
  out.decode_s = pp.decode_s;
  for (int d = 0; d < plan.num_devices(); ++d) {
    DevicePrediction dp;
    dp.name = plan.devices[static_cast<std::size_t>(d)];
    const int stage = plan.pipeline->stage_of(d);
    if (stage >= 0) {
      const Range units = plan.pipeline->stages[static_cast<std::size_t>(stage)].units;
      dp.stage = stage;
      dp.units = units;
      dp.tokens = seq_len;
      dp.compute_s = pp.stage_busy_s[static_cast<std::size_t>(stage)];
      for (std::int64_t u = units.first; u < units.second; ++u) {
        dp.memory.weights += weights[static_cast<std::size_t>(u)];
        dp.memory.kv_cache += kv[static_cast<std::size_t>(u)];
      }
    }
    out.devices.push_back(std::move(dp));
  }
  return out;
}

}  // namespace huddle
