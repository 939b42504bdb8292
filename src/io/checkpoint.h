// The weights of a Hugging Face model directory, memory-mapped.
//
// A directory holds either `model.safetensors`, or `model.safetensors.index.json`
// ({"metadata": {...}, "weight_map": {tensor name: shard file name}}) plus the shards it names.
// When both exist the single file wins, as in transformers. Every shard is mapped once and
// validated at open; tensors are then looked up by their stored names. This layer knows nothing
// about architectures: renaming (e.g. GPT-2's "h.0." vs "transformer.h.0.") belongs to model/.
#pragma once

#include "core/tensor.h"
#include "io/safetensors.h"
#include "io/weight_source.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::io {

inline constexpr const char* kSafetensorsFileName = "model.safetensors";
inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";

class Checkpoint final : public WeightSource {
 public:
  // Throws LoadError naming the directory, file, shard or tensor at fault (see the tests in
  // tests/io/checkpoint_test.cpp for every case).
  static Checkpoint open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  std::string origin() const override { return dir_.string(); }
  // Files mapped, in the order opened (one for a single-file checkpoint).
  const std::vector<SafetensorsFile>& files() const { return files_; }

  // Names of the tensors Huddle can load, sorted. Tensors in unsupported dtypes (I64 buffers,
  // FP8, ...) are left out; loading one gives an error naming its dtype.
  std::vector<std::string> names() const override;
  bool has(std::string_view name) const;
  // Throws LoadError naming the tensor and the directory when absent.
  TensorInfo info(std::string_view name) const override;

  // Stored dtype and shape; zero-copy unless unaligned (see SafetensorsFile::view).
  Tensor view(std::string_view name) const override;
  // F32 data: a zero-copy view of the mapping when stored as aligned F32, otherwise an owned
  // copy widened from F16 / BF16. Integer tensors are refused with a LoadError.
  Tensor load_f32(std::string_view name) const override;

  // Sum of the stored byte sizes of the tensors in names().
  std::uint64_t total_bytes() const;
  // The index's "metadata" object (empty for a single file), or the file's "__metadata__".
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Location {
    std::size_t file = 0;   // index into files_
    std::size_t entry = 0;  // index into files_[file].entries()
  };

  const SafetensorsEntry& entry(std::string_view name) const;
  const SafetensorsFile& file_of(std::string_view name) const;

  std::filesystem::path dir_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, Location, std::less<>> tensors_;
  std::map<std::string, std::string, std::less<>> unsupported_;  // name -> stored dtype
  std::map<std::string, std::string> metadata_;
};

}  // namespace huddle::io
