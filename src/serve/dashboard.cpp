#include "serve/dashboard.h"

#include "serve/plan_view.h"
#include "serve/request_error.h"

#include <fmt/format.h>

#include <algorithm>

namespace huddle::serve {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

nlohmann::json number_or_null(double v) {
  return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr);
}

}  // namespace

std::vector<DeviceSpeed> device_speeds(const RequestRecord& request) {
  std::size_t devices = 0;
  for (const StepRecord& s : request.steps) devices = std::max(devices, s.devices.size());
  std::vector<DeviceSpeed> speeds(devices);
  std::vector<std::vector<double>> decode(devices);
  std::vector<double> prefill_tokens(devices, 0), prefill_ms(devices, 0);
  for (std::size_t i = 0; i < request.steps.size(); ++i) {
    const StepRecord& s = request.steps[i];
    for (std::size_t d = 0; d < s.devices.size(); ++d) {
      const DeviceStep& step = s.devices[d];
      speeds[d].bytes_sent += step.bytes_sent;
      if (step.free_memory_bytes > 0) speeds[d].free_memory_bytes = step.free_memory_bytes;
      // The first step is the prompt (prefill); the rest feed one token each (decode).
      if (i == 0) {
        prefill_tokens[d] += static_cast<double>(s.tokens);
        prefill_ms[d] += step.compute_ms;
      } else {
        decode[d].push_back(step.compute_ms);
      }
    }
  }
  for (std::size_t d = 0; d < devices; ++d) {
    if (prefill_ms[d] > 0) speeds[d].prefill_tokens_per_s = prefill_tokens[d] / prefill_ms[d] * 1e3;
    speeds[d].decode_compute_ms = median(decode[d]);
  }
  return speeds;
}

nlohmann::json request_json(const RequestRecord& r) {
  nlohmann::json steps = nlohmann::json::array();
  double decode_ms = 0;
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const StepRecord& s = r.steps[i];
    nlohmann::json devices = nlohmann::json::array();
    for (const DeviceStep& d : s.devices)
      devices.push_back({d.wall_ms, d.compute_ms, d.bytes_sent});
    steps.push_back({s.start_ms, s.tokens, devices, s.ops_kept});
    // Device 0 drives the step: its wall time is the step's.
    if (i > 0 && !s.devices.empty()) decode_ms += s.devices[0].wall_ms;
  }
  const double prefill_ms =
      r.steps.empty() || r.steps[0].devices.empty() ? 0 : r.steps[0].devices[0].wall_ms;
  const auto decode_steps = static_cast<double>(r.steps.size() > 0 ? r.steps.size() - 1 : 0);
  const std::int64_t generated = r.running ? static_cast<std::int64_t>(r.steps.size()) +
                                                 static_cast<std::int64_t>(r.dropped_steps)
                                           : r.completion_tokens;
  return {
      {"id", r.id},
      {"started_unix_ms", r.started_unix_ms},
      {"elapsed_ms", r.elapsed_ms},
      {"running", r.running},
      {"finish_reason", r.running ? nlohmann::json(nullptr) : nlohmann::json(r.finish_reason)},
      {"prompt_tokens", r.prompt_tokens},
      {"completion_tokens", generated},
      {"prefill_ms", number_or_null(prefill_ms)},
      {"decode_tokens_per_s", number_or_null(decode_ms > 0 ? decode_steps / decode_ms * 1e3 : 0)},
      {"tokens_per_s",
       number_or_null(r.elapsed_ms > 0 ? static_cast<double>(generated) / r.elapsed_ms * 1e3 : 0)},
      {"dropped_steps", r.dropped_steps},
      {"steps", steps}};
}

namespace {

nlohmann::json view_of(const ClusterFacts& facts) {
  return facts.plan ? plan_view(*facts.plan)
                    : local_plan_view(facts.devices.empty() ? "primary" : facts.devices[0].name,
                                      facts.layers);
}

}  // namespace

Dashboard::Dashboard(ClusterFacts facts, std::size_t max_requests, std::size_t max_steps)
    : facts_(std::move(facts)), plan_view_(view_of(facts_)), log_(max_requests, max_steps) {}

void Dashboard::set_facts(ClusterFacts facts) {
  nlohmann::json view = view_of(facts);
  std::lock_guard guard(facts_mutex_);
  facts_ = std::move(facts);
  plan_view_ = std::move(view);
}

