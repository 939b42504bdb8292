// `huddle synth`: write a random-weight checkpoint at a real model size.
#include "cli/command.h"
#include "core/error.h"
#include "model/model_config.h"
#include "model/synth.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>

namespace huddle::cli {
namespace {

struct SynthArgs {
  std::string arch;
  std::string preset;
  std::string config_file;
  std::string output;
  std::string dtype = "f32";
  std::uint64_t seed = 1234;
  double shard_gb = 2.0;
};

void synth(const SynthArgs& a) {
  const Architecture* arch = find_architecture(a.arch);
  if (arch == nullptr)
    throw UsageError(fmt::format("--arch: unknown architecture '{}' (gpt2, bert, llama)", a.arch));
  if (a.preset.empty() == a.config_file.empty())
    throw UsageError("give exactly one of --preset and --config");
  ModelConfig config;
  if (!a.preset.empty()) {
    config = find_preset(*arch, a.preset);
  } else {
    config = arch->parse_config(ConfigReader(read_json_file(a.config_file), a.config_file));
  }
  SynthOptions options;
  options.seed = a.seed;
  options.max_shard_bytes = static_cast<std::uint64_t>(a.shard_gb * 1e9);
  if (a.dtype == "f32")
    options.dtype = DType::F32;
  else if (a.dtype == "f16")
    options.dtype = DType::F16;
  else if (a.dtype == "bf16")
    options.dtype = DType::BF16;
  else
    throw UsageError(fmt::format("--dtype: '{}' is not one of f32, f16, bf16", a.dtype));

  const auto start = std::chrono::steady_clock::now();
  const std::int64_t params = write_synthetic_model(*arch, config, a.output, options);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s\n", fmt::format("wrote {} ({} {}, {:.1f}M parameters, {}) in {:.1f} s", a.output,
                                  arch->name, a.preset.empty() ? a.config_file : a.preset,
                                  static_cast<double>(params) / 1e6, a.dtype, s)
                          .c_str());
}

}  // namespace

void add_synth_command(CLI::App& app) {
  auto a = std::make_shared<SynthArgs>();
  CLI::App* cmd =
      app.add_subcommand("synth", "Write a random-weight checkpoint in Hugging Face layout");
  cmd->add_option("--arch", a->arch, "Architecture: gpt2, bert, llama")->required();
  cmd->add_option(
      "--preset", a->preset,
      "Size preset: gpt2, gpt2-medium, gpt2-large, gpt2-xl, bert-base, bert-large, llama-1b");
  cmd->add_option("--config", a->config_file, "A config.json to use instead of a preset");
  cmd->add_option("-o,--output", a->output, "Output directory")->required();
  cmd->add_option("--dtype", a->dtype, "Stored dtype: f32, f16, bf16");
  cmd->add_option("--seed", a->seed, "Random seed");
  cmd->add_option("--shard-gb", a->shard_gb, "Largest shard in GB (bigger checkpoints are sharded)")
      ->check(CLI::PositiveNumber);
  cmd->callback([a] { synth(*a); });
}

}  // namespace huddle::cli
