// StepLog: the last requests the model served, step by step, for the dashboard's live timeline.
// A LoggingRunner between the Engine and the real runner times every step and records what each
// device reported of it (StepReport: compute and wall time, bytes sent, free memory; device 0
// first); the Engine tells the log when a request starts and ends (RequestObserver).
//
// Why step reports and not --trace's op spans: workers send their op spans only when a session
// ends (runtime/cluster_protocol.h, kTraceTag), while a served session lives as long as the
// server; every worker reports every step as it ends. The log holds at most `max_requests`
// requests and `max_steps` steps of each (later steps are counted, not kept), so it stays small
// however long the server runs.
#pragma once

#include "runtime/session.h"
#include "runtime/step_runner.h"
#include "serve/request_observer.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
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
  explicit StepLog(std::size_t max_requests = 16, std::size_t max_steps = 2048);

  void request_started(std::int64_t prompt_tokens) override;
  void request_finished(std::int64_t completion_tokens, const std::string& finish_reason) override;
  // A step of the running request that began at `start`; ignored when none runs (the
  // keep-alive's resets take no steps, but a runner may be driven outside the engine).
  void add_step(std::chrono::steady_clock::time_point start, std::int64_t tokens,
                std::int64_t position, std::vector<DeviceStep> devices);

  // The kept requests, oldest first (a copy); a running request's elapsed_ms is the time so far.
  std::vector<RequestRecord> requests() const;

 private:
  const std::size_t max_requests_;
  const std::size_t max_steps_;
  mutable std::mutex mutex_;
  std::deque<RequestRecord> requests_;
  std::uint64_t next_id_ = 1;
};

// A StepRunner that forwards to `inner` and logs every step: its start, its tokens, and the
// devices' reports of it, which `reports(wall_s)` returns after the step (a Cluster's
// last_reports(), or a single device's StepMeter::take).
class LoggingRunner final : public StepRunner {
 public:
  using Reports = std::function<std::vector<StepReport>(double wall_s)>;
  // `inner` and `log` must outlive the runner.
  LoggingRunner(StepRunner& inner, Reports reports, StepLog& log);

  Tensor forward(std::span<const std::int32_t> ids, bool all_rows) override;
  void reset() override { inner_.reset(); }
  std::int64_t position() const override { return inner_.position(); }
  std::int64_t max_positions() const override { return inner_.max_positions(); }

 private:
  StepRunner& inner_;
  Reports reports_;
  StepLog& log_;
};

}  // namespace huddle::serve
