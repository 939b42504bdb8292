// `huddle run --model M.onnx --input x.npy` and `huddle info M.onnx`: thin over
// onnx_import::OnnxModel, the Executor's named-tensor entry point and io (npy, images).
#include "cli/onnx_run.h"

#include "cli/command.h"
#include "cli/onnx_assign.h"
#include "core/error.h"
#include "graph/channels_last.h"
#include "io/image.h"
#include "io/npy.h"
#include "kernels/cnn.h"
#include "kernels/kernels.h"
#include "onnx/fuse.h"
#include "onnx/onnx_model.h"
#include "runtime/executor.h"
#include "runtime/trace.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <optional>
#include <thread>

namespace huddle::cli {
namespace {

std::array<float, 3> parse_triple(const std::string& text, const std::string& flag,
                                  std::array<float, 3> fallback) {
  if (text.empty()) return fallback;
  const std::vector<std::string> items = split_list(text);
  if (items.size() != 3) throw UsageError(fmt::format("{} takes three numbers (R,G,B)", flag));
  std::array<float, 3> out{};
  for (std::size_t i = 0; i < 3; ++i) {
    try {
      std::size_t used = 0;
      out[i] = std::stof(items[i], &used);
      if (used != items[i].size()) throw std::invalid_argument(items[i]);
    } catch (const std::exception&) {
      throw UsageError(fmt::format("{}: '{}' is not a number", flag, items[i]));
    }
  }
  return out;
}

// A file name for an output: characters other than [A-Za-z0-9._-] become '_'.
std::string file_name_for(const std::string& name) {
  std::string s = name;
  for (char& ch : s) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
    if (!ok) ch = '_';
  }
  if (s.empty() || s == "." || s == "..") s = "output";
  return s;
}

// Every value times `factor` (seconds to milliseconds for the JSON report).
std::vector<double> scaled(std::vector<double> values, double factor) {
  for (double& v : values) v *= factor;
  return values;
}

// Indices of the k largest values of a [N] or [1, N] tensor, largest first; empty otherwise.
std::vector<std::int64_t> top_k(const Tensor& t, std::size_t k) {
  const Shape& s = t.shape();
  if (!(s.size() == 1 || (s.size() == 2 && s[0] == 1))) return {};
  std::vector<std::int64_t> idx(static_cast<std::size_t>(t.numel()));
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min(k, idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                    [&](std::int64_t a, std::int64_t b) { return t.f32()[a] > t.f32()[b]; });
  idx.resize(k);
  return idx;
}

}  // namespace

