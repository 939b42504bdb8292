// `huddle plan`: choose a plan for a model on a cluster and show its predicted cost.
//
//   huddle plan --cluster FILE --model DIR [--strategy NAME] [--seq-len T] [--deadline-ms D]
//               [--hepti-mode ws|1d|2d] [--weight-dtype D] [-o plan.json] [--json]
//     NAME: auto (default), galaxy, hepti, megatron, sp, local (docs/planner.md). Prints per
//     device its heads, MLP columns, tokens, memory and predicted time, then the predicted
//     latency (prefill of T tokens, default 128, and one decode step); --json prints one object
//     {"strategy", "mode", "predicted_ms", "decode_ms", "seq_len", "runnable", "devices": [{"name",
//     "heads", "ffn_columns", "tokens", "memory_bytes", "memory_budget_bytes", "predicted_ms",
//     "compute_ms", "comm_ms", "exposed_comm_ms"}], "notes"}. -o writes the plan for
//     `huddle run --plan`. --hepti-mode forces Hepti's mode (with --strategy hepti), e.g. a
//     2D-tiled plan on a cluster of fewer than 16 devices. --weight-dtype q4_0 (f32, f16, bf16,
//     q8_0) plans for the weights as `huddle run --weight-dtype` keeps them (memory per device).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace CLI {
class App;
}

namespace huddle::cli {

struct PlanOptions {
  std::string cluster_file;
  std::string model_dir;
  std::string strategy = "auto";
  std::int64_t seq_len = 128;
  std::optional<double> deadline_ms;
  std::string hepti_mode;    // "", "ws", "1d" or "2d"
  std::string output;        // plan file to write, "" for none
  std::string weight_dtype;  // --weight-dtype: plan as `huddle run --weight-dtype` keeps weights
  std::string wire;  // --wire: plan for activations in this wire format (core/wire_format.h)
  bool json = false;
};

// What `huddle plan` prints (and writes `output`). LoadError for a bad cluster file or model,
// PlanError when nothing fits, UsageError for bad option values.
std::string plan_to_string(const PlanOptions& options);

void add_plan_command(CLI::App& app);

}  // namespace huddle::cli
