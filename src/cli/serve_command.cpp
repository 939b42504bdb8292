// `huddle serve`: load a model once (on this device or across several) and answer OpenAI-style
// HTTP requests until killed. The address is printed ("listening on HOST:PORT") before the model
// loads; /health says when it is ready.
#include "cli/command.h"
#include "cli/local_workers.h"
#include "cli/stop_signals.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "net/join_listener.h"
#include "net/key.h"
#include "serve/chat_template.h"
#include "serve/dashboard.h"
#include "serve/engine.h"
#include "serve/server.h"
#include "session/session.h"
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <thread>

namespace huddle::cli {
namespace {

struct ServeOptions {
  std::string model_dir;
  std::string model_id;  // default: the directory's name
  std::string workers;
  std::string admit;  // admission port for workers that join ("" = none)
  std::string key_file;
  int local_devices = 1;
  std::string strategy;
  std::string shares;
  std::string plan_file;
  std::string cluster_file;        // --cluster: devices in --workers order, primary first
  std::int64_t plan_tokens = 128;  // the prompt length planners plan for
  double replan_threshold = 0.1;   // a planner's plan is replaced by one predicted this much faster
  std::string wire;                // --wire
  int gather_chunks = 0;           // --gather-chunks (0: the planner's choice, or 1)
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::int64_t ctx_size = 0;
  int threads = 0;
  std::string weight_dtype;  // --weight-dtype; empty: as stored
  double timeout_s = 10;
  std::size_t max_body_bytes = 1 << 20;
  bool no_recover = false;  // a lost worker makes the server answer 503 from then on
};

// The model's chat template, or none. A template that cannot be read or parsed does not stop the
// server (completions still work): chat requests then get a 400 giving `error`.
std::optional<serve::ChatTemplate> load_chat_template(const std::string& model_dir,
                                                      std::string& error) {
  try {
    return serve::ChatTemplate::load(model_dir);
  } catch (const Error& e) {
    error = e.what();
    std::fprintf(stderr, "huddle: warning: chat completions are off: %s\n", e.what());
    return std::nullopt;
  }
}

// The model and the session that runs it, alive as long as the server.
struct Loaded {
  std::optional<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<LocalWorkers> local;
  std::unique_ptr<net::JoinListener> admission;  // outlives the session that takes its joins
  std::unique_ptr<Session> session;
};

// `on_change`: told when the session runs on other devices (a lost worker, or one that joined).
void load(const ServeOptions& o, int threads, Loaded& out, std::function<void()> on_change) {
  if (!o.admit.empty()) {
    // Open before the model loads: workers that join meanwhile are taken at the first request.
    net::ChannelOptions channel;
    channel.handshake_timeout = net::Duration(static_cast<std::int64_t>(o.timeout_s * 1000));
    channel.io_timeout = channel.handshake_timeout;
    out.admission = std::make_unique<net::JoinListener>(
        net::Listener::bind(net::parse_endpoint(o.admit)), net::load_key_file(o.key_file), channel);
    out.admission->start();
    std::printf("admitting workers on %s\n", out.admission->address().c_str());
    std::fflush(stdout);
  }
  LoadOptions load_options;
  if (!o.weight_dtype.empty()) {
    load_options.weight_dtype = parse_weight_dtype(o.weight_dtype);
    if (!load_options.weight_dtype) {
      throw UsageError(
          fmt::format("--weight-dtype {}: expected f32, f16, bf16, q8_0 or q4_0", o.weight_dtype));
    }
  }
  out.model.emplace(Model::load(o.model_dir, load_options));
  const Model& model = *out.model;
  if (!model.config().causal) {
    throw UsageError(fmt::format("{} is an encoder ({}); it does not generate text", o.model_dir,
                                 model.architecture().name));
  }
  out.tokenizer = Tokenizer::load(o.model_dir);
  SessionOptions session_options;
  session_options.workers = split_list(o.workers);
  if (o.local_devices > 1) {
    out.local = std::make_unique<LocalWorkers>(o.local_devices - 1, o.timeout_s, threads);
    session_options.workers = out.local->addresses();
    session_options.key = net::load_key_file(out.local->key_file());
  } else if (!session_options.workers.empty() || out.admission) {
    session_options.key = net::load_key_file(o.key_file);
  }
  if (out.admission) {
    session_options.joins = [admission = out.admission.get()] { return admission->take(); };
    session_options.on_join = [on_change](const std::vector<std::string>&) { on_change(); };
  }
  session_options.plan.strategy = o.strategy;
  session_options.plan.shares = parse_shares(o.shares);
  session_options.plan.plan_file = o.plan_file;
  session_options.plan.cluster_file = o.cluster_file;
  session_options.plan_tokens = o.plan_tokens;
  session_options.replan_threshold = o.replan_threshold;
  session_options.plan.wire = parse_wire_option(o.wire);
  if (o.gather_chunks > 0) session_options.plan.gather_chunks = o.gather_chunks;
  session_options.plan.timeout_s = o.timeout_s;
  session_options.context = o.ctx_size;
  session_options.recover = !o.no_recover;
  // A planner's plan follows the devices' CPU quotas within requests (Session::switch_plan).
  session_options.online_replan = true;
  session_options.on_recovery = [on_change](const SessionRecovery&) { on_change(); };
  out.session = std::make_unique<Session>(model, std::move(session_options));
}

// What the dashboard shows of the loaded model and its devices.
serve::ClusterFacts dashboard_facts(const Loaded& loaded, const std::string& model_id,
                                    std::int64_t context) {
  serve::ClusterFacts facts;
  facts.model_id = model_id;
  facts.architecture = loaded.model->architecture().name;
  facts.layers = loaded.model->config().layers;
  facts.context = context;
  const bool distributed = loaded.session->plan().num_devices() > 1;
  if (distributed) facts.plan = loaded.session->plan();
  facts.transport = "TCP, authenticated (pre-shared key)";
  for (const DeviceReport& d : loaded.session->devices()) {
    const bool primary = facts.devices.empty();
    facts.devices.push_back(
        {d.name, primary ? "this process" : d.name, d.weight_bytes, d.rss_bytes});
  }
  return facts;
}

void serve(const ServeOptions& o) {
  if (!o.plan_file.empty() && (!o.strategy.empty() || !o.shares.empty()))
    throw UsageError("give --plan or --strategy/--shares, not both");
  if (!o.plan_file.empty() && !o.cluster_file.empty())
    throw UsageError("give --plan or --cluster, not both");
  if (!o.workers.empty() && o.local_devices > 1)
    throw UsageError("give --workers or --local-devices, not both");
  if (!o.workers.empty() && o.key_file.empty()) throw UsageError("--workers needs --key-file");
  if (!o.admit.empty() && o.key_file.empty()) throw UsageError("--admit needs --key-file");
  if (!o.admit.empty() && o.local_devices > 1)
    throw UsageError(
        "give --admit or --local-devices, not both (local workers have their own key)");
  const int threads = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kernels::set_num_threads(threads);

  serve::ServerOptions server_options;
  server_options.host = o.host;
  server_options.port = o.port;
  server_options.api_key = o.api_key;
  server_options.max_body_bytes = o.max_body_bytes;
  server_options.model_id =
      o.model_id.empty() ? std::filesystem::path(o.model_dir).lexically_normal().filename().string()
                         : o.model_id;
  if (server_options.model_id.empty())
    server_options.model_id = std::filesystem::path(o.model_dir).parent_path().filename().string();
  const std::optional<serve::ChatTemplate> chat_template =
      load_chat_template(o.model_dir, server_options.chat_template_error);
  server_options.chat_template = chat_template ? &*chat_template : nullptr;
  server_options.has_chat_template = chat_template || !server_options.chat_template_error.empty();
  // SIGINT and SIGTERM stop the server; the model, the cluster and any local workers are then
  // released in order (a killed server would leave its local workers running).
  StopSignals stop_signals;
  serve::Server server(server_options);
  const int port = server.bind();
  std::printf("listening on %s:%d\n", o.host.c_str(), port);
  std::fflush(stdout);
  std::atomic<bool> listen_returned = false;
  std::thread http([&server, &listen_returned] {
    server.listen();
    listen_returned = true;
  });
  std::thread stopper([&server, &stop_signals] {
    if (const int signal = stop_signals.wait(); signal != 0)
      std::fprintf(stderr, "huddle: stopping on signal %d\n", signal);
    server.stop();
  });
  // Ends the stopper and the HTTP thread on every way out.
  struct Join {
    serve::Server& server;
    std::thread& http;
    std::thread& stopper;
    StopSignals& stop_signals;
    std::atomic<bool>& listen_returned;
    ~Join() {
      stop_signals.wake();
      stopper.join();
      // stop() is lost on a server that has not started listening yet: repeat until it ends.
      while (!listen_returned) {
        server.stop();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (http.joinable()) http.join();
    }
  } join{server, http, stopper, stop_signals, listen_returned};

  Loaded loaded;
  // The dashboard shows the devices and plan the session runs on now.
  serve::Dashboard* shown = nullptr;
  std::int64_t shown_context = 0;
  const auto refresh_dashboard = [&] {
    if (shown) shown->set_facts(dashboard_facts(loaded, server_options.model_id, shown_context));
  };
  load(o, threads, loaded, refresh_dashboard);
  StepRunner& runner = loaded.session->runner();
  serve::EngineOptions engine_options;
  engine_options.context = runner.max_positions();
  if (o.ctx_size > 0) engine_options.context = std::min(engine_options.context, o.ctx_size);
  std::set<std::int32_t> stop(loaded.model->config().eos_ids.begin(),
                              loaded.model->config().eos_ids.end());
  stop.insert(loaded.tokenizer->eos_ids().begin(), loaded.tokenizer->eos_ids().end());
  engine_options.stop_ids.assign(stop.begin(), stop.end());
  if (chat_template)
    engine_options.chat_stop_ids = serve::end_of_turn_ids(*chat_template, *loaded.tokenizer);
  engine_options.vocab_size = static_cast<std::int32_t>(loaded.model->config().vocab_size);
  const int devices = loaded.session->plan().num_devices();
  // Workers end a session whose primary is silent for their timeout: ping well within it. The
  // keep-alive's resets also take in workers that join while the server is idle.
  if (devices > 1 || loaded.admission) {
    engine_options.keepalive =
        std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000 / 2));
  }
  // The dashboard logs every step with what each device reported of it; a single device
  // measures its own (compute time, free memory).
  serve::Dashboard dashboard(
      dashboard_facts(loaded, server_options.model_id, engine_options.context));
  Session& session = *loaded.session;
  // The first steps of each request also come op by op (the timeline's op spans).
  serve::LoggingRunner logged(
      runner, [&session](double wall_s) { return session.step_reports(wall_s); }, dashboard.log(),
      [&session](bool on) { session.set_op_spans(on); });
  engine_options.observer = &dashboard.log();
  // Between requests the session may re-plan on the speeds it timed (as `huddle run --repeat`
  // does); a server does not know its next prompt, so it plans for --plan-tokens.
  engine_options.after_request = [&session, &o, &refresh_dashboard] {
    if (session.after_request(o.plan_tokens, /*last=*/false)) refresh_dashboard();
  };
  shown_context = engine_options.context;
  shown = &dashboard;
  serve::Engine engine(logged, *loaded.tokenizer, engine_options);
  server.set_dashboard(&dashboard);
  server.set_engine(&engine);
  std::fprintf(stderr, "huddle: serving %s (context %lld) on %d device(s)\n",
               server_options.model_id.c_str(), static_cast<long long>(engine.context()), devices);
  http.join();
  // Stopped: no request is running any more once the engine goes (cpp-httplib's stop() waits for
  // its connection threads).
  server.set_engine(nullptr);
  server.set_dashboard(nullptr);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve a model over an OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions)");
  cmd->add_option("--model", o->model_dir, "Hugging Face model directory or GGUF file")->required();
  cmd->add_option("--model-id", o->model_id,
                  "Name reported by /v1/models (default: the directory's name)");
  cmd->add_option("--host", o->host, "Address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", o->port, "Port to listen on; 0 picks a free one (default 8080)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o->api_key,
                  "Require 'Authorization: Bearer KEY' on every route but /health");
  cmd->add_option("--ctx-size", o->ctx_size,
                  "Positions per request, prompt and generated (default: the model's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--weight-dtype", o->weight_dtype,
                  "Keep matrix weights as f32, f16, bf16, q8_0 or q4_0 (default: as stored)");
  cmd->add_option("--threads", o->threads, "Compute threads (default: all cores)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-body-bytes", o->max_body_bytes, "Largest request body accepted")
      ->check(CLI::PositiveNumber);
  auto* dist = "Distribution";
  cmd->add_option("--workers", o->workers, "Workers HOST:PORT,... (devices 1..n after this one)")
      ->group(dist);
  cmd->add_option("--key-file", o->key_file, "Pre-shared key file of the cluster")->group(dist);
  cmd->add_option("--admit", o->admit,
                  "Take in workers that join (huddle worker --join) on HOST:PORT (port 0: any "
                  "free port); each is used from the next request on")
      ->group(dist);
  cmd->add_option("--local-devices", o->local_devices,
                  "Start N-1 workers on 127.0.0.1 and run on N devices (each pinned to cores "
                  "of its own where this process may use enough)")
      ->check(CLI::PositiveNumber)
      ->group(dist);
  cmd->add_option("--strategy", o->strategy,
                  "megatron, sp, galaxy, pipeline, gpipe over --shares (default galaxy, even "
                  "shares); galaxy, hepti, hpipe, uniform-slices, auto without --shares plan for "
                  "--cluster, or profile the devices first")
      ->group(dist);
  cmd->add_option("--cluster", o->cluster_file,
                  "Cluster file (devices in --workers order, this one first): plan for it with "
                  "--strategy (default auto)")
      ->group(dist);
  cmd->add_option("--plan-tokens", o->plan_tokens,
                  "Prompt length the planners plan for (default 128)")
      ->check(CLI::PositiveNumber)
      ->group(dist);
  cmd->add_option("--replan-threshold", o->replan_threshold,
                  "With a planner: re-plan between requests, or within one when a device's CPU "
                  "quota changes, when the re-estimated cluster predicts a plan this much faster "
                  "(default 0.1)")
      ->check(CLI::NonNegativeNumber)
      ->group(dist);
  cmd->add_option("--shares", o->shares, "Relative device speeds, this one first (e.g. 5,3,1)")
      ->group(dist);
  cmd->add_option("--plan", o->plan_file, "Run a saved plan (JSON) instead of --strategy")
      ->group(dist);
  cmd->add_option("--wire", o->wire, kWireHelp)->group(dist);
  cmd->add_option("--gather-chunks", o->gather_chunks, kGatherChunksHelp)
      ->check(CLI::Range(1, Plan::kMaxGatherChunks))
      ->group(dist);
  cmd->add_flag("--no-recover", o->no_recover,
                "Answer 503 once a worker is lost instead of re-planning on the devices left")
      ->group(dist);
  cmd->add_option("--timeout-s", o->timeout_s, "Seconds a silent peer is waited for")
      ->check(CLI::PositiveNumber)
      ->group(dist);
  cmd->callback([o] { serve(*o); });
}

}  // namespace huddle::cli
