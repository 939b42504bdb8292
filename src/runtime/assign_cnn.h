// Operator assignment for imported ONNX CNNs (docs/assignment.md, "Imported CNNs"): profiling,
// plans and their checks, through the same DCG, profiling paths, DP, lowering
// (plan/lowering_assign.h) and Executor as the transformers.
//
// A CNN's values are N-D tensors ([N, C, H, W] activations, [N, K] heads) of concrete shapes,
// run once by Executor::run (one device) or Cluster::run (with workers) on named inputs. A remote
// provider takes the ops that read no graph input (only device 0 holds the image): their values
// move whole, with a token-less pipe_recv (assign::movable_value).
#pragma once

#include "core/tensor.h"
#include "net/key.h"
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

// `huddle assign` for an imported CNN: the DCG over `providers`, Algorithm 1's runs, each run
// lowered and timed `repeats` times on `inputs` after a warm-up (in this process, or as a session
// with the remote providers' workers, which `key` opens), the DP, the baselines and the plan.
// InputError for an empty list or inputs that do not fit the graph (Executor::check_inputs);
// PlanError when a run needs a remote and no key is given, or as costs_from_forwards;
// TransportError naming a worker that cannot be reached.
AssignOutcome plan_cnn_assignment(const onnx_import::OnnxModel& model,
                                  const std::vector<Provider>& providers,
                                  const std::map<std::string, Tensor>& inputs, int repeats = 3,
                                  const net::PresharedKey* key = nullptr);

// Device `rank`'s program of an assignment plan for `model`, after checking the plan against the
// model: its facts, then every op (on a provider able to run it). PlanError naming `source` and
// the field: not an assignment plan, another model's plan, an unknown, missing or misplaced op.
// With one device the program's graph runs on Executor(graph, model.weights(), 0).run(inputs),
// its outputs named as the model's; with remote devices a Cluster of the plan runs it.
Program lower_cnn_assignment(const onnx_import::OnnxModel& model, const Plan& plan,
                             const std::string& source, int rank = 0);

}  // namespace huddle::assign
