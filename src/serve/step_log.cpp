#include "serve/step_log.h"

#include <algorithm>

namespace huddle::serve {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StepLog::StepLog(std::size_t max_requests, std::size_t max_steps)
    : max_requests_(std::max<std::size_t>(1, max_requests)), max_steps_(max_steps) {}

void StepLog::request_started(std::int64_t prompt_tokens) {
  std::lock_guard guard(mutex_);
  RequestRecord r;
  r.id = next_id_++;
  r.started_unix_ms = unix_ms_now();
  r.started = Clock::now();
  r.prompt_tokens = prompt_tokens;
  requests_.push_back(std::move(r));
  while (requests_.size() > max_requests_) requests_.pop_front();
}

void StepLog::request_finished(std::int64_t completion_tokens, const std::string& finish_reason) {
  std::lock_guard guard(mutex_);
  if (requests_.empty() || !requests_.back().running) return;
  RequestRecord& r = requests_.back();
  r.running = false;
  r.elapsed_ms = ms_between(r.started, Clock::now());
  r.completion_tokens = completion_tokens;
  r.finish_reason = finish_reason;
}

void StepLog::add_step(Clock::time_point start, std::int64_t tokens, std::int64_t position,
                       std::vector<DeviceStep> devices) {
  std::lock_guard guard(mutex_);
  if (requests_.empty() || !requests_.back().running) return;
  RequestRecord& r = requests_.back();
  if (r.steps.size() >= max_steps_) {
    ++r.dropped_steps;
    return;
  }
  r.steps.push_back({ms_between(r.started, start), tokens, position, std::move(devices)});
}

std::vector<RequestRecord> StepLog::requests() const {
  std::lock_guard guard(mutex_);
  std::vector<RequestRecord> out(requests_.begin(), requests_.end());
  const auto now = Clock::now();
  for (RequestRecord& r : out) {
    if (r.running) r.elapsed_ms = ms_between(r.started, now);
  }
  return out;
}

LoggingRunner::LoggingRunner(StepRunner& inner, Reports reports, StepLog& log)
    : inner_(inner), reports_(std::move(reports)), log_(log) {}

Tensor LoggingRunner::forward(std::span<const std::int32_t> ids, bool all_rows) {
  const std::int64_t at = inner_.position();
  const auto start = Clock::now();
  Tensor out = inner_.forward(ids, all_rows);
  const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<DeviceStep> devices;
  if (reports_) {
    for (const StepReport& r : reports_(wall_s)) {
      devices.push_back({r.wall_s * 1e3, r.compute_s * 1e3, r.bytes_sent, r.free_memory_bytes});
    }
  }
  if (devices.empty()) devices.push_back({wall_s * 1e3, wall_s * 1e3, 0, 0});
  log_.add_step(start, static_cast<std::int64_t>(ids.size()), at, std::move(devices));
  return out;
}

}  // namespace huddle::serve
