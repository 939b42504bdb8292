#include "model/synth.h"

#include "core/error.h"
#include "io/safetensors_writer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <set>

namespace huddle {
namespace {

// SplitMix64: a tiny, fast, well-mixed generator. Used per element index so that any chunk of a
// tensor can be produced independently (the writer streams chunks) with a reproducible result.
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Approximately standard normal from one 64-bit draw: sum of four 16-bit uniforms (Irwin-Hall),
// rescaled to unit variance. Good enough for random weights, and branch-free.
float normal_from(std::uint64_t bits) {
  float sum = 0.0f;
  for (int i = 0; i < 4; ++i) sum += static_cast<float>((bits >> (16 * i)) & 0xffff) / 65535.0f;
  return (sum - 2.0f) * std::sqrt(3.0f);  // variance of the sum of 4 U(0,1) is 1/3
}

bool is_norm_scale(const std::string& name) {
  return name.ends_with(".weight") &&
         (name.find("norm") != std::string::npos || name.find("ln_") != std::string::npos ||
          name.find("LayerNorm") != std::string::npos);
}

}  // namespace

ModelConfig find_preset(const Architecture& arch, const std::string& preset) {
  std::vector<std::string> names;
  for (const auto& [name, config] : arch.presets) {
    if (name == preset) return config;
    names.push_back(name);
  }
  throw UsageError(fmt::format("unknown preset '{}' for {}; presets: {}", preset, arch.name,
                               fmt::join(names, ", ")));
}

std::int64_t write_synthetic_model(const Architecture& arch, const ModelConfig& config,
                                   const std::filesystem::path& dir, const SynthOptions& options) {
  config.validate("synthetic config");
  const Graph graph = arch.build_graph(config, [&](const std::string& name) {
    return name == "lm_head.weight" && !config.tie_word_embeddings;
  });
  std::vector<io::TensorSource> sources;
  std::set<std::string> seen;
  std::int64_t parameters = 0;
  std::uint64_t tensor_index = 0;
  for (const Value& v : graph.values()) {
    if (v.kind != ValueKind::Weight || !seen.insert(v.weight.tensor).second) continue;
    const std::string& name = v.weight.tensor;
    const bool scale = is_norm_scale(name);
    const std::uint64_t stream = splitmix64(options.seed ^ splitmix64(++tensor_index));
    parameters += shape_numel(v.weight.tensor_shape);
    sources.push_back(io::TensorSource{
        arch.checkpoint_name(name), options.dtype, v.weight.tensor_shape,
        io::float_fill(options.dtype, [stream, scale](std::int64_t first, std::span<float> out) {
          for (std::size_t i = 0; i < out.size(); ++i) {
            const float n =
                0.02f * normal_from(splitmix64(stream + static_cast<std::uint64_t>(first) + i));
            out[i] = scale ? 1.0f + n : n;
          }
        })});
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot create directory: {}", dir.string(), ec.message()));
  io::write_checkpoint(dir, std::move(sources), options.max_shard_bytes);

  nlohmann::json cfg = arch.config_json(config);
  cfg["torch_dtype"] = options.dtype == DType::F32   ? "float32"
                       : options.dtype == DType::F16 ? "float16"
                                                     : "bfloat16";
  const std::filesystem::path config_path = dir / "config.json";
  std::ofstream out(config_path);
  out << cfg.dump(2) << "\n";
  if (!out) throw Error(fmt::format("{}: cannot write", config_path.string()));
  return parameters;
}

}  // namespace huddle
