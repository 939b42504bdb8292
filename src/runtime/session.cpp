#include "runtime/session.h"

#include "collectives/p2p.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "profile/cpu_quota.h"
#include "profile/memory_probe.h"
#include "runtime/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace huddle {
namespace {

struct StepHeader {
  std::uint64_t position;
  std::uint8_t all_rows;
  std::uint8_t op_spans;  // 1: send the step's op spans after its report
  std::uint8_t pad[2];
  std::uint32_t count;
};
static_assert(sizeof(StepHeader) == 16, "wire layout of a step header");

struct WireReport {
  double compute_s;
  double wall_s;
  std::uint64_t bytes_sent;
  std::int64_t free_memory_bytes;
  double cpu_share;
};
static_assert(sizeof(WireReport) == 40, "wire layout of a step report");

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

StepReport measure(StepMeter* meter, double wall_s, std::uint64_t bytes_sent) {
  if (meter) return meter->take(wall_s, bytes_sent);
  StepReport r;
  r.wall_s = wall_s;
  r.bytes_sent = bytes_sent;
  return r;
}

// Row-wise concatenation of [r_i, C] tensors (undefined or 0-row parts skipped).
Tensor concat_rows(const std::vector<Tensor>& parts) {
  std::int64_t rows = 0, width = -1;
  for (const Tensor& t : parts) {
    if (!t.defined()) continue;
    rows += t.dim(0);
    width = t.dim(1);
  }
  if (width < 0) return Tensor();
  Tensor out = Tensor::empty(DType::F32, {rows, width});
  std::int64_t at = 0;
  for (const Tensor& t : parts) {
    if (!t.defined() || t.dim(0) == 0) continue;
    const Tensor packed = t.contiguous() ? t : t.clone();
    std::memcpy(out.f32() + at * width, packed.f32(), packed.nbytes());
    at += t.dim(0);
  }
  return out;
}

// The rows slice k of n computes.
OutputRows slice_rows(std::size_t k, std::size_t n, OutputRows rows) {
  return k + 1 == n || rows == OutputRows::All ? rows : OutputRows::None;
}

}  // namespace

std::vector<std::int64_t> step_slices(const Pipeline* pipeline, std::int64_t tokens) {
  return pipeline ? pipeline->slices_for(tokens) : std::vector<std::int64_t>{};
}

Tensor run_step(Executor& executor, std::span<const std::int64_t> slices,
                std::span<const std::int32_t> ids, OutputRows rows) {
  if (slices.empty()) return executor.forward_rows(ids, rows);
  std::vector<Tensor> outputs;
  std::size_t begin = 0;
  for (std::size_t k = 0; k < slices.size(); ++k) {
    const auto len = static_cast<std::size_t>(slices[k]);
    outputs.push_back(
        executor.forward_rows(ids.subspan(begin, len), slice_rows(k, slices.size(), rows)));
    begin += len;
  }
  if (rows != OutputRows::All) return outputs.back();
  return concat_rows(outputs);
}

OpObserver StepMeter::observer(OpObserver inner) {
  return [this, inner = std::move(inner)](const Op& op, const Tensor& out, const OpTime& time) {
    const bool comm = communicates(op.kind);
    if (!comm) compute_s_ += std::chrono::duration<double>(time.wall).count();
    if (record_ops_) {
      // The observer runs as the op ends: it started its wall time ago.
      const double duration_us = std::chrono::duration<double, std::micro>(time.wall).count();
      const double end_us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - step_start_)
              .count();
      ops_.push_back({op.name, comm, std::max(0.0, end_us - duration_us), duration_us});
    }
    if (inner) inner(op, out, time);
  };
}

void StepMeter::begin_step(bool record_ops) {
  record_ops_ = record_ops;
  ops_.clear();
  step_start_ = std::chrono::steady_clock::now();
}

StepReport StepMeter::take(double wall_s, std::uint64_t bytes_sent) {
  const auto now = std::chrono::steady_clock::now();
  if (now - memory_read_at_ >= std::chrono::milliseconds(100)) {
    free_memory_bytes_ = profile::available_memory_bytes();
    cpu_share_ = profile::cpu_quota_share(kernels::num_threads());
    memory_read_at_ = now;
  }
  StepReport r{compute_s_, wall_s, bytes_sent, free_memory_bytes_, cpu_share_, std::move(ops_)};
  compute_s_ = 0;
  ops_.clear();
  record_ops_ = false;
  return r;
}

