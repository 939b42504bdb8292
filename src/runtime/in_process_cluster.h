// Runs a plan on N devices that are threads of this process, joined by the in-process
// transport: the same programs, collectives and session protocol as separate processes, without
// sockets. For tests, planners' checks and experiments.
#pragma once

#include "model/model.h"
#include "plan/plan.h"
#include "runtime/step_runner.h"

#include "runtime/session.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace huddle {

// Lowers `plan` for every device, starts devices 1..n-1 following the primary, and calls `drive`
// with device 0's session (use it like a single-device runner). Returns when `drive` returns and
// every device has stopped; rethrows the first device's error, if any.
void run_in_process(const Model& model, const Plan& plan,
                    const std::function<void(StepRunner&)>& drive);

// The same for an imported graph (a CNN) and a row-split or operator-assignment plan: one run of
// `inputs` on every device, device 0's outputs by name; `reports` (optional) receives every
// device's report.
std::map<std::string, Tensor> run_in_process(const Graph& graph, const WeightMap& weights,
                                             const Plan& plan,
                                             const std::map<std::string, Tensor>& inputs,
                                             std::vector<StepReport>* reports = nullptr);

}  // namespace huddle
