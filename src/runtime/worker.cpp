#include "runtime/worker.h"

#include "collectives/p2p.h"
#include "core/error.h"
#include "core/process_memory.h"
#include "core/quant.h"
#include "io/strict_json.h"
#include "net/session.h"
#include "net/tcp_transport.h"
#include "onnx/onnx_model.h"
#include "plan/lowering.h"
#include "plan/lowering_rows.h"
#include "plan/row_graph.h"
#include "runtime/cluster_protocol.h"
#include "runtime/executor.h"
#include "runtime/fingerprint.h"
#include "runtime/mesh.h"
#include "runtime/profile_session.h"
#include "runtime/session.h"
#include "runtime/trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <exception>
#include <map>
#include <optional>
#include <set>

namespace huddle {
namespace {

struct Setup {
  int rank = 0;
  int world = 0;
  std::uint64_t session_id = 0;
  std::vector<std::string> endpoints;
  std::string config;
  std::vector<std::string> tensors;
  LoadOptions load;  // how the primary loaded the model ("weight_dtype")
  nlohmann::json plan;
  int timeout_ms = 0;
  std::map<std::string, std::string> digests;  // canonical tensor name -> tensor_digest
  std::string fingerprint;                     // an ONNX model file's bytes_fingerprint
  bool trace = false;
  bool onnx = false;  // "format": "onnx": an imported CNN, sent (or mapped) as its file
};

Setup parse_setup(const net::Message& m, const net::OpenRequest& open, const std::string& peer) {
  if (m.tag != kSetupTag) {
    throw TransportError(fmt::format("{}: expected the session setup, got tag {:#x}", peer, m.tag));
  }
  try {
    const nlohmann::json j = io::parse_strict_json(
        std::string_view(reinterpret_cast<const char*>(m.payload.data()), m.payload.size()),
        peer + ": session setup");
    Setup s;
    s.rank = j.at("rank").get<int>();
    s.world = j.at("world").get<int>();
    s.session_id = j.at("session_id").get<std::uint64_t>();
    s.endpoints = j.at("endpoints").get<std::vector<std::string>>();
    s.onnx = j.value("format", std::string("hf")) == "onnx";
    if (!s.onnx) {
      s.config = j.at("config").get<std::string>();
      s.tensors = j.at("tensors").get<std::vector<std::string>>();
      if (j.contains("weight_dtype")) {
        const auto name = j.at("weight_dtype").get<std::string>();
        s.load.weight_dtype = parse_weight_dtype(name);
        if (!s.load.weight_dtype) throw TransportError("unknown weight_dtype '" + name + "'");
      }
      s.digests = j.at("digests").get<std::map<std::string, std::string>>();
    } else {
      s.fingerprint = j.at("fingerprint").get<std::string>();
    }
    s.plan = j.at("plan");
    s.timeout_ms = j.at("timeout_ms").get<int>();
    s.trace = j.at("trace").get<bool>();
    if (s.world < 2 || s.rank < 1 || s.rank >= s.world ||
        static_cast<int>(s.endpoints.size()) != s.world || s.session_id != open.session_id ||
        s.timeout_ms <= 0) {
      throw TransportError("inconsistent rank, world, endpoints, session or timeout");
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw TransportError(fmt::format("{}: malformed session setup: {}", peer, e.what()));
  } catch (const LoadError& e) {
    throw TransportError(e.what());
  } catch (const TransportError& e) {
    throw TransportError(fmt::format("{}: bad session setup: {}", peer, e.what()));
  }
}

// A device's part once its program and weights are in place: tell the primary it is ready,
// follow its steps until it ends the session, send the trace if asked. The executor takes
// `weights` (each weight it packs is freed once packed: held once, never received and packed).
void serve_program(net::TcpTransport& transport, const Program& program, WeightMap weights,
                   std::int64_t max_positions, const Plan& plan, const Setup& s,
                   const WorkerOptions& options) {
  const std::size_t weight_bytes = program_weight_bytes(program, weights);
  Executor executor(program.graph, std::move(weights), max_positions,
                    DeviceGroup{&transport, plan.token_shares});
  TraceRecorder recorder;
  StepMeter meter;
  executor.set_observer(meter.observer(s.trace ? recorder.observer() : OpObserver{}), s.trace);
  const std::string ready =
      nlohmann::json{{"weight_bytes", weight_bytes}, {"rss_bytes", resident_bytes()}}.dump();
  transport.send(0, kReadyTag, std::as_bytes(std::span(ready)));
  if (options.log) {
    options.log(fmt::format("session {}: device {} of {}, {:.1f} MB of weights, {} ops",
                            s.session_id, s.rank, s.world, static_cast<double>(weight_bytes) / 1e6,
                            program.graph.ops().size()));
  }
  follow_primary(transport, executor, &meter, plan.pipeline ? &*plan.pipeline : nullptr);
  if (s.trace) {
    const std::string spans = recorder.to_json().dump();
    transport.send(0, kTraceTag, std::as_bytes(std::span(spans)));
  }
  if (options.log) options.log(fmt::format("session {}: ended", s.session_id));
}

// An imported CNN: the model travels as its file (or is read from the worker's own copy when
// its fingerprint matches), and each device holds the weights of its own units (a row-split
// plan) or ops (an operator assignment).
void serve_onnx_session(const net::SecureChannel& control, const Setup& s,
                        std::unique_ptr<net::TcpTransport>& transport, net::LinkAcceptor& acceptor,
                        const WorkerOptions& options) {
  const std::string source = fmt::format("session {} from {}", s.session_id, control.name());
  const Plan plan = Plan::from_json(s.plan, source);
  if (!plan.row_split() && !plan.op_assigned())
    throw PlanError(source + ": an ONNX model needs a row-split or operator-assignment plan");
  if (plan.num_devices() != s.world)
    throw PlanError(fmt::format("{}: plan for {} devices", source, plan.num_devices()));
  transport =
      join_mesh(MeshPlace{s.rank, s.world, s.session_id, s.endpoints, net::Duration(s.timeout_ms)},
                acceptor, options.key, options.channel, options.link);
  std::optional<std::string> bytes;
  if (options.model_dir && options.model_dir->extension() == ".onnx") {
    bytes = onnx_import::read_onnx_file(*options.model_dir);
    if (bytes_fingerprint(*bytes) != s.fingerprint) {
      if (options.log) {
        options.log(
            fmt::format("session {}: local model {} differs from the primary's; "
                        "receiving it",
                        s.session_id, options.model_dir->string()));
      }
      bytes.reset();
    }
  }
  const std::string mode = nlohmann::json{{"local", bytes.has_value()}}.dump();
  transport->send(0, kWeightsTag, std::as_bytes(std::span(mode)));
  if (!bytes) {
    const net::Message m = transport->recv(0);
    if (m.tag != kModelFileTag) {
      throw TransportError(fmt::format("{}: expected the model file, got tag {:#x}",
                                       transport->peer_name(0), m.tag));
    }
    bytes.emplace(reinterpret_cast<const char*>(m.payload.data()), m.payload.size());
  }
  Program program;
  WeightMap weights;
  {
    const auto model = onnx_import::OnnxModel::load_bytes(*bytes, fmt::format("{}: model", source));
    bytes.reset();
    plan.validate(rows::build_row_graph(model.graph()), source);
    program = lower(model.graph(), ModelConfig{}, plan, s.rank);  // rows or assignment
    weights = extract_weights(program, model.weights());
  }  // the rest of the model is freed: only this device's units' weights stay
  localize_weights(program);
  serve_program(*transport, program, std::move(weights), 1, plan, s, options);
}

// The tensors `program` reads, loaded from the worker's own copy of the model at `dir` as the
// primary loaded its model (its weight dtype) and nothing else of the copy; nullopt (logged) when
// one of them is absent from the copy or its digest is not the primary's: the worker then
// receives its weights.
std::optional<Model> load_own_shard(const std::filesystem::path& dir, const Program& program,
                                    const Setup& s, const WorkerOptions& options) {
  std::set<std::string> needed;
  for (const Value& v : program.graph.values()) {
    if (v.kind == ValueKind::Weight) needed.insert(v.weight.tensor);
  }
  for (const std::string& name : needed) {
    if (!s.digests.contains(name)) {
      throw TransportError(
          fmt::format("session {}: the setup has no digest of tensor '{}'", s.session_id, name));
    }
  }
  LoadOptions load = s.load;
  load.only_tensors = needed;
  Model local = Model::load(dir, load);
  const auto differs = [&](const std::string& reason) {
    if (options.log) {
      options.log(fmt::format(
          "session {}: local model {} differs from the primary's ({}); receiving weights",
          s.session_id, dir.string(), reason));
    }
    return std::nullopt;
  };
  for (const std::string& name : needed) {
    const auto mine = local.weights().find(name);
    if (mine == local.weights().end()) return differs(fmt::format("no tensor '{}'", name));
    if (tensor_digest(mine->second) != s.digests.at(name)) {
      return differs(fmt::format("tensor '{}'", name));
    }
  }
  if (options.log) {
    options.log(fmt::format("session {}: read {} of the {} tensors of {} ({:.1f} MB as kept)",
                            s.session_id, local.weights().size(), local.tensor_names().size(),
                            dir.string(), static_cast<double>(local.weight_bytes()) / 1e6));
  }
  return local;
}

void serve_session(net::SecureChannel& control, const net::Message& setup,
                   std::unique_ptr<net::TcpTransport>& transport, const net::OpenRequest& open,
                   net::LinkAcceptor& acceptor, const WorkerOptions& options) {
  const std::string primary = control.name();
  const Setup s = parse_setup(setup, open, primary);
  if (options.log) {
    options.log(fmt::format("session {}: opened by {}, device {} of {}", s.session_id, primary,
                            s.rank, s.world));
  }
  if (s.onnx) {
    serve_onnx_session(control, s, transport, acceptor, options);
    return;
  }
  const std::string source = fmt::format("session {} from {}", s.session_id, primary);
  ModelDescription model = describe_model(s.config, s.tensors, source);
  const Plan plan = Plan::from_json(s.plan, source);
  plan.validate(model.config, source);
  if (plan.num_devices() != s.world)
    throw PlanError(fmt::format("{}: plan for {} devices", source, plan.num_devices()));
  Program program = lower(model.graph, model.config, plan, s.rank);

  transport =
      join_mesh(MeshPlace{s.rank, s.world, s.session_id, s.endpoints, net::Duration(s.timeout_ms)},
                acceptor, options.key, options.channel, options.link);
  // Map the weights from our own copy of the model when it is the primary's, else receive them.
  WeightMap weights;
  std::optional<Model> local;
  if (options.model_dir) local = load_own_shard(*options.model_dir, program, s, options);
  const std::string mode = nlohmann::json{{"local", local.has_value()}}.dump();
  transport->send(0, kWeightsTag, std::as_bytes(std::span(mode)));
  if (local) {
    weights = extract_weights(program, local->weights());
    local.reset();  // unmaps the file: only the program's slices stay resident
  } else {
    for (const Value& v : program.graph.values()) {
      if (v.kind != ValueKind::Weight) continue;
      // In the dtype the primary keeps it in (F32, 16-bit or block-quantised); never more bytes
      // than an F32 tensor of the expected shape.
      Tensor t =
          collectives::recv_tensor(*transport, 0, dtype_bytes(DType::F32, shape_numel(v.shape)));
      if (t.shape() != v.shape || !is_weight_dtype(t.dtype()) ||
          (t.dtype() != DType::F32 && v.shape.size() != 2)) {
        throw TransportError(fmt::format("{}: sent weight '{}' as {} {}, expected shape {}",
                                         transport->peer_name(0), v.name, dtype_name(t.dtype()),
                                         shape_str(t.shape()), shape_str(v.shape)));
      }
      weights.emplace(v.name, std::move(t));
    }
  }
  localize_weights(program);
  serve_program(*transport, program, std::move(weights), model.config.max_positions, plan, s,
                options);
}

// Runs a session (an inference session, or a profiling one when the first message says so); on
// failure tells the primary why (on its data link too) before links close.
void serve(net::SecureChannel& control, const net::OpenRequest& open, net::LinkAcceptor& acceptor,
           const WorkerOptions& options) {
  std::unique_ptr<net::TcpTransport> transport;
  try {
    const net::Message first = control.recv();
    if (first.tag == kProfileTag) {
      serve_profile(control, first, transport, open, acceptor, options);
    } else {
      serve_session(control, first, transport, open, acceptor, options);
    }
  } catch (const std::exception& e) {
    if (transport) transport->link(0).close(e.what());
    throw;
  }
}

}  // namespace

net::Server::SessionHandler make_worker_handler(WorkerOptions options) {
  return [options = std::move(options)](net::SecureChannel& control, const net::OpenRequest& open,
                                        net::LinkAcceptor& acceptor) {
    // The session's memory goes back to the system when it ends, however it ends: the next
    // session (a re-plan, a mode switch for a device short of memory) starts from there.
    struct ReleaseAtEnd {
      ~ReleaseAtEnd() { release_free_memory(); }
    } release;
    serve(control, open, acceptor, options);
  };
}

}  // namespace huddle
