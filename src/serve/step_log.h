// StepLog: the last requests the model served, step by step, for the dashboard's live timeline.
// A LoggingRunner between the Engine and the real runner times every step and records what each
// device reported of it (StepReport: compute and wall time, bytes sent, free memory; device 0
// first); the Engine tells the log when a request starts and ends (RequestObserver).
//
// Op by op: the first `max_op_steps` steps of each request (the prompt, then the first decode
// steps) also keep every device's op spans (runtime/op_spans.h). The LoggingRunner asks the
// session for them only for those steps (wants_op_spans()), so a long request's later steps cost
// the workers nothing more than their step report. (Not --trace's spans: workers send those only
// when a session ends, and a served session lives as long as the server.)
//
// The log holds at most `max_requests` requests and `max_steps` steps of each (later steps are
// counted, not kept), so it stays small however long the server runs.
#pragma once

#include "runtime/session.h"
#include "runtime/step_runner.h"
#include "serve/request_observer.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace huddle::serve {

// One device's part of one step.
struct DeviceStep {
  double wall_ms = 0;     // the step on this device, waiting for peers included
  double compute_ms = 0;  // of which computing (the rest: communication and waiting)
  std::uint64_t bytes_sent = 0;
  std::int64_t free_memory_bytes = 0;  // 0: unknown
};

struct StepRecord {
  double start_ms = 0;      // since the request started
  std::int64_t tokens = 0;  // fed in this step (the prompt, then 1 per decode step)
  std::int64_t position = 0;
  std::vector<DeviceStep> devices;  // device 0 first
  bool ops_kept = false;            // its op spans are kept (StepLog::step_ops)
};

// One step's op spans on every device (device 0 first), each device's from the start of the
// step on its own clock.
struct StepOps {
  std::uint64_t request = 0;
  std::size_t step = 0;  // 0: the prompt
  double start_ms = 0;   // since the request started
  std::int64_t tokens = 0;
  std::vector<std::vector<OpSpan>> devices;
};

struct RequestRecord {
  std::uint64_t id = 0;  // 1, 2, ... in the order requests took the model
  std::int64_t started_unix_ms = 0;
  std::chrono::steady_clock::time_point started;
  double elapsed_ms = 0;  // set when finished
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::string finish_reason;  // "" while running
  bool running = true;
  std::vector<StepRecord> steps;
  std::int64_t dropped_steps = 0;  // steps past max_steps, not kept
};

class StepLog final : public RequestObserver {
 public:
  explicit StepLog(std::size_t max_requests = 16, std::size_t max_steps = 2048,
                   std::size_t max_op_steps = 16);

  void request_started(std::int64_t prompt_tokens) override;
  void request_finished(std::int64_t completion_tokens, const std::string& finish_reason) override;
  // A step of the running request that began at `start`; ignored when none runs (the
  // keep-alive's resets take no steps, but a runner may be driven outside the engine).
  // `ops[d]`: device d's op spans of the step (none, or fewer devices than `devices`: not
  // measured); kept while the request has fewer than max_op_steps steps.
  void add_step(std::chrono::steady_clock::time_point start, std::int64_t tokens,
                std::int64_t position, std::vector<DeviceStep> devices,
                std::vector<std::vector<OpSpan>> ops = {});
  // Whether the next step's op spans would be kept: a request runs and has fewer than
  // max_op_steps steps.
  bool wants_op_spans() const;

  // The kept requests, oldest first (a copy, without op spans); a running request's elapsed_ms
  // is the time so far.
  std::vector<RequestRecord> requests() const;
  // Step `step` of request `request` op by op; without `step`, its last step that kept them.
  // std::nullopt when the request or its step is no longer (or never was) kept with op spans.
  std::optional<StepOps> step_ops(std::uint64_t request,
                                  std::optional<std::size_t> step = std::nullopt) const;

 private:
  // An op span as kept: its name by index into op_names_ (a long request's steps repeat them).
  struct KeptOp {
    std::uint32_t name;
    bool comm;
    float start_us;
    float duration_us;
  };
  struct Entry {
    RequestRecord record;
    std::vector<std::vector<std::vector<KeptOp>>> ops;  // [step][device][op], the first steps
  };
  // The index of `name` in op_names_ (added when new); none once kMaxOpNames are known.
  std::optional<std::uint32_t> op_name_index(const std::string& name);

  static constexpr std::size_t kMaxOpNames = 1 << 16;
  const std::size_t max_requests_;
  const std::size_t max_steps_;
  const std::size_t max_op_steps_;
  mutable std::mutex mutex_;
  std::deque<Entry> requests_;
  std::uint64_t next_id_ = 1;
  std::vector<std::string> op_names_;
  std::unordered_map<std::string, std::uint32_t> op_name_ids_;
};

// A StepRunner that forwards to `inner` and logs every step: its start, its tokens, and the
// devices' reports of it, which `reports(wall_s)` returns after the step (a Cluster's
// last_reports(), or a single device's StepMeter::take), op spans included when
// `want_op_spans(true)`, called before each step the log keeps them of, asked for them
// (`want_op_spans(false)` before the others; e.g. Session::set_op_spans).
class LoggingRunner final : public StepRunner {
 public:
  using Reports = std::function<std::vector<StepReport>(double wall_s)>;
  using WantOpSpans = std::function<void(bool)>;
  // `inner` and `log` must outlive the runner.
  LoggingRunner(StepRunner& inner, Reports reports, StepLog& log, WantOpSpans want_op_spans = {});

  Tensor forward(std::span<const std::int32_t> ids, bool all_rows) override;
  void reset() override { inner_.reset(); }
  std::int64_t position() const override { return inner_.position(); }
  std::int64_t max_positions() const override { return inner_.max_positions(); }

 private:
  StepRunner& inner_;
  Reports reports_;
  StepLog& log_;
  WantOpSpans want_op_spans_;
};

}  // namespace huddle::serve
