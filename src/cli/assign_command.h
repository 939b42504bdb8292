// `huddle assign`: operator assignment with the fewest profiling runs (Lee et al.;
// docs/assignment.md).
//
//   huddle assign --model DIR --providers LIST [--key-file K] [--prompt-len L] [--repeats R]
//                 [-o assignment.json] [--json]
//     LIST: providers in priority order, e.g. "cpuN,cpu1,remote:10.0.0.2:7001" (a remote is a
//     `huddle worker` opened with K; plan/assign_providers.h). Builds the
//     device-mapped graph for a prefill of L tokens (default 16), picks the profiling runs
//     (Algorithm 1), runs them instrumented (each R times after a warm-up, default 3), and
//     picks the assignment with the DP. Prints the DCG's node, edge and DA-edge counts, the
//     profiling runs made, the predicted time of the optimal assignment and of every baseline;
//     --json prints one object {"model", "providers", "prompt_len", "dcg": {"nodes", "edges",
//     "da_edges"}, "profiling_runs", "node_runs", "edge_runs", "runs": [{"measured_ms",
//     "predicted_ms"}], "optimal": {"predicted_ms", "exact", "ops_per_provider"},
//     "baselines": [{"name", "predicted_ms", "plan"}], "overhead_ms", "devices": [{"name",
//     "fixed_ms", "fixed_identified"}]} (a device's fixed cost: what a run pays once for using
//     it; not identified when every profiling run used it). -o writes the plan for `huddle run
//     --plan`;
//     --baseline-plans DIR writes each baseline's plan as DIR/baseline-<i>.json (its "plan").
//   huddle assign --model MODEL.onnx --providers cpuN,cpu1 ...: an imported CNN, profiled on one
//     run of its inputs (deterministic values of their shapes) per sample; the same output
//     without "prompt_len" (--prompt-len is not used). A remote provider takes the ops that
//     read no graph input (runtime/assign_cnn.h).
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace huddle::cli {

struct AssignOptions {
  std::string model_dir;
  std::string providers;
  std::string key_file;  // for remote providers: the cluster key of their workers
  std::int64_t prompt_len = 16;
  int repeats = 3;
  std::string output;              // plan file, "" for none
  std::string baseline_plans_dir;  // "" for none
  bool json = false;
};

// What `huddle assign` prints (and writes `output`). InputError for a bad provider list or
// length, PlanError when the providers cannot be profiled, LoadError for a bad model.
std::string assign_to_string(const AssignOptions& options);

void add_assign_command(CLI::App& app);

}  // namespace huddle::cli
