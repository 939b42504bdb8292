// Operator assignment on a DCG: the cost of an assignment, the paper's modified assembly-line DP,
// an exact DP over the live-tensor frontier for graphs with branches and joins, and the
// priority-order baselines (ONNX Runtime's way: each op to the first capable provider).
//
// Cost model (Lee et al. §3.2-3.3): an assignment's time is the sum of its nodes' costs and of its
// edges' costs; an edge costs its DA class's cost when it crosses providers (0 inside one),
// start edges cost 0, plus a fixed overhead, plus each device's fixed cost once when the assignment
// places at least one op on it (using a remote at all costs the session's messages per run, the
// worker's wake-up, the output's return, however few ops it runs). The paper counts every tensor
// edge (tensor, consumer op); a value travels to another device once, though, however many of its
// readers are there (the lowering sends it once per destination device: GPT-2's q, k and v read
// one norm), so between devices only the first reader on a device (in op order) pays the
// crossing. Between providers of one device (cpu1, cpuN) every reader pays its own.
#pragma once

#include "planner/dcg.h"

#include <cstddef>
#include <optional>
#include <vector>

namespace huddle::assign {

struct Costs {
  std::vector<double> node;  // by DCG node (start and end: 0), seconds
  std::vector<double> da;    // by DA class, seconds
  double overhead = 0;       // seconds every assignment pays besides its ops (the executor's own)
  // By device (AssignProblem::provider_device; entries past the end cost 0), seconds an
  // assignment pays once when it places at least one op on that device.
  std::vector<double> device_fixed;

  double fixed(int device) const {
    return at(device) < device_fixed.size() ? device_fixed[at(device)] : 0.0;
  }
};

// The terms of an assignment's time under `costs`, seconds: its nodes' costs by provider, the
// edges it crosses by DA class (how many and their cost), the overhead and the fixed costs.
struct CostBreakdown {
  std::vector<double> node_by_provider;
  std::vector<int> crossings_by_da;
  std::vector<double> edges_by_da;
  double overhead = 0, fixed = 0;

  double total() const;
};
CostBreakdown cost_breakdown(const Dcg& dcg, const Costs& costs, const Assignment& assignment);

// Time of `assignment` (a capable provider per op) under `costs`: cost_breakdown's total.
double assignment_cost(const Dcg& dcg, const Costs& costs, const Assignment& assignment);

// The providers a DP may use, by provider; empty: every provider.
using ProviderMask = std::vector<bool>;

struct DpResult {
  Assignment assignment;
  double cost = 0;  // assignment_cost of it
};

// The modified assembly-line DP (the paper's eq. 2) over the ops in topological order, each op a
// station with one line per capable provider (incapable nodes removed):
//   f[j][p] = a[j][p] + min_q ( f[j-1][q] + T[j][p | path to (j-1, q)] )
// where T sums the DA costs of every edge into op j from its producers, each on the provider
// the path to (j-1, q) gives it. O(V_d · P) transitions. Exact when every op reads only the op
// before it (a chain, the paper's setting); with branches and joins (residual adds, q/k/v), a
// producer's provider is fixed by the best path to the previous op, so the result is a feasible
// assignment whose cost is an upper bound of the optimum.
//
// Both DPs choose among the `allowed` providers only and ignore the devices' fixed costs while
// choosing; the cost they report is the result's assignment_cost (fixed costs of the devices it
// uses included). PlanError when an op has no allowed capable provider.
DpResult assembly_line_dp(const Dcg& dcg, const Costs& costs, const ProviderMask& allowed = {});

inline constexpr std::size_t kMaxFrontierStates = 1 << 16;

// Exact optimum over any DAG (fixed costs aside, as above): a DP over the topological order whose
// state is the provider of every live tensor (produced, still to be read). On a chain the state
// is the previous op's provider and this is the assembly-line DP. nullopt when some step has
// more than `max_states` states (P^live), where assembly_line_dp is the fallback.
std::optional<DpResult> frontier_dp(const Dcg& dcg, const Costs& costs,
                                    std::size_t max_states = kMaxFrontierStates,
                                    const ProviderMask& allowed = {});

// Devices with a fixed cost up to which optimal_assignment tries every subset of them.
inline constexpr int kMaxFixedCostDevices = 6;

// The optimum with the devices' fixed costs: the minimum over the subsets S of the devices with a
// fixed cost > 0 of the DP restricted to the providers on the other devices and on S (a subset
// that leaves some op without a provider is skipped); the DP's reported cost already carries
// the fixed costs of the devices its result uses, so the minimum is the optimum. 2^|S| DPs; past
// kMaxFixedCostDevices such devices, a greedy descent instead: from every device allowed, drop
// the device whose removal lowers the cost most until none does (a local optimum), and keep the
// better of that and none of them. Each DP is
// frontier_dp when it fits, else assembly_line_dp; `exact` is false when any DP was the latter
// or the greedy descent ran.
DpResult optimal_assignment(const Dcg& dcg, const Costs& costs, bool* exact = nullptr);

// Each op on the first provider of `order` that can run it, else the first capable provider in
// list order (a priority order of the paper; {p} alone is "everything on p, where p can").
Assignment priority_assignment(const Dcg& dcg, const std::vector<int>& order);

}  // namespace huddle::assign
