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

StepLog::StepLog(std::size_t max_requests, std::size_t max_steps, std::size_t max_op_steps)
    : max_requests_(std::max<std::size_t>(1, max_requests)),
      max_steps_(max_steps),
      max_op_steps_(std::min(max_op_steps, max_steps)) {}

void StepLog::request_started(std::int64_t prompt_tokens) {
  std::lock_guard guard(mutex_);
  RequestRecord r;
  r.id = next_id_++;
  r.started_unix_ms = unix_ms_now();
  r.started = Clock::now();
  r.prompt_tokens = prompt_tokens;
  requests_.push_back({std::move(r), {}});
  while (requests_.size() > max_requests_) requests_.pop_front();
}

void StepLog::request_finished(std::int64_t completion_tokens, const std::string& finish_reason) {
  std::lock_guard guard(mutex_);
  if (requests_.empty() || !requests_.back().record.running) return;
  RequestRecord& r = requests_.back().record;
  r.running = false;
  r.elapsed_ms = ms_between(r.started, Clock::now());
  r.completion_tokens = completion_tokens;
  r.finish_reason = finish_reason;
}

std::optional<std::uint32_t> StepLog::op_name_index(const std::string& name) {
  if (const auto it = op_name_ids_.find(name); it != op_name_ids_.end()) return it->second;
  if (op_names_.size() >= kMaxOpNames) return std::nullopt;
  const auto index = static_cast<std::uint32_t>(op_names_.size());
  op_names_.push_back(name);
  op_name_ids_.emplace(name, index);
  return index;
}

void StepLog::add_step(Clock::time_point start, std::int64_t tokens, std::int64_t position,
                       std::vector<DeviceStep> devices, std::vector<std::vector<OpSpan>> ops) {
  std::lock_guard guard(mutex_);
  if (requests_.empty() || !requests_.back().record.running) return;
  Entry& entry = requests_.back();
  RequestRecord& r = entry.record;
  if (r.steps.size() >= max_steps_) {
    ++r.dropped_steps;
    return;
  }
  const bool keep_ops = r.steps.size() < max_op_steps_ && !ops.empty();
  r.steps.push_back({ms_between(r.started, start), tokens, position, std::move(devices), keep_ops});
  if (!keep_ops) return;
  entry.ops.resize(r.steps.size());  // steps before without op spans keep none
  std::vector<std::vector<KeptOp>>& kept = entry.ops.back();
  for (const std::vector<OpSpan>& device : ops) {
    std::vector<KeptOp>& out = kept.emplace_back();
    out.reserve(device.size());
    for (const OpSpan& op : device) {
      const std::optional<std::uint32_t> name = op_name_index(op.name);
      if (!name) continue;
      out.push_back(
          {*name, op.comm, static_cast<float>(op.start_us), static_cast<float>(op.duration_us)});
    }
  }
}

bool StepLog::wants_op_spans() const {
  std::lock_guard guard(mutex_);
  return !requests_.empty() && requests_.back().record.running &&
         requests_.back().record.steps.size() < max_op_steps_;
}

std::vector<RequestRecord> StepLog::requests() const {
  std::lock_guard guard(mutex_);
  std::vector<RequestRecord> out;
  out.reserve(requests_.size());
  const auto now = Clock::now();
  for (const Entry& e : requests_) {
    RequestRecord& r = out.emplace_back(e.record);
    if (r.running) r.elapsed_ms = ms_between(r.started, now);
  }
  return out;
}

std::optional<StepOps> StepLog::step_ops(std::uint64_t request,
                                         std::optional<std::size_t> step) const {
  std::lock_guard guard(mutex_);
  for (const Entry& e : requests_) {
    if (e.record.id != request) continue;
    // e.ops[i] is step i's (for the first e.ops.size() steps).
    std::size_t at = e.ops.size();
    if (step) {
      at = *step;
    } else {
      while (at > 0 && !e.record.steps[at - 1].ops_kept) --at;
      if (at == 0) return std::nullopt;
      --at;
    }
    if (at >= e.ops.size() || !e.record.steps[at].ops_kept) return std::nullopt;
    const StepRecord& s = e.record.steps[at];
    StepOps out{request, at, s.start_ms, s.tokens, {}};
    for (const std::vector<KeptOp>& device : e.ops[at]) {
      std::vector<OpSpan>& spans = out.devices.emplace_back();
      spans.reserve(device.size());
      for (const KeptOp& op : device)
        spans.push_back({op_names_[op.name], op.comm, op.start_us, op.duration_us});
    }
    return out;
  }
  return std::nullopt;
}

LoggingRunner::LoggingRunner(StepRunner& inner, Reports reports, StepLog& log,
                             WantOpSpans want_op_spans)
    : inner_(inner),
      reports_(std::move(reports)),
      log_(log),
      want_op_spans_(std::move(want_op_spans)) {}

Tensor LoggingRunner::forward(std::span<const std::int32_t> ids, bool all_rows) {
  const std::int64_t at = inner_.position();
  if (want_op_spans_) want_op_spans_(log_.wants_op_spans());
  const auto start = Clock::now();
  Tensor out = inner_.forward(ids, all_rows);
  const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<DeviceStep> devices;
  std::vector<std::vector<OpSpan>> ops;
  if (reports_) {
    std::vector<StepReport> reports = reports_(wall_s);
    bool any_ops = false;
    for (const StepReport& r : reports) any_ops = any_ops || !r.ops.empty();
    for (StepReport& r : reports) {
      devices.push_back({r.wall_s * 1e3, r.compute_s * 1e3, r.bytes_sent, r.free_memory_bytes});
      if (any_ops) ops.push_back(std::move(r.ops));
    }
  }
  if (devices.empty()) devices.push_back({wall_s * 1e3, wall_s * 1e3, 0, 0});
  log_.add_step(start, static_cast<std::int64_t>(ids.size()), at, std::move(devices),
                std::move(ops));
  return out;
}

}  // namespace huddle::serve
