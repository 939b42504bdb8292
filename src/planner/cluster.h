// Cluster file: the devices a plan may use and the links between them (docs/planner.md).
//
// Minimal hand-written form (the first device is the primary):
//   {"devices": [{"name": "L", "gflops": 40.0, "memory_bytes": 2000000000}, ...],
//    "links": [{"from": "L", "to": "M", "bandwidth_bps": 1e8, "latency_s": 0.002}, ...],
//    "default_link": {"bandwidth_bps": 1e9, "latency_s": 0.0005}}
// (a link may add "duplex_bandwidth_bps" and "duplex_latency_s": each way while both ends send,
// as `huddle profile` measures)
// Rich form (what `huddle profile` writes) adds, per device, measured speed per block type:
//   "gflops_by_block": {"attention": 31.0, "mlp": 45.5, "connection": 4.0}
// (each optional; a missing entry falls back to "gflops"), and the fitted cost of each op class:
//   "op_curves": {"gemm": {"gflops": 52.0, "overhead_us": 9.0}, "attention": {...},
//                 "elementwise": {...}, "gemv": {...}}
// (a linear of R > 1 rows costs gemm_weights(its weights' 2·K·N) + gemm(2·R·K·N): the GEMM curve
// is what the multiply-adds take beyond fetching the weights; "gemm_weights" is optional, the
// GEMV curve standing in)
// (gemm, attention and elementwise together or none; gemv, one-row linears, which are limited by
// memory bandwidth, defaults to gemm): an op of `flops` FLOPs takes overhead + flops / gflops;
// and "cores": the CPU cores the device computes on (threads × measured CPU share).
// Other keys are ignored so newer profilers can add fields. Links are symmetric unless both
// directions are given; a pair with no entry uses "default_link" (an error if a pair is needed and
// there is none). Bandwidth is in bits per second (the "bps" unit of network specifications).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace huddle {

// The three block types of a transformer layer whose speeds Galaxy measures separately.
enum class BlockType : std::uint8_t { Attention, Mlp, Connection };

// The op classes the profiler measures and the cost model charges separately.
// Gemv: a linear over one row (decode steps, the head), bound by reading the weights.
enum class OpClass : std::uint8_t { Gemm, Gemv, Attention, Elementwise };

// Time of one op as a function of its size: overhead_s + flops / (gflops · 1e9), fitted by the
// profiler by least squares over the model's shapes.
struct OpCurve {
  double gflops = 0;      // asymptotic throughput, > 0
  double overhead_s = 0;  // fixed cost per op, >= 0
  double seconds(double flops) const { return overhead_s + flops / (gflops * 1e9); }
};

struct OpCurves {
  OpCurve gemm, attention, elementwise, gemv;
  // What a linear of more than one row spends per call on its weights, per weight FLOP (2·K·N):
  // fetching and packing them costs a GEMM more than a GEMV's one pass. Zero gflops: not
  // measured (older profiles), the GEMV curve stands in.
  OpCurve gemm_weights = {};
  const OpCurve& of(OpClass c) const;
  const OpCurve& weights_of_gemm() const { return gemm_weights.gflops > 0 ? gemm_weights : gemv; }
  // Every curve's throughput multiplied by `factor` > 0 and its overhead divided by it.
  void scale(double factor);
};

struct DeviceSpec {
  std::string name;
  double gflops = 0;              // sustained float32 GFLOP/s
  std::int64_t memory_bytes = 0;  // memory the device can give to the model
  double attention_gflops = 0;    // per block type; equal to gflops when not measured
  double mlp_gflops = 0;
  double connection_gflops = 0;
  std::optional<OpCurves> curves = std::nullopt;  // measured per op class (rich form)
  // Cores the device runs on (threads × CPU share, measured); 0 = unknown. Below 2, encrypting and
  // moving data takes the same CPU as compute, so communication cannot hide behind compute.
  double cores = 0;
  bool overlaps_communication() const { return cores == 0 || cores >= 2; }
  // Seconds of this device's CPU a byte it sends or receives takes (sealing or opening it,
  // copies), at its CPU share; 0: unknown. On a device that cannot overlap communication, only
  // this part of a collective keeps the CPU from compute: the rest is waiting on the link, which
  // compute (Galaxy's GEMM on arrived rows) does overlap. JSON "comm_cpu_ns_per_byte".
  double comm_cpu_s_per_byte = 0;
  // The share of its threads' CPU time its CPU quota allowed when measured (1: no quota; 0:
  // unknown). The online estimator scales the speed by the quota's share now over this one.
  double quota_share = 0;