void run_onnx(const OnnxRunOptions& o) {
  const int threads = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kernels::set_num_threads(threads);
  if (o.repeat < 1) throw UsageError("--repeat must be at least 1");
  if (o.inputs.empty() == o.image.empty())
    throw UsageError("an ONNX model takes --input FILE.npy (or NAME=FILE.npy) or --image FILE");

  // Inputs by name ("" = the model's only input), read before the model so that their shapes can
  // fill the model's symbolic dimensions.
  std::map<std::string, Tensor> given;
  std::map<std::string, std::string> source;
  for (const std::string& spec : o.inputs) {
    const auto eq = spec.find('=');
    const std::string name = eq == std::string::npos ? "" : spec.substr(0, eq);
    const std::string file = eq == std::string::npos ? spec : spec.substr(eq + 1);
    if (given.contains(name))
      throw UsageError(fmt::format("--input: '{}' is given twice", name.empty() ? file : name));
    Tensor t = io::read_npy(file);
    if (t.dtype() != DType::F32)
      throw InputError(
          fmt::format("{}: holds {}, the model takes float32", file, dtype_name(t.dtype())));
    given[name] = std::move(t);
    source[name] = file;
  }
  if (!o.image.empty()) {
    io::ImageOptions io_opts;
    io_opts.width = io_opts.height = o.size;
    io_opts.mean = parse_triple(o.mean, "--mean", io_opts.mean);
    io_opts.std = parse_triple(o.std, "--std", io_opts.std);
    given[""] = io::load_image(o.image, io_opts);
    source[""] = o.image;
  }

  onnx_import::ImportOptions options;
  if (given.contains("")) {
    if (given.size() > 1)
      throw UsageError("name every --input (NAME=FILE.npy) of a multi-input model");
    // Resolved after a first look at the model's inputs.
    const auto probe = onnx_import::OnnxModel::load(o.model, [&] {
      onnx_import::ImportOptions p;
      p.fuse = false;
      return p;
    }());
    if (probe.inputs().size() != 1) {
      throw UsageError(fmt::format("{} has {} inputs; name each with --input NAME=FILE.npy",
                                   o.model, probe.inputs().size()));
    }
    const std::string name = probe.inputs()[0].name;
    given[name] = given[""];
    source[name] = source[""];
    given.erase("");
    source.erase("");
  }
  for (const auto& [name, t] : given) options.input_shapes[name] = t.shape();

  const auto load_start = std::chrono::steady_clock::now();
  std::optional<onnx_import::OnnxModel> model;
  try {
    model.emplace(onnx_import::OnnxModel::load(o.model, options));
  } catch (const InputError& e) {
    std::vector<std::string> files;
    for (const auto& [name, file] : source)
      files.push_back(fmt::format("'{}' from {}", name, file));
    throw InputError(fmt::format("{} (inputs: {})", e.what(), fmt::join(files, ", ")));
  }
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start)
          .count();
  for (const auto& in : model->inputs()) {
    if (!given.contains(in.name))
      throw InputError(fmt::format("{}: input '{}' {} is not given (--input {}=FILE.npy)", o.model,
                                   in.name, shape_str(in.shape), in.name));
  }

  // Activations are allocated per op and freed after their last reader; keep freed blocks in
  // the heap (no mmap/munmap per tensor) so repeated runs do not pay page faults for every
  // activation again (measured: most of a ResNet-50 run's system time without this).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  std::map<std::string, Tensor> outputs;
  std::vector<double> run_ms;
  std::optional<DistributedRun> distributed;
  if (!o.distribution.providers.empty() && o.distribution.strategy != "assign")
    throw UsageError("--providers goes with --strategy assign");
  if (wants_assignment(o.distribution)) {
    if (o.distribution.wire && *o.distribution.wire != WireFormat::F32)
      throw UsageError("--wire: operator assignments move tensors as f32 only");
    distributed = run_onnx_assigned(*model, given, o.distribution, o.repeat);
    outputs = distributed->outputs;
    run_ms = distributed->run_ms;
  } else if (o.distribution.active()) {
    distributed = run_onnx_distributed(*model, given, o.distribution, o.repeat, threads);
    outputs = distributed->outputs;
    run_ms = distributed->run_ms;
  } else {
    // One device, whole tensors: channels-last convolutions where they are faster
    // (channels_last.h).
    const Graph graph = kernels::channels_last_convs()
                            ? onnx_import::fuse_residual_adds(to_channels_last(model->graph()))
                            : model->graph();
    Executor executor(graph, model->weights(), 0);
    TraceRecorder recorder;
    if (!o.distribution.trace.empty())
      executor.set_observer(recorder.observer(), /*measure_cpu=*/true);
    for (int i = 0; i < o.repeat; ++i) {
      const auto start = std::chrono::steady_clock::now();
      outputs = executor.run(given);
      run_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    if (!o.distribution.trace.empty())
      write_chrome_trace(o.distribution.trace, {"primary"}, {recorder.spans()});
  }
  std::vector<double> sorted = run_ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];

  if (!o.dump_outputs.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.dump_outputs, ec);
    if (ec)
      throw Error(
          fmt::format("{}: cannot create the directory ({})", o.dump_outputs, ec.message()));
    for (const auto& out : model->outputs()) {
      io::write_npy(std::filesystem::path(o.dump_outputs) / (file_name_for(out.name) + ".npy"),
                    outputs.at(out.name));
    }
  }

  if (o.json) {
    nlohmann::json outs = nlohmann::json::array();
    for (const auto& out : model->outputs()) {
      const Tensor& t = outputs.at(out.name);
      nlohmann::json j = {{"name", out.name}, {"shape", t.shape()}};
      const auto top = top_k(t, 5);
      if (!top.empty()) {
        j["top5"] = top;
        std::vector<float> vals;
        for (std::int64_t k : top) vals.push_back(t.f32()[k]);
        j["top5_values"] = vals;
      }
      outs.push_back(std::move(j));
    }
    nlohmann::json j = {{"model", o.model}, {"outputs", outs},      {"load_ms", load_ms},
                        {"run_ms", median}, {"run_ms_all", run_ms}, {"threads", threads}};
    if (distributed) {
      j["strategy"] = distributed->strategy;
      j["devices"] = distributed->devices;
      j["bytes_sent"] = distributed->bytes_sent;
      j["compute_ms"] = distributed->compute_ms;
      j["weight_bytes"] = distributed->weight_bytes;
      if (!distributed->exposed_comm_ms.empty())
        j["exposed_comm_ms"] = distributed->exposed_comm_ms;
      j["predicted_ms"] = distributed->predicted_ms;
      if (o.distribution.profile_layers) j["profile_ms"] = distributed->profile_ms;
      if (o.distribution.calibrate_runs > 0) {
        const RowSpeedCalibration& c = distributed->calibration;
        j["calibration"] = {{"speed_factors", c.factors},
                            {"predicted_cpu_ms", scaled(c.predicted_s, 1e3)},
                            {"measured_cpu_ms", scaled(c.measured_s, 1e3)}};
      }
    }
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  for (const auto& out : model->outputs()) {
    const Tensor& t = outputs.at(out.name);
    const auto top = top_k(t, 5);
    std::printf("%s %s%s\n", out.name.c_str(), shape_str(t.shape()).c_str(),
                top.empty() ? "" : fmt::format(" top5 {}", fmt::join(top, ",")).c_str());
  }
  std::fprintf(stderr, "%s: load %.1f ms, run %.2f ms (median of %d), %d threads\n",
               o.model.c_str(), load_ms, median, o.repeat, threads);
  if (distributed) {
    std::fprintf(stderr, "%s on %zu devices (predicted %.2f ms); bytes sent: %s\n",
                 distributed->strategy.c_str(), distributed->devices.size(),
                 distributed->predicted_ms,
                 fmt::format("{}", fmt::join(distributed->bytes_sent, ", ")).c_str());
  }
}