PrimarySession::PrimarySession(net::Transport& transport, Executor& executor, StepMeter* meter,
                               const Pipeline* pipeline, std::int64_t output_width)
    : transport_(transport),
      executor_(executor),
      meter_(meter),
      pipeline_(pipeline),
      output_width_(output_width) {
  HUDDLE_CHECK(transport.rank() == 0, "the primary is rank 0");
  HUDDLE_CHECK(!pipeline || pipeline->output_device() == 0 || output_width > 0,
               "a pipeline whose outputs come from another device needs their width");
}

PrimarySession::~PrimarySession() {
  try {
    end();
  } catch (const Error&) {
    // Workers that are already gone need no goodbye.
  }
}

void PrimarySession::broadcast(std::uint32_t tag, std::span<const std::byte> payload) {
  for (int r = 1; r < transport_.size(); ++r) transport_.send(r, tag, payload);
}

Tensor PrimarySession::forward(std::span<const std::int32_t> ids, bool all_rows) {
  HUDDLE_CHECK(!ended_, "session already ended");
  // Refuse a step no device can run before any device starts it, so the session stays usable.
  const auto tokens = static_cast<std::int64_t>(ids.size());
  if (tokens == 0) throw InputError("no input tokens");
  if (executor_.position() + tokens > executor_.max_positions()) {
    throw InputError(fmt::format(
        "{} tokens after {} already processed exceed the model's context of {} positions", tokens,
        executor_.position(), executor_.max_positions()));
  }
  const std::vector<std::int64_t> slices = step_slices(pipeline_, tokens);
  std::vector<std::byte> payload(sizeof(StepHeader) + ids.size_bytes());
  const StepHeader header{static_cast<std::uint64_t>(executor_.position()),
                          static_cast<std::uint8_t>(all_rows),
                          static_cast<std::uint8_t>(op_spans_),
                          {0, 0},
                          static_cast<std::uint32_t>(ids.size())};
  std::memcpy(payload.data(), &header, sizeof header);
  if (!ids.empty()) std::memcpy(payload.data() + sizeof header, ids.data(), ids.size_bytes());
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t sent_before = transport_.bytes_sent();
  if (meter_) meter_->begin_step(op_spans_);
  broadcast(kStepTag, payload);
  const OutputRows rows = all_rows ? OutputRows::All : OutputRows::Last;
  Tensor out = run_step(executor_, slices, ids, rows);
  if (pipeline_ && pipeline_->output_device() != 0) out = receive_outputs(slices, rows);
  collect_reports(start, sent_before, op_spans_);
  return out;
}

std::map<std::string, Tensor> PrimarySession::run(const std::map<std::string, Tensor>& inputs) {
  HUDDLE_CHECK(!ended_, "session already ended");
  executor_.check_inputs(inputs);  // refused before any device starts: the session stays usable
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t sent_before = transport_.bytes_sent();
  if (meter_) meter_->begin_step(false);
  broadcast(kRunTag, {});
  std::map<std::string, Tensor> out = executor_.run(inputs);
  collect_reports(start, sent_before, false);
  return out;
}

void PrimarySession::collect_reports(std::chrono::steady_clock::time_point start,
                                     std::uint64_t sent_before, bool op_spans) {
  reports_.assign(1, measure(meter_, seconds_since(start), transport_.bytes_sent() - sent_before));
  span_decoders_.resize(static_cast<std::size_t>(transport_.size()));
  for (int r = 1; r < transport_.size(); ++r) {
    WireReport w{};
    transport_.recv_into(r, kStepReportTag, std::as_writable_bytes(std::span(&w, 1)));
    reports_.push_back({w.compute_s, w.wall_s, w.bytes_sent, w.free_memory_bytes, w.cpu_share, {}});
    if (!op_spans) continue;
    const net::Message m = transport_.recv(r);
    if (m.tag != kStepSpansTag) {
      throw TransportError(fmt::format("{}: expected the step's op spans, got tag {:#x}",
                                       transport_.peer_name(r), m.tag));
    }
    reports_.back().ops =
        span_decoders_[static_cast<std::size_t>(r)].decode(m.payload, transport_.peer_name(r));
  }
}

