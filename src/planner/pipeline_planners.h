// The pipeline planners as plans: hpipe, gpipe and uniform-slices schedules (hpipe_planner.h)
// turned into runnable Plans with a "pipeline" (plan/pipeline.h), and pipeline plans predicted
// on a cluster, so `huddle plan`, `huddle run --cluster` and `auto` treat them like the others.
#pragma once

#include "plan/plan.h"
#include "planner/cluster.h"
#include "planner/cost_model.h"
#include "planner/hpipe_planner.h"

namespace huddle {

// The longest step a pipeline planner precomputes slices for: the context, at most
// kMaxSliceTable tokens (planner/strategies.h).
std::int64_t pipeline_table_tokens(const ModelConfig& config);

// The plan of a schedule over `cluster`: the primary (cluster device 0) and the devices that run
// a stage, in cluster order.
Plan plan_of_schedule(const PipelineSchedule& schedule, const ModelConfig& config,
                      const ClusterSpec& cluster);

// The schedule of a pipeline plan whose devices `cluster` names (PlanError naming a missing one),
// for steps of up to `max_tokens` tokens (a sliced plan: its table's length).
PipelineSchedule schedule_of_plan(const Plan& plan, const ClusterSpec& cluster,
                                  std::int64_t max_tokens);

// The flow-shop prediction of a pipeline plan (predict_pipeline) for a prompt of seq_len tokens,
// per plan device: its stage's busy time as compute, its units' weights and KV cache as memory.
Prediction predict_pipeline_plan(const CostModel& cost, const Plan& plan,
                                 const ClusterSpec& cluster, std::int64_t seq_len);

}  // namespace huddle
