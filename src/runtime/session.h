// A distributed inference session: device 0 (the primary) drives every step, the other devices
// follow. Each device runs its own Program with an Executor; the primary tells the others which
// tokens to process next, and the data-movement ops inside the programs do the rest.
//
// Control messages (primary -> each worker, tags kStepTag / kResetTag / kEndTag):
//   step:  u64 position, u8 all_rows, u8 op_spans, 2 bytes padding, u32 count, then count
//          little-endian i32 token ids
//   reset: empty;  end: empty
// After each step every worker answers with a report (kStepReportTag, 32 bytes: f64 compute
// seconds, f64 wall seconds, u64 bytes it sent in the step, i64 free memory bytes), from which the
// primary re-estimates each device's speed and memory while it serves (Hepti §4.1). When the
// step asked for them (op_spans 1), the report is followed by the step's op spans
// (kStepSpansTag, runtime/op_spans.h): what the server's live timeline draws op by op.
//
// Pipeline plans (HPipe): every device cuts the step's tokens into the plan's slices and runs its
// program once per slice, in order; a stage starts slice i+1 as soon as it has sent slice i on,
// so the stages work on different slices at once, and each keeps its KV cache across slices.
// Slices before the last compute no output rows unless every row is wanted. When the last stage
// is another device, the primary receives its output tensor for each slice after running its
// own stage (if any) on all of them.
#pragma once

#include "net/transport.h"
#include "plan/pipeline.h"
#include "runtime/executor.h"
#include "runtime/op_spans.h"
#include "runtime/step_runner.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace huddle {

inline constexpr std::uint32_t kStepTag = 0x10000001u;
inline constexpr std::uint32_t kResetTag = 0x10000002u;
inline constexpr std::uint32_t kEndTag = 0x10000003u;
inline constexpr std::uint32_t kStepReportTag = 0x10000004u;
// A run of an imported graph (a CNN): empty payload; device 0 holds the inputs, the row
// exchanges inside the programs bring every device the rows it reads. Answered by a report.
inline constexpr std::uint32_t kRunTag = 0x10000005u;
inline constexpr std::uint32_t kStepSpansTag = 0x10000006u;

// What one device measured of one step.
struct StepReport {
  double compute_s = 0;                // time in compute ops (0 when not metered)
  double wall_s = 0;                   // the whole step, communication included
  std::uint64_t bytes_sent = 0;        // on the mesh during the step
  std::int64_t free_memory_bytes = 0;  // what the device could still allocate (0: unknown)
  // The share of its compute threads' CPU time the device's CPU quota allows, in (0, 1]:
  // min(1, quota in cores / threads) (profile/cpu_quota.h); 1 without a quota, 0 unknown.
  double cpu_share = 0;
  std::vector<OpSpan> ops;  // the step op by op, when it was asked for (else empty)
};

// Measures a device's steps: install observer() on its executor; the session takes a report
// after each step. Free memory and the CPU quota are read from the system
// (profile/memory_probe.h, profile/cpu_quota.h).
class StepMeter {
 public:
  // Adds the time of every compute op (not the data movement between devices, whose time is
  // waiting as much as work) to the meter, then calls `inner` (e.g. a TraceRecorder's).
  OpObserver observer(OpObserver inner = {});
  // A step starts: its ops' spans are recorded (from now) when `record_ops`.
  void begin_step(bool record_ops);
  // The compute seconds since the last call, the system's free memory and CPU share (read at
  // most every 100 ms: a decode step is a few ms, the readings a few file reads), what it is
  // given, and the op spans recorded since begin_step (recording then stops until the next
  // begin_step).
  StepReport take(double wall_s, std::uint64_t bytes_sent);

 private:
  double compute_s_ = 0;
  bool record_ops_ = false;
  std::chrono::steady_clock::time_point step_start_{};
  std::vector<OpSpan> ops_;
  std::int64_t free_memory_bytes_ = 0;
  double cpu_share_ = 0;
  std::chrono::steady_clock::time_point memory_read_at_{};
};

// The primary's side. forward() sends the step to every worker, then runs device 0's program and
// returns its output. The transport and executor must outlive it; end() (or the destructor)
// tells the workers the session is over.
class PrimarySession final : public StepRunner {
 public:
  // `meter` (optional, outliving the session) measures device 0's own steps; `pipeline`
  // (optional, outliving the session) slices the steps of a pipeline plan, whose outputs are
  // `output_width` wide (a last stage that sends anything else is an error).
  PrimarySession(net::Transport& transport, Executor& executor, StepMeter* meter = nullptr,
                 const Pipeline* pipeline = nullptr, std::int64_t output_width = 0);
  ~PrimarySession() override;

  Tensor forward(std::span<const std::int32_t> ids, bool all_rows) override;
  // One run of an imported graph (Executor::run) on every device; device 0's outputs by name.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs);
  void reset() override;
  std::int64_t position() const override { return executor_.position(); }
  std::int64_t max_positions() const override { return executor_.max_positions(); }
  void end();

  // Every device's report of the last step (device 0 first); empty before the first step.
  const std::vector<StepReport>& last_reports() const { return reports_; }
  // Whether the following steps' reports carry every device's op spans (StepReport::ops; device
  // 0's need the session's meter). Off by default: it costs each worker a message per step.
  void set_op_spans(bool on) { op_spans_ = on; }

 private:
  void broadcast(std::uint32_t tag, std::span<const std::byte> payload);
  // Device 0's report (measured since `start`) and every worker's.
  // With `op_spans`, each worker's op spans follow its report.
  void collect_reports(std::chrono::steady_clock::time_point start, std::uint64_t sent_before,
                       bool op_spans);

  // The pipeline's output tensors of a step, received from its last stage.
  Tensor receive_outputs(std::span<const std::int64_t> slices, OutputRows rows);

  net::Transport& transport_;
  Executor& executor_;
  StepMeter* meter_;
  const Pipeline* pipeline_;
  std::int64_t output_width_;
  std::vector<StepReport> reports_;
  bool op_spans_ = false;
  std::vector<OpSpanDecoder> span_decoders_;  // by rank (0 unused)
  bool ended_ = false;
};

// A worker's side: follows the primary's steps until it ends the session. TransportError when
// the primary or a peer fails; InputError/PlanError from the step itself propagate.
// `meter` (optional) measures the steps this device reports.
void follow_primary(net::Transport& transport, Executor& executor, StepMeter* meter = nullptr,
                    const Pipeline* pipeline = nullptr);

// The slice lengths of a step of `tokens` tokens under `pipeline` (empty without one: the step
// runs whole); InputError when the pipeline's table has no such length.
std::vector<std::int64_t> step_slices(const Pipeline* pipeline, std::int64_t tokens);

// Runs one step of `ids` on `executor`: whole (no `slices`), or slice by slice. Returns the
// step's output as one tensor (the slices' rows concatenated), or an empty tensor when this
// device computes no output.
Tensor run_step(Executor& executor, std::span<const std::int64_t> slices,
                std::span<const std::int32_t> ids, OutputRows rows);

}  // namespace huddle
