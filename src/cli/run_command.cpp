// `huddle run`: load a model, run a prompt (and optionally generate) on this device or across
// several, print results.
#include "cli/command.h"
#include "cli/local_workers.h"
#include "cli/onnx_run.h"
#include "core/error.h"
#include "io/npy.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "net/key.h"
#include "onnx/onnx_model.h"
#include "planner/cluster.h"
#include "planner/cost_model.h"
#include "planner/online_estimator.h"
#include "planner/planners.h"
#include "planner/strategies.h"
#include "runtime/assign_profiler.h"
#include "runtime/cluster.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "runtime/profile_session.h"
#include "runtime/sampling.h"
#include "runtime/trace.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

namespace huddle::cli {
namespace {

struct RunOptions {
  std::string model_dir;
  std::string ids;
  std::string prompt;
  std::string prompt_file;
  int n_predict = 0;
  bool ignore_eos = false;
  SamplingOptions sampling;
  std::string dump_logits;
  int threads = 0;
  std::string weight_dtype;  // --weight-dtype: f32, f16, bf16, q8_0, q4_0; empty: as stored
  bool json = false;
  // Distribution.
  std::string workers;
  std::string key_file;
  std::string strategy;
  std::string shares;
  std::string providers;  // --strategy assign: execution providers (docs/assignment.md)
  std::string plan_file;
  std::string cluster_file;
  std::string save_plan;
  std::string trace;
  int local_devices = 1;
  double timeout_s = 10;
  int link_latency_ms = 0;
  double link_mbps = 0;
  int repeat = 1;
  double replan_threshold = 0.1;
  OnnxRunOptions onnx;  // --model M.onnx: --input, --image, --dump-outputs, ...
};

// Runs the request `repeat` times in one session (a warm-up for benchmarks: the first run pays
// for page faults and cold caches); returns the last result with the prefill times of all runs.
GenerationResult generate_repeated(StepRunner& runner, std::span<const std::int32_t> prompt,
                                   const GenerationOptions& options, int repeat,
                                   std::vector<double>& prefill_ms) {
  GenerationResult result;
  for (int i = 0; i < repeat; ++i) {
    const bool last = i + 1 == repeat;
    GenerationOptions run_options = options;
    if (!last) run_options.on_token = nullptr;  // stream only the final run's text
    result = generate(runner, prompt, run_options);
    prefill_ms.push_back(result.prefill_ms);
  }
  return result;
}

std::vector<double> parse_shares(const std::string& text) {
  std::vector<double> shares;
  for (const std::string& item : split_list(text)) {
    try {
      std::size_t used = 0;
      shares.push_back(std::stod(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw UsageError(fmt::format("--shares: '{}' is not a number (expected e.g. 5,3,1)", item));
    }
  }
  return shares;
}

void check_ids(const std::vector<std::int32_t>& ids, const ModelConfig& config) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= config.vocab_size) {
      throw InputError(fmt::format("token id {} at position {} is outside the vocabulary ({} ids)",
                                   ids[i], i, config.vocab_size));
    }
  }
}

// The plan to run and what it was made for.
struct Planned {
  Plan plan;
  // The cluster the plan's devices are named in: a --cluster file, or what `huddle profile`
  // measured before planning. Absent for --shares / even splits.
  std::optional<ClusterSpec> cluster;
  std::vector<std::string> all_workers;  // every worker given, in the cluster's device order
  std::string planner;                   // the planner that made it, "" when none did
};

bool is_adaptive_planner(const std::string& name) {
  return name == "galaxy" || name == "hepti" || name == "auto";
}

// Whether every device of `plan` is one of `cluster`'s (a saved plan may name others).
bool plan_in_cluster(const Plan& plan, const ClusterSpec& cluster) {
  const std::vector<std::string> names = device_names(cluster);
  return std::all_of(plan.devices.begin(), plan.devices.end(), [&](const std::string& d) {
    return std::find(names.begin(), names.end(), d) != names.end();
  });
}

// Workers of the devices `plan` uses, in plan order: device 0 is always this primary, and
// cluster device i > 0 is worker i - 1.
std::vector<std::string> workers_for(const Plan& plan, const ClusterSpec& cluster,
                                     const std::vector<std::string>& all_workers) {
  const std::vector<std::string> names = device_names(cluster);
  std::vector<std::string> used;
  for (std::size_t d = 1; d < plan.devices.size(); ++d) {
    const auto at = std::find(names.begin(), names.end(), plan.devices[d]);
    if (at == names.end() || at == names.begin()) {
      throw PlanError(
          fmt::format("plan device '{}' is not a worker of the cluster", plan.devices[d]));
    }
    used.push_back(all_workers[static_cast<std::size_t>(at - names.begin()) - 1]);
  }
  return used;
}

// Measures the workers (and this device) at the model's shapes: what `huddle profile` does.
ClusterSpec profile_workers(const RunOptions& o, const Model& model, std::int64_t prompt_tokens,
                            const std::vector<std::string>& workers, const net::PresharedKey& key) {
  ProfileOptions options;
  options.workers = workers;
  options.key = key;
  options.timeout = net::Duration(static_cast<std::int64_t>(o.timeout_s * 1000));
  options.link.latency = net::Duration(o.link_latency_ms);
  options.link.bytes_per_second = o.link_mbps * 1e6 / 8;
  options.shapes = profile::ProbeShapes::of(model.config(), prompt_tokens);
  options.compute_budget_s = 0.5;
  const ClusterProfile profiled = profile_cluster(options);
  std::fprintf(stderr, "huddle: profiled %d devices in %.1f s\n", profiled.cluster.size(),
               profiled.details.at("seconds").get<double>());
  return profiled.cluster;
}

// The plan to run: a saved one (--plan); one a planner makes for a cluster (--cluster, or
// profiled first when --strategy names galaxy, hepti or auto without --shares); or a fixed
// strategy over the given shares.
Planned choose_plan(const RunOptions& o, const Model& model, std::int64_t prompt_tokens,
                    const std::vector<std::string>& workers, const net::PresharedKey* key) {
  Planned out;
  out.all_workers = workers;
  std::vector<std::string> devices = {"primary"};
  devices.insert(devices.end(), workers.begin(), workers.end());
  if (!o.cluster_file.empty()) {
    out.cluster = ClusterSpec::load(o.cluster_file);
    if (out.cluster->size() != static_cast<int>(devices.size())) {
      throw UsageError(
          fmt::format("{} lists {} devices; give its {} workers (in its order) after this primary",
                      o.cluster_file, out.cluster->size(), out.cluster->size() - 1));
    }
    devices = device_names(*out.cluster);
  } else if (!workers.empty() && o.shares.empty() && o.plan_file.empty() &&
             is_adaptive_planner(o.strategy)) {
    out.cluster = profile_workers(o, model, prompt_tokens, workers, *key);
    devices = device_names(*out.cluster);
  }
  if (!o.plan_file.empty()) {
    out.plan = Plan::load(o.plan_file);
    return out;
  }
  if (o.strategy == "assign") {  // operator assignment: profile the providers, then the DP
    if (o.providers.empty()) throw UsageError("--strategy assign needs --providers");
    const assign::AssignOutcome r =
        assign::plan_assignment(model, assign::parse_providers(o.providers), prompt_tokens, 3, key);
    std::fprintf(stderr, "huddle: assign: %zu profiling runs, predicted %.3f ms\n",
                 r.node_runs + r.edge_runs, r.optimal.cost * 1e3);
    out.plan = r.plan;
    return out;
  }
  if (!o.providers.empty()) throw UsageError("--providers goes with --strategy assign");
  if (!out.cluster || !o.shares.empty()) {
    out.plan = make_plan(o.strategy.empty() ? (workers.empty() ? "local" : "galaxy") : o.strategy,
                         model.config(), devices, parse_shares(o.shares));
    return out;
  }
  const CostModel cost(model.config(), model.graph());
  out.planner = o.strategy.empty() ? "auto" : o.strategy;
  const PlanResult result =
      run_planner(out.planner, PlanRequest{cost, *out.cluster, prompt_tokens, std::nullopt});
  out.plan = result.runnable();
  std::fprintf(stderr, "huddle: planner %s chose %s (%s) on %d of %d devices, predicted %.1f ms\n",
               result.strategy.c_str(), out.plan.strategy.c_str(), result.mode.c_str(),
               out.plan.num_devices(), out.cluster->size(), result.prediction.latency_s * 1e3);
  return out;
}

// A cluster's StepRunner that hands every step's device reports to `observe`.
class ObservedRunner final : public StepRunner {
 public:
  using Observer = std::function<void(std::int64_t tokens, std::int64_t context,
                                      const std::vector<StepReport>& reports)>;
  ObservedRunner(Cluster& cluster, Observer observe)
      : cluster_(cluster), observe_(std::move(observe)) {}

