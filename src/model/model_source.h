// Where a model's description and weights come from: a Hugging Face directory (config.json +
// safetensors) or a GGUF file (metadata + tensors, model/gguf_model.h). The loader sees the same
// two things either way: config.json text and a WeightSource under Hugging Face tensor names.
#pragma once

#include "io/weight_source.h"

#include <filesystem>
#include <memory>
#include <string>

namespace huddle {

struct ModelSource {
  std::string config_text;    // config.json as read, or as built from GGUF metadata
  std::string config_origin;  // the file errors about the config name
  std::unique_ptr<io::WeightSource> tensors;
};

// A directory -> config.json + io::Checkpoint; a GGUF file (by extension or magic) -> the GGUF.
// LoadError naming the path when it is neither, or on any problem reading it.
ModelSource open_model_source(const std::filesystem::path& path);

}  // namespace huddle