nlohmann::json Dashboard::cluster_json() const {
  std::lock_guard guard(facts_mutex_);
  // The last finished request that ran steps measures the devices.
  std::vector<DeviceSpeed> speeds;
  std::uint64_t measured_by = 0;
  for (const RequestRecord& r : log_.requests()) {
    if (!r.running && !r.steps.empty()) {
      speeds = device_speeds(r);
      measured_by = r.id;
    }
  }
  nlohmann::json devices = nlohmann::json::array();
  for (std::size_t d = 0; d < facts_.devices.size(); ++d) {
    const DeviceFacts& f = facts_.devices[d];
    nlohmann::json j = {{"index", d},
                        {"name", f.name},
                        {"address", f.address},
                        {"role", d == 0 ? "primary" : "worker"},
                        {"weight_bytes", f.weight_bytes},
                        {"rss_bytes", f.rss_bytes},
                        {"free_memory_bytes", nullptr},
                        {"speed", nullptr},
                        {"bytes_sent_last_request", nullptr}};
    if (d < speeds.size()) {
      const DeviceSpeed& s = speeds[d];
      if (s.free_memory_bytes > 0) j["free_memory_bytes"] = s.free_memory_bytes;
      j["speed"] = {{"prefill_tokens_per_s", number_or_null(s.prefill_tokens_per_s)},
                    {"decode_compute_ms", number_or_null(s.decode_compute_ms)},
                    {"measured_by_request", measured_by}};
      j["bytes_sent_last_request"] = s.bytes_sent;
    }
    devices.push_back(std::move(j));
  }
  // Every pair of devices has its own channel (runtime/mesh.h).
  nlohmann::json links = nlohmann::json::array();
  for (std::size_t a = 0; a < facts_.devices.size(); ++a) {
    for (std::size_t b = a + 1; b < facts_.devices.size(); ++b) {
      links.push_back({{"a", a},
                       {"b", b},
                       {"a_name", facts_.devices[a].name},
                       {"b_name", facts_.devices[b].name},
                       {"transport", facts_.transport}});
    }
  }
  return {{"model",
           {{"id", facts_.model_id},
            {"architecture", facts_.architecture},
            {"layers", facts_.layers},
            {"context", facts_.context}}},
          {"devices", devices},
          {"links", links},
          {"plan", plan_view_},
          {"plan_json", facts_.plan ? facts_.plan->to_json() : nlohmann::json(nullptr)}};
}

nlohmann::json Dashboard::requests_json(std::uint64_t after) const {
  nlohmann::json list = nlohmann::json::array();
  for (const RequestRecord& r : log_.requests()) {
    if (r.id > after || r.running) list.push_back(request_json(r));
  }
  return {{"requests", list}};
}

nlohmann::json Dashboard::step_ops_json(std::optional<std::uint64_t> request,
                                        std::optional<std::size_t> step) const {
  if (!request) {
    const std::vector<RequestRecord> all = log_.requests();
    if (all.empty()) throw RequestError(404, "no request yet", "not_found_error", "request");
    request = all.back().id;
  }
  const std::optional<StepOps> ops = log_.step_ops(*request, step);
  if (!ops) {
    throw RequestError(404,
                       step
                           ? fmt::format("request {} step {} is not kept op by op", *request, *step)
                           : fmt::format("request {} has no step kept op by op", *request),
                       "not_found_error", step ? "step" : "request");
  }
  std::vector<std::string> names;
  {
    std::lock_guard guard(facts_mutex_);
    for (const DeviceFacts& d : facts_.devices) names.push_back(d.name);
  }
  nlohmann::json devices = nlohmann::json::array();
  for (std::size_t d = 0; d < ops->devices.size(); ++d) {
    nlohmann::json spans = nlohmann::json::array();
    for (const OpSpan& op : ops->devices[d]) {
      spans.push_back(
          {op.name, op.start_us / 1e3, op.duration_us / 1e3, op.comm ? "comm" : "compute"});
    }
    devices.push_back({{"index", d},
                       {"name", d < names.size() ? names[d] : fmt::format("device {}", d)},
                       {"ops", std::move(spans)}});
  }
  return {{"request", ops->request},
          {"step", ops->step},
          {"start_ms", ops->start_ms},
          {"tokens", ops->tokens},
          {"devices", std::move(devices)}};
}

}  // namespace huddle::serve
