// `huddle run --model M.onnx` under an operator assignment (docs/assignment.md): --plan FILE (a
// plan `huddle assign` wrote) or --strategy assign --providers LIST (profiled first, on the given
// inputs). The plan is lowered by the assignment lowering and run by the one Executor in this
// process, or, when it has remote providers, by a Cluster session with their `huddle worker`s
// (--workers in the plan's device order, default the plan's addresses; --key-file).
#pragma once

#include "cli/onnx_distributed.h"
#include "core/tensor.h"
#include "onnx/onnx_model.h"

#include <map>
#include <string>

namespace huddle::cli {

// Whether `options` asks for an operator assignment: --strategy assign, or a --plan whose
// strategy is "assign" (PlanError for a plan file that cannot be read).
bool wants_assignment(const OnnxDistribution& options);

// Runs `inputs` `repeat` times under the assignment and returns the last run's outputs (by the
// model's output names) and every run's wall time; strategy "assign"; with workers, their bytes
// sent, compute time and weight bytes too. UsageError for --local-devices or --cluster, both
// --plan and --strategy, --strategy assign without --providers, remote devices without
// --key-file, --workers for a plan without remote devices; InputError for a bad provider list;
// PlanError naming the plan file for a plan that does not fit the model; TransportError naming
// a worker that fails.
DistributedRun run_onnx_assigned(const onnx_import::OnnxModel& model,
                                 const std::map<std::string, Tensor>& inputs,
                                 const OnnxDistribution& options, int repeat);

}  // namespace huddle::cli
