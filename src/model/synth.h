// Synthetic checkpoints: random weights in Hugging Face layout at real model sizes, for
// benchmarks and memory tests (`huddle synth`). Streams to disk; memory use stays small.
#pragma once

#include "core/dtype.h"
#include "model/architecture.h"

#include <cstdint>
#include <filesystem>
#include <string>

namespace huddle {

struct SynthOptions {
  DType dtype = DType::F32;  // stored dtype: F32, F16 or BF16
  std::uint64_t seed = 1234;
  std::uint64_t max_shard_bytes = std::uint64_t{2} << 30;  // larger checkpoints are sharded
};

// Looks up a preset by name in any architecture; UsageError listing the presets if unknown.
ModelConfig find_preset(const Architecture& arch, const std::string& preset);

// Writes DIR/config.json and the weights (normal(0, 0.02); norm scales around 1). Returns the
// number of parameters written.
std::int64_t write_synthetic_model(const Architecture& arch, const ModelConfig& config,
                                   const std::filesystem::path& dir, const SynthOptions& options);

}  // namespace huddle
