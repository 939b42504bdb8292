// Profiling for operator assignment (Lee et al. §3.2) and the whole `huddle assign` pipeline:
// DCG, Algorithm 1's runs, instrumented runs, the assembly-line DP, baselines, the plan.
//
// Each profiling run is an assignment lowered to a program (plan/lowering_assign.h) and run as a
// prefill of the given ids, after one warm-up, `repeats` times; the executor's per-op observer
// times every op (wall and process CPU time), so a run measures the node cost of every (op,
// provider) it uses. An op's time is its CPU time scaled to its provider's throttling
// (charged_seconds); a node's cost is the median of its op's times in runs where none of its
// inputs crossed providers. A DA edge
// between providers of device 0 (cpu1, cpuN) moves nothing — the consumer reads the producer's
// buffer — but crossing it switches the kernels' threading (the pool's workers wake or idle,
// BLAS's thread count changes), which the consumer pays: a DA class's cost is the median, over
// consumers that crossed only it, of their time minus their node cost (0 when no such consumer
// has a plain sample).
//
// Runs that use a remote provider run as a session with the plan's workers (runtime/cluster.h)
// with tracing on: every device's per-op spans come back at its end, so remote node costs are
// the workers' own op times. A DA edge between devices costs what its receive (pipe_recv) took
// beyond waiting for the ops it followed: the receive's time less the times of the ops between
// the receiver's last own op and the producer (all on other devices; the programs follow one op
// order), the median over its receives. The executor's own time per op is fitted per device to
// the runs' wall times (fit_op_overheads) and added to the node costs; Costs::overhead is what
// the fit leaves, the median over the runs.
#pragma once

#include "model/model.h"
#include "net/key.h"
#include "plan/plan.h"
#include "planner/assign_planner.h"
#include "planner/profiling_paths.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace huddle::assign {

// One compute op's sample in a profiling run: the provider it ran on, its wall seconds and the
// process's CPU seconds over it (-1: not measured).
struct OpSample {
  int provider = 0;
  double wall_s = 0;
  double cpu_s = -1;
};

// The seconds the DP charges for each sample. A CPU quota (a cgroup's, or a share of a busy core)
// stops a device for the rest of a period once it is spent, so a few ops of a run wait out the
// throttle and the rest run at full speed: the median of an op's wall times misses the stalls
// (a device held to a quarter core looked as fast as a whole one) and the mean of a few samples
// is noise. So each provider's stalls are spread over its samples by CPU time: a sample costs
// cpu_s x (sum of wall_s / sum of cpu_s over that provider's samples with a CPU time), which keeps
// the provider's total; one without a CPU time costs its wall time. Providers in [0, providers).
std::vector<double> charged_seconds(std::span<const OpSample> samples, std::size_t providers);

// The executor's own time per op on each device, in seconds: ops_on[r][d] ops of run r ran on
// device d, and run r measured gaps[r] seconds beyond its ops and transfers. Least squares over
// the runs with every cost >= 0 (a device whose cost would be negative gets 0 and the others are
// refitted); a device no run used, or one the runs cannot tell apart from another, gets 0.
std::vector<double> fit_op_overheads(const std::vector<std::vector<double>>& ops_on,
                                     std::span<const double> gaps);

struct MeasuredRun {
  Assignment assignment;
  double measured_s = 0;   // median wall time of the prefill
  double predicted_s = 0;  // assignment_cost under the profiled costs
};

// Runs `runs` on `model` (in this process, or with the remote providers' workers, which `key`
// opens) and returns the costs of every DCG node and DA class. PlanError when a run needs a
// remote and no key is given, or a node or DA class is left unobserved; TransportError naming a
// worker that cannot be reached.
Costs profile_runs(const Model& model, const Dcg& dcg, const std::vector<Provider>& providers,
                   const std::vector<Assignment>& runs, std::span<const std::int32_t> ids,
                   int repeats, std::vector<MeasuredRun>* measured = nullptr,
                   const net::PresharedKey* key = nullptr);

struct AssignOutcome {
  std::size_t dcg_nodes = 0, dcg_edges = 0, da_edges = 0;
  std::size_t node_runs = 0, edge_runs = 0;  // profiling runs made: node_runs + edge_runs
  std::vector<MeasuredRun> profiled;         // the profiling runs, measured and predicted
  DpResult optimal;
  bool exact = true;  // the frontier DP (exact) found it; else the assembly-line DP
  std::vector<std::pair<Baseline, double>> baselines;  // with predicted seconds
  Plan plan;                                           // runs `optimal`
};

// The whole pipeline for a prefill of `prompt_len` tokens (ids 1, 2, ... below the vocabulary).
// InputError for an empty provider list or a bad length; PlanError as profile_runs.
AssignOutcome plan_assignment(const Model& model, const std::vector<Provider>& providers,
                              std::int64_t prompt_len, int repeats = 3,
                              const net::PresharedKey* key = nullptr);

}  // namespace huddle::assign