void add_info_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("info", "Describe an ONNX model: inputs, outputs, ops, parameters");
  auto model = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("model", *model, "ONNX model file")->required();
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->callback([model, json] {
    const auto m = onnx_import::OnnxModel::load(*model);
    std::map<std::string, int> fused_ops;
    for (const Op& op : m.graph().ops()) ++fused_ops[std::string(op_name(op.kind))];
    if (*json) {
      nlohmann::json ins = nlohmann::json::array(), outs = nlohmann::json::array();
      for (const auto& i : m.inputs()) ins.push_back({{"name", i.name}, {"shape", i.shape}});
      for (const auto& i : m.outputs()) outs.push_back({{"name", i.name}, {"shape", i.shape}});
      const nlohmann::json j = {{"model", *model},
                                {"opset", m.opset()},
                                {"inputs", ins},
                                {"outputs", outs},
                                {"op_counts", m.op_counts()},
                                {"graph_ops", fused_ops},
                                {"parameters", m.parameter_count()}};
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("%s: opset %lld, %lld parameters\n", model->c_str(),
                static_cast<long long>(m.opset()), static_cast<long long>(m.parameter_count()));
    for (const auto& i : m.inputs())
      std::printf("input  %s %s\n", i.name.c_str(), shape_str(i.shape).c_str());
    for (const auto& i : m.outputs())
      std::printf("output %s %s\n", i.name.c_str(), shape_str(i.shape).c_str());
    for (const auto& [type, n] : m.op_counts()) std::printf("op %s %d\n", type.c_str(), n);
    for (const auto& [kind, n] : fused_ops) std::printf("graph op %s %d\n", kind.c_str(), n);
  });
}

}  // namespace huddle::cli
