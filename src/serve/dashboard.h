// Dashboard: what the page at / shows, as JSON for its endpoints (serve/dashboard_routes.h).
//   cluster_json():  the model, the devices (address, weights, resident memory, free memory and a
//                    speed estimate from the last request's step reports), the links between
//                    them, and the plan: what each device holds (serve/plan_view.h)
//   requests_json(): the last requests, step by step per device (serve/step_log.h), with their
//                    tokens per second
//   step_ops_json(): one step of a request op by op on every device (its first steps only)
// The facts are fixed when the model is loaded; the measurements come from the StepLog.
#pragma once

#include "plan/plan.h"
#include "serve/step_log.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace huddle::serve {

struct DeviceFacts {
  std::string name;     // "primary", or the worker's HOST:PORT
  std::string address;  // where it is reached ("this process" for the primary)
  std::uint64_t weight_bytes = 0;
  std::uint64_t rss_bytes = 0;  // resident memory once the weights were in place (0: unknown)
};

struct ClusterFacts {
  std::string model_id;
  std::string architecture;
  std::int64_t layers = 0;
  std::int64_t context = 0;
  std::vector<DeviceFacts> devices;  // device 0 (this process) first
  std::optional<Plan> plan;          // none: the whole model on this device
  std::string transport;             // how devices talk, e.g. "TCP, authenticated"
};

// A device's speed as the last finished request measured it (none before one has run).
struct DeviceSpeed {
  double prefill_tokens_per_s = 0;  // prompt tokens per second of this device's prefill compute
  double decode_compute_ms = 0;     // its compute per decode step, median
  std::int64_t free_memory_bytes = 0;
  std::uint64_t bytes_sent = 0;  // over the whole request
};
// One entry per device of the request's steps (empty when it has none).
std::vector<DeviceSpeed> device_speeds(const RequestRecord& request);

// A request as the page draws it:
// {"id", "started_unix_ms", "elapsed_ms", "running", "finish_reason", "prompt_tokens",
//  "completion_tokens", "prefill_ms", "decode_tokens_per_s", "tokens_per_s", "dropped_steps",
//  "steps": [[start_ms, tokens, [[wall_ms, compute_ms, bytes_sent], ...per device], ops_kept],
//            ...]}  (ops_kept: whether step_ops_json has the step op by op)
nlohmann::json request_json(const RequestRecord& request);

class Dashboard {
 public:
  explicit Dashboard(ClusterFacts facts, std::size_t max_requests = 16,
                     std::size_t max_steps = 2048);

  StepLog& log() { return log_; }
  // Replaces the devices and plan shown (after the session re-planned without a lost device).
  // Safe while other threads read cluster_json().
  void set_facts(ClusterFacts facts);
  nlohmann::json cluster_json() const;
  // Requests with an id above `after` or still running, oldest first: {"requests": [...]}.
  nlohmann::json requests_json(std::uint64_t after = 0) const;
  // Step `step` of request `request` op by op (defaults: the latest request, its last step kept
  // op by op): {"request", "step", "start_ms", "tokens", "devices": [{"index", "name", "ops":
  // [[name, start_ms, duration_ms, "compute" | "comm"], ...]}, ...]}, each device's op starts
  // from the step's start on that device. RequestError 404 when the log has no such step op by op.
  nlohmann::json step_ops_json(std::optional<std::uint64_t> request,
                               std::optional<std::size_t> step) const;

 private:
  mutable std::mutex facts_mutex_;
  ClusterFacts facts_;        // guarded by facts_mutex_
  nlohmann::json plan_view_;  // guarded by facts_mutex_
  StepLog log_;
};

}  // namespace huddle::serve
