// The operator-assignment part of a Plan (Lee et al.; planner/assignment_dp.h): every op of the
// model on one execution provider (plan/assign_providers.h).
//
// JSON, under the plan's "assignment":
//   {"providers": ["cpuN", "cpu1", "remote:10.0.0.2:7001:linear,attention"],
//    "ops": {"tok_embed": 0, "h.0.attn_norm": 1, ...}}
// The plan's devices are "primary" (device 0: cpu1, cpuN) then every remote address, in order of
// first appearance in "providers"; "layers" is empty. lowering_assign.h runs it.
#pragma once

#include "graph/graph.h"
#include "plan/assign_providers.h"

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <string>
#include <vector>

namespace huddle {

struct OpAssignment {
  std::vector<std::string> providers;  // provider specs, in priority order
  std::map<std::string, int> ops;      // op name -> index into providers

  std::vector<assign::Provider> parsed_providers() const;
  // Provider index of every op of `graph`, in op order (validate first).
  std::vector<int> by_op(const Graph& graph) const;

  nlohmann::json to_json() const;
  // PlanError naming `source` and the field: bad provider specs, indices out of range.
  static OpAssignment from_json(const nlohmann::json& json, const std::string& source);
  // Checks against the model graph it is to run: every op assigned, no unknown op name, no op on
  // a provider that cannot run it. PlanError naming `source` and the op.
  void validate(const Graph& graph, const std::string& source) const;
};

}  // namespace huddle
