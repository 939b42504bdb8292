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
// the runs' wall times, and with it each remote device's fixed cost per run that uses it
// (fit_run_overheads): the per-op costs are added to the node costs, the fixed costs are
// Costs::device_fixed, and Costs::overhead is what the fit leaves, the median over the runs.
#pragma once

#include "model/model.h"
#include "net/key.h"
#include "plan/plan.h"
#include "planner/assign_planner.h"
#include "planner/profiling_paths.h"
#include "runtime/cluster.h"
#include "runtime/executor.h"
#include "runtime/run_overhead_fit.h"

#include <cstdint>
#include <functional>
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

struct MeasuredRun {
  Assignment assignment;
  double measured_s = 0;    // median wall time of the run (a prefill, or one Executor::run)
  double predicted_s = 0;   // assignment_cost under the profiled costs
  CostBreakdown predicted;  // its terms (assign_with fills it)
};

// One op's times in a timed forward: wall seconds, and the process's CPU seconds over it (-1:
// unknown). `name` is the program op's name (a model op's, or a transfer's "VALUE@recv").
struct OpTimes {
  std::string name;
  double wall_s = 0;
  double cpu_s = -1;
};

// One timed forward of a profiling run: every device's ops in execution order (device 0 first),
// and the primary's wall time.
struct Forward {
  std::vector<std::vector<OpTimes>> devices;
  double wall_s = 0;
};

// `repeats` timed forwards of the one-device program `program` (bound to `weights`) after a
// warm-up, every op observed with its wall and CPU time; `run_once` runs the executor once (a
// prefill of the ids after reset(), or Executor::run on an imported graph's named inputs).
std::vector<Forward> time_local_runs(const Graph& program, const WeightMap& weights,
                                     std::int64_t max_positions, int repeats,
                                     const std::function<void(Executor&)>& run_once);

// The session options of a profiling run with remote providers: their workers (device order),
// `key`, tracing on (every device's op spans come back at the session's end).
ClusterOptions profiling_cluster_options(const std::vector<Provider>& providers,
                                         const net::PresharedKey& key);

// The same as time_local_runs across a session's devices: `repeats` timed runs of `cluster`
// after a warm-up (`run_once`: a prefill, or Cluster::run), then the session is finished and
// every device's spans are split into the runs (the k-th span of an op name is run k).
std::vector<Forward> time_cluster_runs(Cluster& cluster, int repeats,
                                       const std::function<void(Cluster&)>& run_once);

// Whether `run` places an op on a remote provider.
bool uses_remote(const std::vector<Provider>& providers, const Assignment& run);

// PlanError when one of `runs` uses a remote provider and there is no `key` to open its session.
void require_key_for_remotes(const std::vector<Provider>& providers,
                             const std::vector<Assignment>& runs, const net::PresharedKey* key);

// The timed forwards of `runs` profiling runs, `repeats` of each, taken in passes: each pass
// times every run once (`time_one(r)`: run r's forwards of one session or executor, a warm-up and
// one timed), so a slow minute of the host falls on every run alike instead of on the run timed
// in it (one run's profile taken in a slow minute priced all of cpu1's ops 30% high, and the DP
// moved 61 of them to cpuN). Result: per run, one forward per pass.
std::vector<std::vector<Forward>> time_runs_in_passes(
    std::size_t runs, int repeats,
    const std::function<std::vector<Forward>(std::size_t)>& time_one);

// The costs of every DCG node and DA class of `dcg` (of model graph `graph`) from the timed
// forwards of each profiling run (forwards[r] are runs[r]'s), as the top of this file says;
// `measured` gets each run's median wall time and prediction. PlanError when a node or DA class
// is left unobserved.
Costs costs_from_forwards(const Graph& graph, const Dcg& dcg,
                          const std::vector<Provider>& providers,
                          const std::vector<Assignment>& runs,
                          const std::vector<std::vector<Forward>>& forwards,
                          std::vector<MeasuredRun>* measured = nullptr);

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
  Costs costs;                               // the profiled costs the DP used
  std::vector<DaKey> da_keys;                // the DCG's DA classes, costs.da's order
  std::vector<bool> fixed_identified;        // by device: fixed_cost_identifiable over the runs
  DpResult optimal;
  bool exact = true;  // the frontier DP (exact) found it; else the assembly-line DP
  std::vector<std::pair<Baseline, double>> baselines;  // with predicted seconds
  Plan plan;  // runs `optimal` (trimmed_assignment_plan: no remote when it uses none)
};

// Profiles the given runs of a DCG: their costs, each run's measurement appended to `measured`.
using ProfileFn = std::function<Costs(const Dcg&, const std::vector<Assignment>&,
                                      std::vector<MeasuredRun>* measured)>;

// The pipeline around profiling, for any model: the DCG of `graph` over `providers` at `tokens`,
// Algorithm 1's runs, `profile` of them, the DP, the baselines, and the plan of the optimal
// assignment (model facts `model`).
AssignOutcome assign_with(const Graph& graph, const PlanModel& model,
                          const std::vector<Provider>& providers, std::int64_t tokens,
                          const ProfileFn& profile);

// The whole pipeline for a prefill of `prompt_len` tokens (ids 1, 2, ... below the vocabulary).
// InputError for an empty provider list or a bad length; PlanError as profile_runs. (Imported
// CNNs: runtime/assign_cnn.h.)
AssignOutcome plan_assignment(const Model& model, const std::vector<Provider>& providers,
                              std::int64_t prompt_len, int repeats = 3,
                              const net::PresharedKey* key = nullptr);

}  // namespace huddle::assign