  double speed(BlockType block) const;  // GFLOP/s for `block`
  // Seconds for `ops` ops of class `op` totalling `flops` FLOPs in a block of type `block`: the
  // fitted curve when measured, else flops at the block's speed.
  double op_seconds(OpClass op, BlockType block, double flops, int ops) const;
  // Seconds for `ops` linears over `rows` rows totalling `flops` FLOPs in a `block`. With curves:
  // one row reads the weights (flops of them, at the GEMV curve); more rows fetch them
  // (flops / rows, at weights_of_gemm) and multiply-add (the GEMM curve).
  double linear_seconds(BlockType block, double rows, double flops, int ops) const;
  // Every speed (block speeds and curve throughputs) multiplied by `factor` > 0.
  void scale_speed(double factor);
};

struct LinkSpec {
  double bandwidth_bps = 0;  // bits per second, > 0
  double latency_s = 0;      // one-way, per message, >= 0
  // Bandwidth each way while both ends send at once, as in every ring step (0: unknown, taken as
  // bandwidth_bps). Lower than bandwidth_bps where encryption and copies, not the wire, limit it.
  double duplex_bandwidth_bps = 0;
  // Fixed cost of such an exchange (threads, system calls, framing); 0: taken as latency_s.
  double duplex_latency_s = 0;

  // Seconds to move `bytes` as one message.
  double transfer_s(double bytes) const { return latency_s + bytes * 8.0 / bandwidth_bps; }
  // The same while the other end sends to us at the same time.
  double duplex_transfer_s(double bytes) const {
    return (duplex_latency_s > 0 ? duplex_latency_s : latency_s) +
           bytes * 8.0 / (duplex_bandwidth_bps > 0 ? duplex_bandwidth_bps : bandwidth_bps);
  }
};

class ClusterSpec {
 public:
  // Parses and checks a cluster object; LoadError naming `source` and the field at fault.
  static ClusterSpec from_json(const nlohmann::json& json, const std::string& source);
  // Reads a cluster file; LoadError naming the path when it is missing, not JSON, or malformed.
  static ClusterSpec load(const std::string& path);
  // Writes to_json() to `path` (a cluster file load() reads back); Error naming the path.
  void save(const std::string& path) const;
  // Builds a cluster in code (tests, benchmarks): every pair uses `link`.
  static ClusterSpec uniform(std::vector<DeviceSpec> devices, LinkSpec link);

  nlohmann::json to_json() const;

  const std::vector<DeviceSpec>& devices() const { return devices_; }
  const DeviceSpec& device(int i) const { return devices_.at(static_cast<std::size_t>(i)); }
  DeviceSpec& mutable_device(int i) { return devices_.at(static_cast<std::size_t>(i)); }
  int size() const { return static_cast<int>(devices_.size()); }
  // Index of the device called `name`; PlanError naming it if there is none.
  int index_of(const std::string& name) const;
  // The link from device `from` to device `to` (indices, from != to); PlanError naming both
  // devices when the file gives no link and no default.
  LinkSpec link(int from, int to) const;
  // Whether the pair has a link of its own in the file (else it takes "default_link").
  bool has_own_link(int from, int to) const;
  // Sets (or overrides) the link between two devices, both directions.
  void set_link(int a, int b, LinkSpec link);

  // The same cluster restricted to `indices` (order kept as given; the first is the primary).
  ClusterSpec subset(const std::vector<int>& indices) const;
  // The same cluster with `device` added last; `link` joins it to every other device, both
  // directions (a device that joins a running session: only its link to the primary is
  // measured, docs/distributed.md).
  ClusterSpec with_device(DeviceSpec device, LinkSpec link) const;

 private:
  std::vector<DeviceSpec> devices_;
  std::map<std::pair<int, int>, LinkSpec> links_;
  std::optional<LinkSpec> default_link_;
};

}  // namespace huddle
