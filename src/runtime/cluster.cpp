#include "runtime/cluster.h"

#include "collectives/p2p.h"
#include "core/error.h"
#include "core/process_memory.h"
#include "net/session.h"
#include "plan/lowering_rows.h"
#include "runtime/cluster_protocol.h"
#include "runtime/fingerprint.h"
#include "runtime/mesh.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

namespace huddle {
namespace {

std::string payload_text(const net::Message& m) {
  return std::string(reinterpret_cast<const char*>(m.payload.data()), m.payload.size());
}

}  // namespace

Cluster::Cluster(const Model& model, const Plan& plan, ClusterOptions options)
    : model_(&model), plan_(plan), options_(std::move(options)) {
  // A worker with its own copy of the model loads its tensors as the primary did, and maps them
  // when each one's digest is the primary's (the digests cover dtypes: a copy loaded otherwise
  // is not used).
  nlohmann::json fields = {{"config", model.config_text()},
                           {"tensors", model.tensor_names()},
                           {"digests", weight_digests(model.weights())}};
  if (const auto& dtype = model.load_options().weight_dtype) {
    fields["weight_dtype"] = std::string(dtype_name(*dtype));
  }
  start(fields);
}

Cluster::Cluster(const onnx_import::OnnxModel& model, const Plan& plan, ClusterOptions options)
    : onnx_(&model), plan_(plan), options_(std::move(options)) {
  if (!plan_.row_split() && !plan_.op_assigned()) {
    throw PlanError(
        "an imported CNN runs across devices with a row-split or operator-assignment plan");
  }
  model_file_ = onnx_import::read_onnx_file(model.path());
  start({{"format", "onnx"}, {"fingerprint", bytes_fingerprint(model_file_)}});
}

void Cluster::start(const nlohmann::json& model_fields) {
  const int world = plan_.num_devices();
  if (static_cast<int>(options_.workers.size()) != world - 1) {
    throw UsageError(
        fmt::format("the plan has {} devices but {} workers were given (plus this primary)", world,
                    options_.workers.size()));
  }
  // 1. Open the session on every worker (the control channels stay open until the end).
  OpenedSession opened = open_sessions(options_.workers, options_.key, options_.timeout);
  controls_ = std::move(opened.controls);
  if (options_.on_opened) options_.on_opened();
  const std::uint64_t session_id = opened.id;
  const std::vector<std::string>& endpoints = opened.endpoints;
  // 2. Describe the session to each worker.
  for (int r = 1; r < world; ++r) {
    nlohmann::json setup = {{"rank", r},
                            {"world", world},
                            {"session_id", session_id},
                            {"endpoints", endpoints},
                            {"plan", plan_.to_json()},
                            {"timeout_ms", options_.timeout.count()},
                            {"trace", options_.trace}};
    setup.update(model_fields);
    const std::string text = setup.dump();
    controls_[static_cast<std::size_t>(r - 1)]->send(kSetupTag, std::as_bytes(std::span(text)));
  }
  // 3. Rank 0's mesh links: one more channel to each worker, opened as session links.
  transport_ = open_primary_mesh(opened.workers, options_.key, opened.channel, session_id,
                                 options_.timeout, options_.link);

  // 4. Ship every worker that has no copy of the model its weights, one thread per worker so the
  //    links work in parallel.
  std::vector<bool> mapped_locally(static_cast<std::size_t>(world), true);
  for (int r = 1; r < world; ++r) {
    const net::Message m = transport_->recv(r);
    if (m.tag != kWeightsTag) {
      throw TransportError(fmt::format("{}: expected its weights mode, got tag {:#x}",
                                       transport_->peer_name(r), m.tag));
    }
    try {
      mapped_locally[static_cast<std::size_t>(r)] =
          nlohmann::json::parse(payload_text(m)).at("local").get<bool>();
    } catch (const nlohmann::json::exception& e) {
      throw TransportError(
          fmt::format("{}: bad weights message: {}", transport_->peer_name(r), e.what()));
    }
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> senders;
  for (int r = 1; r < world; ++r) {
    if (mapped_locally[static_cast<std::size_t>(r)]) continue;
    senders.emplace_back([&, r] {
      try {
        if (onnx_) {
          transport_->send(r, kModelFileTag, std::as_bytes(std::span(model_file_)));
          return;
        }
        const Program program = lower(model_->graph(), model_->config(), plan_, r);
        for (const Value& v : program.graph.values()) {
          if (v.kind == ValueKind::Weight) {
            collectives::send_tensor(*transport_, r, resolve_weight(model_->weights(), v.weight));
          }
        }
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : senders) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  // 5. Wait until every worker is ready.
  model_file_.clear();
  model_file_.shrink_to_fit();
  program_ = onnx_ ? lower(onnx_->graph(), ModelConfig{}, plan_, 0)  // rows or assignment
                   : lower(model_->graph(), model_->config(), plan_, 0);
  devices_.push_back(
      {plan_.devices.front(),
       onnx_ ? program_weight_bytes(program_) : program_weight_bytes(program_, model_->weights()),
       resident_bytes(), true});
  for (int r = 1; r < world; ++r) {
    const net::Message m = transport_->recv(r);
    if (m.tag != kReadyTag) {
      throw TransportError(
          fmt::format("{}: expected ready, got tag {:#x}", transport_->peer_name(r), m.tag));
    }
    try {
      const nlohmann::json ready = nlohmann::json::parse(payload_text(m));
      devices_.push_back(
          {endpoints[static_cast<std::size_t>(r)], ready.at("weight_bytes").get<std::size_t>(),
           ready.at("rss_bytes").get<std::size_t>(), mapped_locally[static_cast<std::size_t>(r)]});
    } catch (const nlohmann::json::exception& e) {
      throw TransportError(
          fmt::format("{}: malformed ready message: {}", transport_->peer_name(r), e.what()));
    }
  }
  // Device 0 binds the model's own (memory-mapped) weights: no copy.
  const Graph& graph = onnx_ ? onnx_->graph() : model_->graph();
  executor_ =
      std::make_unique<Executor>(program_.graph, onnx_ ? onnx_->weights() : model_->weights(),
                                 onnx_ ? 1 : model_->config().max_positions,
                                 DeviceGroup{transport_.get(), plan_.token_shares});
  executor_->set_observer(meter_.observer(options_.trace ? recorder_.observer() : OpObserver{}),
                          options_.trace);
  session_ = std::make_unique<PrimarySession>(
      *transport_, *executor_, &meter_, plan_.pipeline ? &*plan_.pipeline : nullptr,
      graph.outputs().empty() ? 0 : graph.value(graph.outputs().front()).shape.back());
}

std::map<std::string, Tensor> Cluster::run(const std::map<std::string, Tensor>& inputs) {
  HUDDLE_CHECK(onnx_ != nullptr, "Cluster::run runs an imported graph");
  try {
    return outputs_by_model_name(onnx_->graph(), program_, session_->run(inputs));
  } catch (const TransportError& e) {
    const std::string reports = worker_failures(options_.failure_report_wait);
    if (reports.empty()) throw;
    throw TransportError(fmt::format("{}; workers report: {}", e.what(), reports));
  }
}

Tensor Cluster::ExplainingRunner::forward(std::span<const std::int32_t> ids, bool all_rows) {
  try {
    return cluster_.session_->forward(ids, all_rows);
  } catch (const TransportError& e) {
    const std::string reports = cluster_.worker_failures(cluster_.options_.failure_report_wait);
    if (reports.empty()) throw;
    throw TransportError(fmt::format("{}; workers report: {}", e.what(), reports));
  }
}

void Cluster::ExplainingRunner::reset() {
  cluster_.session_->reset();
}

std::string Cluster::worker_failures(net::Duration wait) {
  std::string reports;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (std::size_t w = 0; w < controls_.size(); ++w) {
    net::SecureChannel& control = *controls_[w];
    // One deadline for all: workers' reports arrive together, so waiting for each in turn
    // would add up idle workers' silences.
    const auto left =
        std::chrono::duration_cast<net::Duration>(deadline - std::chrono::steady_clock::now());
    control.set_io_timeout(std::max(left, net::Duration(1)));
    try {
      control.recv();  // a worker sends nothing on it: it closes it when its session ends
    } catch (const Error& e) {
      const std::string what = e.what();
      // A worker's own account ("session N failed: ..."), not our time-out waiting for it.
      if (what.find("failed:") == std::string::npos) continue;
      reports += fmt::format("{}{}: {}", reports.empty() ? "" : "; ", options_.workers[w], what);
    }
  }
  return reports;
}

Cluster::~Cluster() {
  try {
    finish();
  } catch (const Error&) {
    // Best effort: the workers may already be gone.
  }
}

std::vector<std::vector<Span>> Cluster::finish() {
  std::vector<std::vector<Span>> spans;
  if (finished_) return spans;
  finished_ = true;
  session_->end();
  if (!options_.trace) {
    await_session_end(controls_);
    return spans;
  }
  spans.push_back(recorder_.spans());
  for (int r = 1; r < transport_->size(); ++r) {
    const net::Message m = transport_->recv(r);
    if (m.tag != kTraceTag) {
      throw TransportError(
          fmt::format("{}: expected its trace, got tag {:#x}", transport_->peer_name(r), m.tag));
    }
    try {
      spans.push_back(TraceRecorder::from_json(nlohmann::json::parse(payload_text(m))));
    } catch (const nlohmann::json::exception& e) {
      throw TransportError(
          fmt::format("{}: malformed trace: {}", transport_->peer_name(r), e.what()));
    }
  }
  await_session_end(controls_);
  return spans;
}

}  // namespace huddle
