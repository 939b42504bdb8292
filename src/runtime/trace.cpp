#include "runtime/trace.h"

#include "core/error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <numeric>

namespace huddle {
namespace {

double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

OpObserver TraceRecorder::observer() {
  return [this](const Op& op, const Tensor& out, const OpTime& time) {
    const double duration = std::chrono::duration<double, std::micro>(time.wall).count();
    const std::int64_t rows = out.defined() && out.rank() >= 1 ? out.dim(0) : -1;
    const double cpu =
        time.cpu.count() < 0 ? -1.0 : std::chrono::duration<double, std::micro>(time.cpu).count();
    spans_.push_back({op.name, communicates(op.kind) ? "comm" : "compute", op.layer,
                      now_us() - duration, duration, rows, cpu});
  };
}

nlohmann::json TraceRecorder::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const Span& s : spans_)
    list.push_back({s.name, s.category, s.layer, s.start_us, s.duration_us, s.rows, s.cpu_us});
  return list;
}

std::vector<Span> TraceRecorder::from_json(const nlohmann::json& j) {
  std::vector<Span> spans;
  if (!j.is_array()) throw TransportError("trace: expected a list of spans");
  for (const auto& e : j) {
    // [name, category, layer, start, duration, rows, cpu]; rows and cpu may be absent.
    if (!e.is_array() || e.size() < 5 || e.size() > 7 || !e[0].is_string() || !e[1].is_string() ||
        !e[2].is_number_integer() || !e[3].is_number() || !e[4].is_number() ||
        (e.size() >= 6 && !e[5].is_number_integer()) || (e.size() == 7 && !e[6].is_number())) {
      throw TransportError("trace: malformed span");
    }
    spans.push_back({e[0].get<std::string>(), e[1].get<std::string>(), e[2].get<int>(),
                     e[3].get<double>(), e[4].get<double>(),
                     e.size() >= 6 ? e[5].get<std::int64_t>() : -1,
                     e.size() == 7 ? e[6].get<double>() : -1.0});
  }
  return spans;
}

void write_chrome_trace(const std::string& path, const std::vector<std::string>& device_names,
                        const std::vector<std::vector<Span>>& spans) {
  double origin = INFINITY;
  for (const auto& device : spans) {
    for (const Span& s : device) origin = std::min(origin, s.start_us);
  }
  nlohmann::json events = nlohmann::json::array();
  for (std::size_t d = 0; d < spans.size(); ++d) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", d},
                      {"args", {{"name", fmt::format("device {} ({})", d, device_names[d])}}}});
    for (const Span& s : spans[d]) {
      nlohmann::json args{{"layer", s.layer}, {"rows", s.rows}};
      if (s.cpu_us >= 0) args["cpu_us"] = s.cpu_us;  // the process's CPU time over the op
      events.push_back({{"name", s.name},
                        {"cat", s.category},
                        {"ph", "X"},
                        {"pid", d},
                        {"tid", s.category == "comm" ? 1 : 0},
                        {"ts", s.start_us - origin},
                        {"dur", s.duration_us},
                        {"args", args}});
    }
  }
  std::ofstream out(path);
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
  if (!out) throw Error(fmt::format("{}: cannot write the trace", path));
}

std::vector<double> exposed_comm_by_layer_us(const std::vector<Span>& spans) {
  std::vector<double> by_layer(1, 0.0);
  for (const Span& comm : spans) {
    if (comm.category != "comm") continue;
    // Compute that ran inside the collective (overlapped GEMM tiles) hid part of it.
    double hidden = 0;
    for (const Span& s : spans) {
      if (s.category == "compute" && s.start_us >= comm.start_us &&
          s.start_us + s.duration_us <= comm.start_us + comm.duration_us) {
        hidden += s.duration_us;
      }
    }
    const auto slot = static_cast<std::size_t>(std::max(comm.layer, -1) + 1);
    if (slot >= by_layer.size()) by_layer.resize(slot + 1, 0.0);
    by_layer[slot] += std::max(0.0, comm.duration_us - hidden);
  }
  return by_layer;
}

double exposed_comm_us(const std::vector<Span>& spans) {
  const std::vector<double> by_layer = exposed_comm_by_layer_us(spans);
  return std::accumulate(by_layer.begin(), by_layer.end(), 0.0);
}

std::vector<double> compute_cpu_by_run_s(const std::vector<Span>& spans, int runs) {
  if (runs <= 0 || spans.size() % static_cast<std::size_t>(runs) != 0) {
    throw Error(fmt::format("{} op spans do not divide into {} runs", spans.size(), runs));
  }
  const std::size_t per_run = spans.size() / static_cast<std::size_t>(runs);
  std::vector<double> out(static_cast<std::size_t>(runs), 0.0);
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    if (s.category != "compute") continue;
    if (s.cpu_us < 0) throw Error(fmt::format("op {}: its CPU time was not measured", s.name));
    out[i / per_run] += s.cpu_us * 1e-6;
  }
  return out;
}

}  // namespace huddle
