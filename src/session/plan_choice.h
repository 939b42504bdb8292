// Choosing the plan a session runs: a saved one, one a planner makes for a cluster (a cluster
// file, or the workers profiled first), or a fixed strategy over relative shares. Shared by
// `huddle run` and `huddle serve` through Session; the re-planning after a lost device
// (survivor_plan.h) starts from what is chosen here.
#pragma once

#include "model/model.h"
#include "net/key.h"
#include "net/transport.h"
#include "plan/plan.h"
#include "planner/cluster.h"

#include <optional>
#include <string>
#include <vector>

namespace huddle {

struct PlanChoice {
  std::string strategy;        // "" = galaxy with workers, local without; auto with a cluster
  std::vector<double> shares;  // relative speeds, primary first ("" = even)
  std::string providers;       // strategy "assign": execution providers (docs/assignment.md)
  std::string plan_file;       // a saved plan instead of a strategy
  std::string cluster_file;    // devices in the workers' order, primary first
  // --wire: the form activations travel in (core/wire_format.h); unset = f32, or a saved plan's.
  std::optional<WireFormat> wire;
  // --gather-chunks: Plan::gather_chunks instead of the planner's choice (or 1); with a saved
  // plan it must agree with the plan's.
  std::optional<int> gather_chunks;
  double timeout_s = 10;    // profiling: a silent peer is an error after this long
  net::LinkEmulation link;  // profiling: emulated link (testbed)
};

// The plan to run and what it was made for.
struct Planned {
  Plan plan;
  // The cluster the plan's devices are named in: a cluster file, or what the profiler measured
  // before planning. Absent for shares / even splits.
  std::optional<ClusterSpec> cluster;
  std::vector<std::string> all_workers;  // every worker given, in the cluster's device order
  std::string planner;                   // the planner that made it, "" when none did
  std::vector<double> shares;            // the fixed strategy's shares (plan device order)
  // --gather-chunks as the user gave it: every plan made again for this session (a re-plan on
  // re-estimated speeds, after a lost device, with a joiner) keeps it; absent: the planner's.
  std::optional<int> gather_chunks;
};

// Planners that plan from the devices' speeds: with workers and neither --shares nor a cluster
// file, the workers are profiled first; a session re-makes their plans from re-estimated speeds
// (not pipelined ones yet: session.cpp).
bool is_adaptive_planner(const std::string& name);

// Whether every device of `plan` is one of `cluster`'s (a saved plan may name others).
bool plan_in_cluster(const Plan& plan, const ClusterSpec& cluster);

// Workers of the devices `plan` uses, in plan order: device 0 is always the primary, and
// cluster device i > 0 is `all_workers[i - 1]`. PlanError naming a device the cluster lacks.
std::vector<std::string> workers_for(const Plan& plan, const ClusterSpec& cluster,
                                     const std::vector<std::string>& all_workers);

// Chooses the plan for `workers` (may be empty: this device alone) and checks it against the
// model: block-aligned cuts (unless saved), validated (errors name the plan file or "plan").
// UsageError when a cluster file's device count does not match the workers; PlanError,
// LoadError from planners and files; TransportError while profiling.
Planned choose_plan(const PlanChoice& choice, const Model& model, std::int64_t prompt_tokens,
                    const std::vector<std::string>& workers, const net::PresharedKey* key);

}  // namespace huddle
