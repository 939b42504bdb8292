// `huddle run`: load a model, run a prompt (and optionally generate) on this device or across
// several, print results.
#include "cli/command.h"
#include "cli/local_workers.h"
#include "cli/onnx_run.h"
#include "core/error.h"
#include "core/process_memory.h"
#include "io/npy.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "net/key.h"
#include "onnx/onnx_model.h"
#include "runtime/generate.h"
#include "runtime/sampling.h"
#include "runtime/trace.h"
#include "session/session.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <set>
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
  std::string wire;       // --wire
  int gather_chunks = 0;  // --gather-chunks (0: the planner's choice, or 1)
  std::string cluster_file;
  std::string save_plan;
  std::string save_cluster;  // ONNX --calibrate: the calibrated cluster file
  std::string trace;
  int local_devices = 1;
  double timeout_s = 10;
  int link_latency_ms = 0;
  double link_mbps = 0;
  int repeat = 1;
  double replan_threshold = 0.1;
  bool no_recover = false;  // a lost worker ends the request with its error
  OnnxRunOptions onnx;      // --model M.onnx: --input, --image, --dump-outputs, ...
};

void check_ids(const std::vector<std::int32_t>& ids, const ModelConfig& config) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= config.vocab_size) {
      throw InputError(fmt::format("token id {} at position {} is outside the vocabulary ({} ids)",
                                   ids[i], i, config.vocab_size));
    }
  }
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
                          !o.onnx.dump_outputs.empty() || o.onnx.distribution.profile_layers ||
                          o.onnx.distribution.calibrate_runs > 0 || !o.save_cluster.empty();
  if (onnx_import::is_onnx_path(o.model_dir) && token_flags) {
    throw UsageError(
        "an ONNX model runs from --input/--image; --ids, --prompt, --n-predict, --dump-logits "
        "and --shares are for transformer model directories");
  }
  if (!onnx_import::is_onnx_path(o.model_dir) && onnx_flags) {
    throw UsageError(
        "--input, --image, --dump-outputs, --profile-layers, --calibrate and --save-cluster are "
        "for ONNX models (MODEL.onnx)");
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
    d.providers = o.providers;
    d.cluster_file = o.cluster_file;
    d.save_plan = o.save_plan;
    d.wire = parse_wire_option(o.wire);
    d.trace = o.trace;
    d.timeout_s = o.timeout_s;
    d.link_latency_ms = o.link_latency_ms;
    d.link_mbps = o.link_mbps;
    d.save_cluster = o.save_cluster;
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
  SessionOptions session_options;
  session_options.workers = split_list(o.workers);
  if (o.local_devices > 1) {
    local = std::make_unique<LocalWorkers>(o.local_devices - 1, o.timeout_s, threads);
    session_options.workers = local->addresses();
  }
  if (!session_options.workers.empty())
    session_options.key = net::load_key_file(local ? local->key_file().string() : o.key_file);
  PlanChoice& choice = session_options.plan;
  choice.strategy = o.strategy;
  choice.shares = parse_shares(o.shares);
  choice.providers = o.providers;
  choice.plan_file = o.plan_file;
  choice.wire = parse_wire_option(o.wire);
  if (o.gather_chunks > 0) choice.gather_chunks = o.gather_chunks;
  choice.cluster_file = o.cluster_file;
  choice.timeout_s = o.timeout_s;
  choice.link.latency = net::Duration(o.link_latency_ms);
  choice.link.bytes_per_second = o.link_mbps * 1e6 / 8;
  session_options.save_plan = o.save_plan;
  session_options.plan_tokens = static_cast<std::int64_t>(prompt.size());
  session_options.trace = !o.trace.empty();
  session_options.recover = !o.no_recover;
  session_options.online_replan = true;
  session_options.replan_threshold = o.replan_threshold;
  Session session(model, session_options);

  // The request `repeat` times in one session (a warm-up for benchmarks: the first run pays for
  // page faults and cold caches); the last result is reported with the prefill times of all.
  GenerationResult result;
  std::vector<double> prefill_runs, decode_runs;
  std::vector<std::vector<std::int32_t>> generated_runs;
  nlohmann::json replans = nlohmann::json::array();
  for (int request = 0; request < o.repeat; ++request) {
    const bool last = request + 1 == o.repeat;
    GenerationOptions run_options = options;
    if (!last) run_options.on_token = nullptr;  // stream only the final run's text
    result = generate(session.runner(), prompt, run_options);
    prefill_runs.push_back(result.prefill_ms);
    decode_runs.push_back(result.decode_ms_per_token());
    generated_runs.push_back(result.generated);
    if (auto decision = session.after_request(session_options.plan_tokens, last)) {
      replans.push_back(std::move(*decision));
    }
  }
  for (const nlohmann::json& decision : session.replans_during_requests())
    replans.push_back(decision);
  // One device from the start lists none (as before sessions); a cluster lists its devices.
  const bool distributed = session.plan().num_devices() > 1 || !session.recoveries().empty();
  const std::vector<DeviceReport> devices =
      distributed ? session.devices() : std::vector<DeviceReport>{};
  const std::vector<std::uint64_t> bytes_sent = session.bytes_sent();
  const std::vector<std::string> device_names = session.device_names();
  const std::string strategy = session.plan().strategy;
  const std::vector<std::vector<Span>> spans = session.finish();
  if (!o.trace.empty()) write_chrome_trace(o.trace, device_names, spans);
  std::vector<double> exposed_comm_ms;
  std::vector<std::vector<double>> exposed_comm_ms_by_layer;  // [device][outside blocks, layers]
  for (const auto& device_spans : spans) {
    if (!distributed) continue;
    std::vector<double> by_layer = exposed_comm_by_layer_us(device_spans);
    for (double& t : by_layer) t /= 1000.0;
    exposed_comm_ms.push_back(std::accumulate(by_layer.begin(), by_layer.end(), 0.0));
    exposed_comm_ms_by_layer.push_back(std::move(by_layer));
  }

  if (!o.dump_logits.empty()) io::write_npy(o.dump_logits, result.prompt_output);

  if (o.json) {
    nlohmann::json device_list = nlohmann::json::array();
    for (const DeviceReport& d : devices) {
      nlohmann::json device = {{"name", d.name},
                               {"weight_bytes", d.weight_bytes},
                               {"rss_bytes", d.rss_bytes},
                               {"weights_mapped_locally", d.weights_mapped_locally}};
      const std::size_t index = device_list.size();
      if (distributed && index < bytes_sent.size()) device["bytes_sent"] = bytes_sent[index];
      device_list.push_back(std::move(device));
    }
    nlohmann::json j = {{"model", o.model_dir},
                        {"architecture", model.architecture().name},
                        {"strategy", strategy},
                        {"devices", device_list},
                        {"prompt_tokens", prompt.size()},
                        {"generated", result.generated},
                        {"prompt_ids", prompt},
                        {"load_ms", load_ms},
                        {"prefill_ms", result.prefill_ms},
                        {"decode_ms_per_token", result.decode_ms_per_token()},
                        {"threads", threads},
                        {"weight_bytes", model.weight_bytes()},
                        // This process's peak resident memory (VmHWM), weights included.
                        {"peak_rss_bytes", peak_resident_bytes()}};
    if (!exposed_comm_ms.empty()) {
      j["exposed_comm_ms"] = exposed_comm_ms;
      j["exposed_comm_ms_by_layer"] = exposed_comm_ms_by_layer;
    }
    if (session.predicted_ms()) j["predicted_ms"] = *session.predicted_ms();
    if (!replans.empty()) j["replans"] = replans;
    if (!session.recoveries().empty()) j["recoveries"] = session.recoveries_json();
    if (o.repeat > 1) {
      j["prefill_ms_runs"] = prefill_runs;
      j["decode_ms_per_token_runs"] = decode_runs;
      j["generated_runs"] = generated_runs;  // every request's ids: a re-plan changes no answer
    }
    if (tokenizer) j["text"] = tokenizer->decode(result.generated, /*skip_special=*/true);
    std::printf("%s\n", j.dump().c_str());
  } else {
    if (stream) {
      const std::string rest = stream->finish();
      std::printf("%s\n", rest.c_str());
    } else if (!result.generated.empty()) {
      std::printf("%s\n", fmt::format("{}", fmt::join(result.generated, ",")).c_str());
    }
    // The text's last line out before the summary on stderr (stdout may be a buffered pipe that
    // shares a terminal with stderr: scripts/demo 2>&1 | ...).
    std::fflush(stdout);
    std::fprintf(
        stderr, "%s\n",
        fmt::format(
            "huddle: {} ({}), {} on {} device(s), {} prompt tokens, prefill {:.2f} ms, decode "
            "{:.2f} ms/token, {} threads",
            o.model_dir, model.architecture().name, strategy, session.plan().num_devices(),
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
  cmd->add_option("--calibrate", options->onnx.distribution.calibrate_runs,
                  "ONNX row split: first time N runs of a rows-proportional plan on the devices "
                  "and plan with the speeds they delivered")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--save-cluster", options->save_cluster,
                  "ONNX row split with --calibrate: write the calibrated cluster file here");
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
                  "Start N-1 workers on 127.0.0.1 and run on N devices (each pinned to cores "
                  "of its own where this process may use enough)")
      ->check(CLI::PositiveNumber)
      ->group(dist);
  cmd->add_option(
         "--strategy", options->strategy,
         "local, megatron, sp, galaxy, pipeline, gpipe (fixed, over --shares); assign (over "
         "--providers); galaxy, hepti, hpipe, uniform-slices, auto without --shares plan for "
         "--cluster, or profile the workers first; ONNX CNNs: edgeflow (default), rows-equal, "
         "rows-proportional, tiles, local (default: galaxy with even shares with workers, else "
         "local; auto with --cluster)")
      ->group(dist);
  cmd->add_option("--providers", options->providers,
                  "With --strategy assign: execution providers, e.g. cpuN,cpu1 (profiled first)")
      ->group(dist);
  cmd->add_option("--shares", options->shares, "Relative device speeds, primary first (e.g. 5,3,1)")
      ->group(dist);
  cmd->add_option("--plan", options->plan_file, "Run a saved plan (JSON) instead of --strategy")
      ->group(dist);
  cmd->add_option("--wire", options->wire, kWireHelp)->group(dist);
  cmd->add_option("--gather-chunks", options->gather_chunks, kGatherChunksHelp)
      ->check(CLI::Range(1, Plan::kMaxGatherChunks))
      ->group(dist);
  cmd->add_option("--cluster", options->cluster_file,
                  "Cluster file (devices in --workers order, primary first): plan with --strategy "
                  "galaxy, hepti, auto, ... (default auto)")
      ->group(dist);
  cmd->add_option("--save-plan", options->save_plan, "Write the plan used to this file")
      ->group(dist);
  cmd->add_option("--replan-threshold", options->replan_threshold,
                  "With a planner (galaxy, hepti, auto): re-plan between requests (--repeat), or "
                  "within one when a device's CPU quota changes, when the re-estimated cluster "
                  "predicts a plan this much faster (default 0.1)")
      ->check(CLI::NonNegativeNumber)
      ->group(dist);
  cmd->add_flag("--no-recover", options->no_recover,
                "End the request when a worker is lost instead of re-planning on the devices left")
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