  Tensor forward(std::span<const std::int32_t> ids, bool all_rows) override {
    Tensor out = cluster_.runner().forward(ids, all_rows);
    observe_(static_cast<std::int64_t>(ids.size()), position(), cluster_.last_reports());
    return out;
  }
  void reset() override { cluster_.runner().reset(); }
  std::int64_t position() const override { return cluster_.runner().position(); }
  std::int64_t max_positions() const override { return cluster_.runner().max_positions(); }

 private:
  Cluster& cluster_;
  Observer observe_;
};

struct Outcome {
  GenerationResult result;
  std::string strategy = "local";
  std::vector<DeviceReport> devices;
  std::vector<double> exposed_comm_ms;               // per device, with --trace
  std::vector<double> prefill_runs;                  // every run's prefill, with --repeat
  std::vector<std::uint64_t> bytes_sent;             // per device, in the last request
  std::optional<double> predicted_ms;                // the plan's predicted prefill, with a cluster
  nlohmann::json replans = nlohmann::json::array();  // online re-planning decisions
};

// Runs the request `o.repeat` times across the cluster. With a planner's plan (galaxy, hepti,
// auto) and a cluster to plan for, each prefill's device reports update an OnlineEstimator, and
// between requests the plan is replaced (a new session) when the estimate predicts another one
// faster by more than --replan-threshold; each decision is logged with its reason.
void run_distributed(const RunOptions& o, const Model& model, const CostModel& cost,
                     Planned& planned, const std::vector<std::string>& workers,
                     const net::PresharedKey& key, const std::vector<std::int32_t>& prompt,
                     const GenerationOptions& options, Outcome& outcome) {
  Plan& plan = planned.plan;
  const auto prompt_tokens = static_cast<std::int64_t>(prompt.size());
  std::optional<OnlineEstimator> estimator;
  if (planned.cluster && is_adaptive_planner(planned.planner) && o.repeat > 1)
    estimator.emplace(cost, *planned.cluster);
  const bool named_in_cluster = planned.cluster && plan_in_cluster(plan, *planned.cluster);
  std::vector<std::string> devices;
  std::unique_ptr<Cluster> session;
  for (int request = 0; request < o.repeat; ++request) {
    if (!session) {
      const std::vector<std::string> used =
          named_in_cluster ? workers_for(plan, *planned.cluster, planned.all_workers) : workers;
      if (plan.num_devices() != static_cast<int>(used.size()) + 1) {
        throw UsageError(
            fmt::format("the plan has {} devices but {} are given (this primary and {} workers)",
                        plan.num_devices(), used.size() + 1, used.size()));
      }
      devices = {"primary"};
      devices.insert(devices.end(), used.begin(), used.end());
      ClusterOptions cluster_options;
      cluster_options.workers = used;
      cluster_options.key = key;
      cluster_options.timeout = net::Duration(static_cast<std::int64_t>(o.timeout_s * 1000));
      cluster_options.trace = !o.trace.empty();
      cluster_options.link.latency = net::Duration(o.link_latency_ms);
      cluster_options.link.bytes_per_second = o.link_mbps * 1e6 / 8;
      session = std::make_unique<Cluster>(model, plan, std::move(cluster_options));
    }
    std::vector<std::uint64_t> bytes(static_cast<std::size_t>(plan.num_devices()), 0);
    ObservedRunner runner(*session, [&](std::int64_t tokens, std::int64_t context,
                                        const std::vector<StepReport>& reports) {
      for (std::size_t d = 0; d < reports.size() && d < bytes.size(); ++d)
        bytes[d] += reports[d].bytes_sent;
      // Decode steps are too short to time; the first request warms caches up (page faults,
      // thread start-up) and would make every device look slow.
      // The step simulator that re-estimates speeds does not model pipelines (yet).
      if (!estimator || tokens < 8 || request == 0 || plan.pipelined()) return;
      if (plan.tiled_2d()) return;  // the simulator does not model 2d-tiled plans
      std::vector<DeviceObservation> seen;
      for (std::size_t d = 0; d < reports.size(); ++d) {
        seen.push_back({reports[d].compute_s, reports[d].free_memory_bytes,
                        static_cast<std::int64_t>(session->devices()[d].weight_bytes)});
      }
      estimator->observe(plan, tokens, context, seen);
    });
    GenerationOptions run_options = options;
    const bool last = request + 1 == o.repeat;
    if (!last) run_options.on_token = nullptr;  // stream only the final run's text
    outcome.result = generate(runner, prompt, run_options);
    outcome.prefill_runs.push_back(outcome.result.prefill_ms);
    outcome.bytes_sent = bytes;
    if (!estimator || last || plan.pipelined()) continue;
    const ReplanAdvice advice =
        advise_replan(cost, *estimator, plan, planned.planner, prompt_tokens, o.replan_threshold);
    std::fprintf(stderr, "huddle: after request %d: %s%s\n", request + 1, advice.reason.c_str(),
                 advice.replan ? "; re-planning" : "");
    if (!advice.replan) continue;
    outcome.replans.push_back({{"after_request", request + 1},
                               {"reason", advice.reason},
                               {"predicted_ms_before", advice.current_s * 1e3},
                               {"predicted_ms_after", advice.proposed_s * 1e3}});
    session->finish();
    session.reset();
    plan = *advice.plan;
  }
  outcome.strategy = plan.strategy;
  outcome.devices = session->devices();
  const auto spans = session->finish();
  if (!o.trace.empty()) write_chrome_trace(o.trace, devices, spans);
  for (const auto& device_spans : spans)
    outcome.exposed_comm_ms.push_back(exposed_comm_us(device_spans) / 1000.0);
}

// The prompt's token ids: --ids as given, or --prompt / --prompt-file through the model's
// tokenizer.
std::vector<std::int32_t> prompt_ids(const RunOptions& o, const Tokenizer* tokenizer,
                                     std::int64_t context) {
  const int given = !o.ids.empty() + !o.prompt.empty() + !o.prompt_file.empty();
  if (given != 1) throw UsageError("give exactly one of --ids, --prompt and --prompt-file");
  if (!o.ids.empty()) return parse_id_list(o.ids, "--ids");
  std::string text = o.prompt;
  if (!o.prompt_file.empty()) {
    std::ifstream in(o.prompt_file, std::ios::binary);
    if (!in) throw InputError(fmt::format("{}: cannot read the prompt file", o.prompt_file));
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  return tokenizer->encode_for_context(text, static_cast<std::size_t>(context));
}

void run(const RunOptions& o) {
  const bool token_flags = !o.ids.empty() || !o.prompt.empty() || !o.prompt_file.empty() ||
                           o.n_predict > 0 || !o.dump_logits.empty() || !o.shares.empty();
  const bool onnx_flags = !o.onnx.inputs.empty() || !o.onnx.image.empty() ||
                          !o.onnx.dump_outputs.empty() || o.onnx.distribution.profile_layers;
  if (onnx_import::is_onnx_path(o.model_dir) && token_flags) {
    throw UsageError(
        "an ONNX model runs from --input/--image; --ids, --prompt, --n-predict, --dump-logits "
        "and --shares are for transformer model directories");
  }
  if (!onnx_import::is_onnx_path(o.model_dir) && onnx_flags) {
    throw UsageError(
        "--input, --image, --dump-outputs and --profile-layers are for ONNX models (MODEL.onnx)");
  }
  if (onnx_import::is_onnx_path(o.model_dir)) {
    OnnxRunOptions onnx = o.onnx;
    onnx.model = o.model_dir;
    onnx.json = o.json;
    onnx.threads = o.threads;
    onnx.repeat = o.repeat;
    OnnxDistribution& d = onnx.distribution;
    d.workers = split_list(o.workers);
    d.key_file = o.key_file;
    d.local_devices = o.local_devices;
    d.strategy = o.strategy;
    d.plan_file = o.plan_file;
    d.cluster_file = o.cluster_file;
    d.save_plan = o.save_plan;
    d.trace = o.trace;
    d.timeout_s = o.timeout_s;
    d.link_latency_ms = o.link_latency_ms;
    d.link_mbps = o.link_mbps;
    run_onnx(onnx);
    return;
  }
  const int threads = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kernels::set_num_threads(threads);
  if (!o.workers.empty() && o.local_devices > 1)
    throw UsageError("give --workers or --local-devices, not both");
  if (!o.workers.empty() && o.key_file.empty()) throw UsageError("--workers needs --key-file");

  const auto load_start = std::chrono::steady_clock::now();
  LoadOptions load_options;
  if (!o.weight_dtype.empty()) {
    load_options.weight_dtype = parse_weight_dtype(o.weight_dtype);
    if (!load_options.weight_dtype) {
      throw UsageError(
          fmt::format("--weight-dtype {}: expected f32, f16, bf16, q8_0 or q4_0", o.weight_dtype));
    }
  }
  const Model model = Model::load(o.model_dir, load_options);
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start)
          .count();
  const bool text_mode = o.ids.empty();
  std::unique_ptr<Tokenizer> tokenizer;
  if (text_mode) tokenizer = Tokenizer::load(o.model_dir);
  const std::vector<std::int32_t> prompt =
      prompt_ids(o, tokenizer.get(), model.config().max_positions);
  check_ids(prompt, model.config());
  if (o.n_predict > 0 && !model.config().causal) {
    throw UsageError(fmt::format("--n-predict: {} is an encoder ({}); it does not generate tokens",
                                 o.model_dir, model.architecture().name));
  }
  GenerationOptions options;
  options.n_predict = o.n_predict;
  options.keep_prompt_output = !o.dump_logits.empty();
  if (!o.ignore_eos) {
    std::set<std::int32_t> stop(model.config().eos_ids.begin(), model.config().eos_ids.end());
    if (tokenizer) stop.insert(tokenizer->eos_ids().begin(), tokenizer->eos_ids().end());
    options.stop_ids.assign(stop.begin(), stop.end());
  }
  auto sampler = std::make_shared<Sampler>(o.sampling);
  options.pick = [sampler](std::span<const float> logits, std::span<const std::int32_t> history) {
    return sampler->pick(logits, history);
  };
  // Text mode streams the generated text to stdout as tokens arrive (not with --json).
  std::unique_ptr<StreamDecoder> stream;
  if (text_mode && !o.json) {
    stream = std::make_unique<StreamDecoder>(*tokenizer, /*skip_special=*/true);
    options.on_token = [&stream](std::int32_t id) {
      const std::string piece = stream->push(id);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    };
  }

  std::unique_ptr<LocalWorkers> local;
  std::vector<std::string> workers = split_list(o.workers);
  if (o.local_devices > 1) {
    local = std::make_unique<LocalWorkers>(o.local_devices - 1, o.timeout_s, threads);
    workers = local->addresses();
  }
  std::optional<net::PresharedKey> key;
  if (!workers.empty()) key = net::load_key_file(local ? local->key_file().string() : o.key_file);
  Planned planned = choose_plan(o, model, static_cast<std::int64_t>(prompt.size()), workers,
                                key ? &*key : nullptr);
  Plan& plan = planned.plan;
  // Column cuts of block-quantised weights fall between blocks (a saved plan that cuts a block
  // is refused when its weights are resolved, naming the tensor).
  if (o.plan_file.empty()) plan = plan.aligned_to_blocks(model.weight_block());
  plan.validate(model.config(), o.plan_file.empty() ? "plan" : o.plan_file);
  if (plan.op_assigned()) {
    plan.assignment->validate(model.graph(), o.plan_file.empty() ? "plan" : o.plan_file);
  }
  if (!o.save_plan.empty()) plan.save(o.save_plan);
  const CostModel cost(model.config(), model.graph());
  const auto prompt_tokens = static_cast<std::int64_t>(prompt.size());

  Outcome outcome;
  outcome.strategy = plan.strategy;
  if (planned.cluster && plan_in_cluster(plan, *planned.cluster)) {
    try {
      outcome.predicted_ms = cost.predict(plan, *planned.cluster, prompt_tokens).latency_s * 1e3;
    } catch (const PlanError& e) {
      std::fprintf(stderr, "huddle: no prediction: %s\n", e.what());
    }
  }
  if (plan.num_devices() == 1) {
    // An operator-assignment plan runs its lowered program (ops on cpu1 run on one thread).
    const std::optional<Program> assigned =
        plan.op_assigned() ? std::optional(lower(model.graph(), model.config(), plan, 0))
                           : std::nullopt;
    Executor executor(assigned ? assigned->graph : model.graph(), model.weights(),
                      model.config().max_positions);
    TraceRecorder recorder;
    if (!o.trace.empty()) executor.set_observer(recorder.observer());
    outcome.result = generate_repeated(executor, prompt, options, o.repeat, outcome.prefill_runs);
    if (!o.trace.empty()) write_chrome_trace(o.trace, {"primary"}, {recorder.spans()});
  } else {
    if (workers.empty()) {
      throw UsageError(
          fmt::format("the plan has {} devices; give its workers (--workers or "
                      "--local-devices)",
                      plan.num_devices()));
    }
    run_distributed(o, model, cost, planned, workers, *key, prompt, options, outcome);
  }
  const GenerationResult& result = outcome.result;

  if (!o.dump_logits.empty()) io::write_npy(o.dump_logits, result.prompt_output);

  if (o.json) {
    nlohmann::json device_list = nlohmann::json::array();
    for (const DeviceReport& d : outcome.devices) {
      nlohmann::json device = {{"name", d.name},
                               {"weight_bytes", d.weight_bytes},
                               {"rss_bytes", d.rss_bytes},
                               {"weights_mapped_locally", d.weights_mapped_locally}};
      const std::size_t index = device_list.size();
      if (index < outcome.bytes_sent.size()) device["bytes_sent"] = outcome.bytes_sent[index];
      device_list.push_back(std::move(device));
    }
    nlohmann::json j = {{"model", o.model_dir},
                        {"architecture", model.architecture().name},
                        {"strategy", outcome.strategy},
                        {"devices", device_list},
                        {"prompt_tokens", prompt.size()},
                        {"generated", result.generated},
                        {"prompt_ids", prompt},
                        {"load_ms", load_ms},
                        {"prefill_ms", result.prefill_ms},
                        {"decode_ms_per_token", result.decode_ms_per_token()},
                        {"threads", threads},
                        {"weight_bytes", model.weight_bytes()}};
    if (!outcome.exposed_comm_ms.empty()) j["exposed_comm_ms"] = outcome.exposed_comm_ms;
    if (outcome.predicted_ms) j["predicted_ms"] = *outcome.predicted_ms;
    if (!outcome.replans.empty()) j["replans"] = outcome.replans;
    if (o.repeat > 1) j["prefill_ms_runs"] = outcome.prefill_runs;
    if (tokenizer) j["text"] = tokenizer->decode(result.generated, /*skip_special=*/true);
    std::printf("%s\n", j.dump().c_str());
  } else {
    if (stream) {
      const std::string rest = stream->finish();
      std::printf("%s\n", rest.c_str());
    } else if (!result.generated.empty()) {
      std::printf("%s\n", fmt::format("{}", fmt::join(result.generated, ",")).c_str());
    }
    std::fprintf(
        stderr, "%s\n",
        fmt::format(
            "huddle: {} ({}), {} on {} device(s), {} prompt tokens, prefill {:.2f} ms, decode "
            "{:.2f} ms/token, {} threads",
            o.model_dir, model.architecture().name, outcome.strategy, plan.num_devices(),
            prompt.size(), result.prefill_ms, result.decode_ms_per_token(), threads)
            .c_str());
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd =
      app.add_subcommand("run", "Run a prompt through a model (prefill, then greedy generation)");
  cmd->add_option(
         "--model", options->model_dir,
         "Hugging Face model directory, a GGUF file (MODEL.gguf), or an ONNX file (MODEL.onnx)")
      ->required();
  cmd->add_option("--input", options->onnx.inputs,
                  "ONNX: input tensor FILE.npy (single-input models) or NAME=FILE.npy; repeat");
  cmd->add_option("--image", options->onnx.image,
                  "ONNX: an image (JPEG, PNG, ...) as the input, resized and normalised");
  cmd->add_option("--mean", options->onnx.mean, "ONNX --image: per-channel mean (R,G,B)");
  cmd->add_option("--std", options->onnx.std, "ONNX --image: per-channel std (R,G,B)");
  cmd->add_option("--size", options->onnx.size, "ONNX --image: square input size")
      ->check(CLI::Range(1, 16384));
  cmd->add_option("--dump-outputs", options->onnx.dump_outputs,
                  "ONNX: write every graph output to DIR/NAME.npy");
  cmd->add_flag("--profile-layers", options->onnx.distribution.profile_layers,
                "ONNX row split: time every layer here first and plan with the measured costs");
  cmd->add_option("--ids", options->ids, "Prompt token ids, comma-separated (e.g. 1,2,3)");
  cmd->add_option("--prompt", options->prompt,
                  "Prompt text (tokenized with the model's tokenizer)");
  cmd->add_option("--prompt-file", options->prompt_file, "File holding the prompt text");
  cmd->add_option("--n-predict", options->n_predict,
                  "Tokens to generate (stops early at an end-of-sequence id)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Do not stop at end-of-sequence ids");
  auto* sampling = "Sampling (greedy by default)";
  cmd->add_option("--temperature", options->sampling.temperature,
                  "Sampling temperature; 0 = greedy")
      ->group(sampling);
  cmd->add_option("--top-k", options->sampling.top_k,
                  "Sample among the k most likely tokens (0: all)")
      ->group(sampling);
  cmd->add_option("--top-p", options->sampling.top_p, "Nucleus sampling threshold in (0, 1]")
      ->group(sampling);
  cmd->add_option("--repeat-penalty", options->sampling.repeat_penalty,
                  "Penalty > 1 for tokens already seen")
      ->group(sampling);
  cmd->add_option("--seed", options->sampling.seed, "Random seed (same seed, same output)")
      ->group(sampling);
  cmd->add_option(
      "--dump-logits", options->dump_logits,
      "Write the prompt's logits [T, vocab] (encoders: hidden states [T, hidden]) as .npy");
  cmd->add_option("--threads", options->threads, "Compute threads (default: all cores)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--weight-dtype", options->weight_dtype,
                  "Keep matrix weights as f32, f16, bf16, q8_0 or q4_0 (converted at load; "
                  "default: as stored)");
  cmd->add_flag("--json", options->json, "Print one JSON object with the results on stdout");
  cmd->add_option("--repeat", options->repeat,
                  "Run the request N times in one session (benchmarks; reports the last, lists "
                  "every prefill)")
      ->check(CLI::PositiveNumber);
  auto* dist = "Distribution";
  cmd->add_option("--workers", options->workers,
                  "Workers HOST:PORT,... (devices 1..n after this primary)")
      ->group(dist);
  cmd->add_option("--key-file", options->key_file, "Pre-shared key file of the cluster")
      ->group(dist);
  cmd->add_option("--local-devices", options->local_devices,
                  "Start N-1 workers on 127.0.0.1 and run on N devices")
      ->check(CLI::PositiveNumber)
      ->group(dist);
  cmd->add_option(
         "--strategy", options->strategy,
         "local, megatron, sp, galaxy, pipeline, gpipe (fixed, over --shares); assign (over "
         "--providers); galaxy, hepti, "
         "hpipe, uniform-slices, gpipe, auto plan for --cluster; ONNX CNNs: edgeflow (default), "
         "rows-equal, rows-proportional, tiles, local; galaxy/hepti/auto without "
         "--shares plan "
         "for --cluster, or profile the workers first (default: galaxy with even shares with "
         "workers, else local; auto with --cluster)")
      ->group(dist);
  cmd->add_option("--providers", options->providers,
                  "With --strategy assign: execution providers, e.g. cpuN,cpu1 (profiled first)")
      ->group(dist);
  cmd->add_option("--shares", options->shares, "Relative device speeds, primary first (e.g. 5,3,1)")
      ->group(dist);
  cmd->add_option("--plan", options->plan_file, "Run a saved plan (JSON) instead of --strategy")
      ->group(dist);
  cmd->add_option("--cluster", options->cluster_file,
                  "Cluster file (devices in --workers order, primary first): plan with --strategy "
                  "galaxy, hepti, auto, ... (default auto)")
      ->group(dist);
  cmd->add_option("--save-plan", options->save_plan, "Write the plan used to this file")
      ->group(dist);
  cmd->add_option("--replan-threshold", options->replan_threshold,
                  "With --repeat and a planner (galaxy, hepti, auto): re-plan between requests "
                  "when the re-estimated cluster predicts a plan this much faster (default 0.1)")
      ->check(CLI::NonNegativeNumber)
      ->group(dist);
  cmd->add_option("--trace", options->trace,
                  "Write Chrome trace events (per device, per op) to this file")
      ->group(dist);
  cmd->add_option("--timeout-s", options->timeout_s, "Seconds a silent peer is waited for")
      ->check(CLI::PositiveNumber)
      ->group(dist);
  cmd->add_option("--link-latency-ms", options->link_latency_ms,
                  "Emulated latency of each mesh message sent (testbed)")
      ->check(CLI::NonNegativeNumber)
      ->group(dist);
  cmd->add_option("--link-mbps", options->link_mbps,
                  "Emulated send bandwidth, Mbit/s (0: unlimited)")
      ->check(CLI::NonNegativeNumber)
      ->group(dist);
  cmd->callback([options] { run(*options); });
}

}  // namespace huddle::cli
