// Operator assignment for imported ONNX CNNs (docs/assignment.md, "CNNs"): profiling, plans and
// their execution, through the same DCG, profiling paths, DP, lowering (plan/lowering_assign.h)
// and Executor as the transformers.
//
// A CNN's values are N-D tensors ([N, C, H, W] activations, [N, K] heads) with concrete shapes,
// run once by Executor::run on named inputs; no remote provider takes them (assign::Provider::
// capable keeps remotes to [tokens, width] matrices, the only values the engine moves between
// devices), so a CNN's assignment runs on this process's providers, cpu1 and cpuN: one device,
// the lowered program running each op on the pool (cpuN) or serially (cpu1). A provider list or
// a plan naming a remote is refused, naming it.
#pragma once

#include "core/tensor.h"
#include "onnx/onnx_model.h"
#include "plan/lowering.h"
#include "plan/plan.h"
#include "runtime/assign_profiler.h"

#include <map>
#include <string>
#include <vector>

namespace huddle::assign {

// The model facts an imported CNN's plans carry: {"onnx", its row layers} (PlanModel::of of its
// row graph, as a row-split plan's).
PlanModel cnn_plan_model(const Graph& graph);

// Deterministic inputs of `model`'s input shapes (values in [-1, 1]) for profiling: a CNN's op
// times do not depend on the values.
std::map<std::string, Tensor> profiling_inputs(const onnx_import::OnnxModel& model);

// `huddle assign` for an imported CNN: the DCG over `providers` (cpu1, cpuN), Algorithm 1's runs,
// each run lowered and timed `repeats` times on `inputs` after a warm-up, the DP, the baselines
// and the plan. InputError for an empty list or a remote provider (naming it); PlanError as
// costs_from_forwards; InputError for inputs that do not fit the graph (Executor::check_inputs).
AssignOutcome plan_cnn_assignment(const onnx_import::OnnxModel& model,
                                  const std::vector<Provider>& providers,
                                  const std::map<std::string, Tensor>& inputs, int repeats = 3);

// The one-device program of an assignment plan for `model`: the plan checked against the model
// (its facts, one device, every op on a provider of this process able to run it) and lowered.
// PlanError naming `source` and the field: another model's plan, a plan with remote devices, an
// unknown, missing or misplaced op. The program's graph runs on Executor(graph, model.weights(),
// 0).run(inputs), its outputs named as the model's.
Program lower_cnn_assignment(const onnx_import::OnnxModel& model, const Plan& plan,
                             const std::string& source);

}  // namespace huddle::assign
