// Compute probe: times this device's kernels at a model's shapes and fits one cost curve per op
// class (GEMM, attention, element-wise), as `huddle profile` reports them per device.
#pragma once

#include "core/dtype.h"
#include "graph/graph.h"
#include "model/model_config.h"
#include "planner/cluster.h"
#include "profile/curve_fit.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <vector>

namespace huddle::profile {

// The layer shapes to measure at: a prefill step of `tokens` rows.
struct ProbeShapes {
  std::int64_t hidden = 768;
  std::int64_t ffn = 3072;
  int heads = 12;
  int kv_heads = 12;
  int head_dim = 64;
  std::int64_t tokens = 128;
  bool causal = true;
  bool gated = false;          // the MLP has a gate projection
  std::int64_t vocab = 50257;  // the LM head's outputs (0: none)
  // The dtype the model keeps its linear weights in: the linears are timed in it, OutIn and
  // packed as an executor binds them (a Q4_0 decode reads 1/7 of F32's bytes, and its packed
  // prefill kernels multiply faster than sgemm), so the curves are this model's speed.
  DType weight_dtype = DType::F32;

  // The shapes of `config`; the weight dtype the one holding most of `graph`'s linear weight bytes.
  static ProbeShapes of(const ModelConfig& config, std::int64_t tokens);
  static ProbeShapes of(const ModelConfig& config, const Graph& graph, std::int64_t tokens);
  nlohmann::json to_json() const;
  // PlanError-free parse of what to_json wrote; TransportError-style failures are the caller's.
  static ProbeShapes from_json(const nlohmann::json& json);
};

struct ComputeProfile {
  OpCurves curves;
  // Speed of a whole block at the shapes (FLOPs over the curves' time), for the planners.
  double attention_gflops = 0, mlp_gflops = 0, connection_gflops = 0;
  double fit_error = 0;  // median relative error of the curves over all samples
  // Fraction of wall time a thread of this process gets (a CPU quota, competing processes); on
  // one thread the curves are CPU-time throughput scaled by it.
  double cpu_share = 1;
  // The share of its threads' CPU time the cgroup's CPU quota allows (profile/cpu_quota.h): 1
  // without a quota; 0 unknown (a profile from before it was recorded). The online estimator
  // scales the device's speed by the quota's share at each step over this one.
  double quota_share = 0;
  // Wall nanoseconds per byte this device's transport spends on a byte it sends or receives
  // (net/channel_cost.h, over the CPU share); 0: not measured (older profiles).
  double comm_cpu_ns_per_byte = 0;
  int samples = 0;
  double seconds = 0;  // wall time the probe took
  int threads = 0;     // kernel threads it ran with

  nlohmann::json to_json() const;
  static ComputeProfile from_json(const nlohmann::json& json);
};

// Runs the probe; about `budget_s` + 0.6 seconds: passes over every shape (at least four, each
// running every shape once, so a drift of the host's speed falls on all of them alike), and the
// CPU share. Memory: copies of each weight shape, a quarter of `max_bytes` in all, the shapes
// shrunk where one copy would not fit its part (the curves are per FLOP, so they carry over).
ComputeProfile probe_compute(const ProbeShapes& shapes, double budget_s, std::int64_t max_bytes);

// The block speeds the curves give at `shapes` (fills the *_gflops fields of `profile`).
void derive_block_speeds(const ProbeShapes& shapes, ComputeProfile& profile);

}  // namespace huddle::profile
