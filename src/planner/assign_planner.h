// Operator assignment as a Plan: the planner side of `huddle assign` (Lee et al.). Given the
// profiled costs of a DCG (planner/dcg.h), optimal_assignment (assignment_dp.h) picks the
// assignment; this file turns assignments into plans and names the baselines they are compared
// with.
#pragma once

#include "model/model_config.h"
#include "plan/plan.h"
#include "planner/assignment_dp.h"
#include "planner/dcg.h"

#include <string>
#include <vector>

namespace huddle::assign {

// The plan running `assignment` (a provider per op of `graph`, in op order) over `providers`:
// strategy "assign", devices "primary" then each remote address, "assignment" by op name.
Plan assignment_plan(const ModelConfig& config, const Graph& graph,
                     const std::vector<Provider>& providers, const Assignment& assignment);
// The same with the plan's model facts given (an imported CNN's: PlanModel::of(its row graph)).
Plan assignment_plan(const PlanModel& model, const Graph& graph,
                     const std::vector<Provider>& providers, const Assignment& assignment);

// The plan `huddle assign` writes for `assignment` (the optimal one, and each baseline's):
// assignment_plan, without the remote providers when no op is on a remote device. Such a plan runs
// in process, as the profiling runs that priced it did, not as a session with workers it gives
// nothing to (whose cost the prediction leaves out). With some op on a remote every remote stays: a
// session's workers follow the provider list.
Plan trimmed_assignment_plan(const PlanModel& model, const Graph& graph,
                             const std::vector<Provider>& providers, const Assignment& assignment);

struct Baseline {
  std::string name;  // "cpuN only", "remote:h:7001 > cpuN > cpu1"
  Assignment assignment;
};

// Every provider alone (ops it cannot run go to the first capable provider in list order) and
// every priority order of the providers (each op to the first capable one: ONNX Runtime's way;
// the paper's cpuN > remote > cpu1 and remote > cpuN > cpu1 among them). With one provider: one.
std::vector<Baseline> baselines(const Dcg& dcg, const std::vector<Provider>& providers);

}  // namespace huddle::assign
