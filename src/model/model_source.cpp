#include "model/model_source.h"

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "model/gguf_model.h"
#include "model/model_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace huddle {

ModelSource open_model_source(const std::filesystem::path& path) {
  if (io::is_gguf_path(path)) return open_gguf_model(path);
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    throw LoadError(
        fmt::format("{}: model directory does not exist or is not a directory (nor a GGUF file)",
                    path.string()));
  }
  ModelSource source;
  const std::filesystem::path config_path = path / "config.json";
  source.config_text = read_json_file(config_path).dump();
  source.config_origin = config_path.string();
  source.tensors = std::make_unique<io::Checkpoint>(io::Checkpoint::open(path));
  return source;
}

}  // namespace huddle
