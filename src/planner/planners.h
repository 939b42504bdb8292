// Planners: name -> a function from (model, cluster, sequence length, deadline) to a plan with
// its predicted cost. docs/planner.md describes each.
//   local, megatron, sp  baselines (make_plan with equal shares over every cluster device)
//   galaxy               speed-proportional splits per block type + memory rebalancing
//   hepti                Hepti's MILP under a deadline (weight-stationary, 1D- or 2D-tiled)
//   hpipe                HPipe: pipeline stages by DP over device orders, prompt slices by DP
//   gpipe, uniform-slices  pipeline baselines: even layers unsliced; hpipe's stages, equal slices
//   auto                 simulates the candidates and keeps the fastest that fits
#pragma once

#include "graph/graph.h"
#include "model/model_config.h"
#include "plan/plan.h"
#include "planner/cluster.h"
#include "planner/cost_model.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace huddle {

struct PlanRequest {
  const CostModel& cost;  // the model (config, footprint) and the simulator
  const ClusterSpec& cluster;
  std::int64_t seq_len = 128;
  std::optional<double> deadline_s;  // Hepti's D; other planners report whether it is met
  // Hepti only: force a mode, "ws", "1d" or "2d" ("" = Hepti's own choice: weight-stationary
  // when it fits, else 1d-tiled below 16 devices and 2d-tiled from 16). UsageError elsewhere.
  std::string mode = {};
};

struct PlanResult {
  std::string strategy;      // the planner that made it ("auto" reports what it picked in `mode`)
  std::string mode;          // e.g. "tensor+sequence", "weight-stationary", "1d-tiled", "2d-tiled"
  std::optional<Plan> plan;  // absent when the plan cannot run on this runtime
  nlohmann::json document;   // what `huddle plan -o` writes: the plan JSON
  Prediction prediction;     // of `plan`; an estimate for 2D-tiled
  std::vector<std::string> notes;  // what the planner considered (auto's candidates, ...)

  // The plan to run; PlanError saying why when there is none.
  const Plan& runnable() const;
};

// Names run_planner accepts.
const std::vector<std::string>& planner_names();

// Runs planner `name`; UsageError for an unknown name, PlanError when nothing fits or the
// deadline cannot be met.
PlanResult run_planner(const std::string& name, const PlanRequest& request);

// A result for an existing plan: predicts it on the request's cluster.
PlanResult evaluate_plan(Plan plan, std::string mode, const PlanRequest& request);

// evaluate_plan with the plan's gather_chunks chosen by the cost model: the predicted fastest of
// 1, 2, 4, 8 and 16 chunks per part, the fewest unless more are
// predicted 0.1% faster (plans whose all-gathers feed no
// linears keep 1).
PlanResult evaluate_with_best_gather_chunks(Plan plan, std::string mode,
                                            const PlanRequest& request);

// The request's cluster device names, primary first.
std::vector<std::string> device_names(const ClusterSpec& cluster);

// PlanError naming each device whose memory the prediction exceeds, with the bytes missing.
void check_memory(const Prediction& prediction, const ClusterSpec& cluster,
                  const std::string& planner);

}  // namespace huddle