Tensor PrimarySession::receive_outputs(std::span<const std::int64_t> slices, OutputRows rows) {
  const int from = pipeline_->output_device();
  std::vector<Tensor> outputs;
  for (std::size_t k = 0; k < slices.size(); ++k) {
    // At most the slice's rows of the output's width: a larger header is refused unread.
    const auto most = static_cast<std::uint64_t>(slices[k] * output_width_) * sizeof(float);
    Tensor t = collectives::recv_tensor(transport_, from, most);
    if (t.rank() != 2 || t.dtype() != DType::F32 || t.dim(0) > slices[k] ||
        t.dim(1) != output_width_ ||
        (slice_rows(k, slices.size(), rows) == OutputRows::None && t.dim(0) != 0)) {
      throw TransportError(fmt::format("{}: sent a {} output of shape {} for a slice of {} tokens",
                                       transport_.peer_name(from), dtype_name(t.dtype()),
                                       shape_str(t.shape()), slices[k]));
    }
    outputs.push_back(std::move(t));
  }
  if (rows != OutputRows::All) return outputs.back();
  return concat_rows(outputs);
}

void PrimarySession::reset() {
  broadcast(kResetTag, {});
  executor_.reset();
}

void PrimarySession::end() {
  if (ended_) return;
  ended_ = true;
  broadcast(kEndTag, {});
}

void follow_primary(net::Transport& transport, Executor& executor, StepMeter* meter,
                    const Pipeline* pipeline) {
  OpSpanEncoder spans;
  for (;;) {
    net::Message m = transport.recv(0);
    if (m.tag == kEndTag) return;
    if (m.tag == kResetTag) {
      executor.reset();
      continue;
    }
    if (m.tag == kRunTag) {
      const auto start = std::chrono::steady_clock::now();
      const std::uint64_t sent_before = transport.bytes_sent();
      if (meter) meter->begin_step(false);
      executor.run({});
      const StepReport r =
          measure(meter, seconds_since(start), transport.bytes_sent() - sent_before);
      const WireReport w{r.compute_s, r.wall_s, r.bytes_sent, r.free_memory_bytes, r.cpu_share};
      transport.send(0, kStepReportTag, std::as_bytes(std::span(&w, 1)));
      continue;
    }
    if (m.tag != kStepTag || m.payload.size() < sizeof(StepHeader)) {
      throw TransportError(
          fmt::format("{}: unexpected message (tag {:#x}, {} bytes) instead of a step",
                      transport.peer_name(0), m.tag, m.payload.size()));
    }
    StepHeader header;
    std::memcpy(&header, m.payload.data(), sizeof header);
    if (m.payload.size() != sizeof header + std::size_t{header.count} * sizeof(std::int32_t)) {
      throw TransportError(fmt::format("{}: step of {} tokens carries {} bytes",
                                       transport.peer_name(0), header.count, m.payload.size()));
    }
    if (header.position != static_cast<std::uint64_t>(executor.position())) {
      throw TransportError(fmt::format("{}: step at position {}, but this device is at {}",
                                       transport.peer_name(0), header.position,
                                       executor.position()));
    }
    std::vector<std::int32_t> ids(header.count);
    if (header.count > 0)
      std::memcpy(ids.data(), m.payload.data() + sizeof header, ids.size() * sizeof(std::int32_t));
    const auto start = std::chrono::steady_clock::now();
    const std::uint64_t sent_before = transport.bytes_sent();
    if (meter) meter->begin_step(header.op_spans != 0);
    run_step(executor, step_slices(pipeline, static_cast<std::int64_t>(ids.size())), ids,
             header.all_rows != 0 ? OutputRows::All : OutputRows::Last);
    const StepReport r = measure(meter, seconds_since(start), transport.bytes_sent() - sent_before);
    const WireReport w{r.compute_s, r.wall_s, r.bytes_sent, r.free_memory_bytes, r.cpu_share};
    transport.send(0, kStepReportTag, std::as_bytes(std::span(&w, 1)));
    // Asked for: the step's op spans (none without a meter), after the report.
    if (header.op_spans != 0) transport.send(0, kStepSpansTag, spans.encode(r.ops));
  }
}

}  // namespace huddle
