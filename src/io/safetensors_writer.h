// Streaming .safetensors writer, for checkpoints larger than memory (`huddle synth` writes
// multi-GB random-weight models) and for test fixtures.
//
// The header (names, dtypes, shapes, offsets) must precede the data, so tensors are declared
// first with a callback that produces their bytes; write() then emits the header and streams
// every tensor through one reusable buffer of `chunk_bytes`. Memory use is that buffer plus the
// header, whatever the file size. The file appears under its name only when complete.
//
// Layout matches the reference implementation: header padded with spaces to a multiple of 8
// bytes; tensors ordered by element size (largest first, otherwise in the order added) and
// packed without gaps, so every tensor is aligned to its element size.
#pragma once

#include "core/tensor.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace huddle::io {

// Produces stored bytes [offset, offset + out.size()) of one tensor. Calls for one tensor come
// in increasing offset order, cover it exactly once, and are whole elements.
using ByteFill = std::function<void(std::uint64_t offset, std::span<std::byte> out)>;
// Produces elements [first, first + out.size()) in row-major order, as floats.
using FloatFill = std::function<void(std::int64_t first, std::span<float> out)>;

// Adapts a float generator to bytes of `dtype`: F32, or F16 / BF16 rounded to nearest even.
ByteFill float_fill(DType dtype, FloatFill fill);
// The elements of `t` stored as `dtype`: t's own dtype (bytes copied), or F16 / BF16 when t is
// F32. Strided views are copied contiguous once. The fill keeps t's storage alive.
ByteFill tensor_fill(const Tensor& t, DType dtype);

struct TensorSource {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  ByteFill fill;
};

inline constexpr std::size_t kDefaultWriteChunkBytes = std::size_t{16} << 20;

class SafetensorsWriter {
 public:
  explicit SafetensorsWriter(std::filesystem::path path,
                             std::size_t chunk_bytes = kDefaultWriteChunkBytes);

  // Names must be unique and not "__metadata__"; shapes non-negative (programmer errors).
  void add(TensorSource source);
  void add(std::string name, DType dtype, Shape shape, ByteFill fill) {
    add({std::move(name), dtype, std::move(shape), std::move(fill)});
  }
  void set_metadata(std::string key, std::string value);

  std::uint64_t data_bytes() const { return data_bytes_; }

  // Writes `path` (through `path`.tmp, renamed when complete); returns the file size. Errors
  // from the file system throw huddle::Error naming the path; an exception from a fill leaves
  // no file behind and propagates. Call once.
  std::uint64_t write();

 private:
  std::filesystem::path path_;
  std::size_t chunk_bytes_;
  std::vector<TensorSource> tensors_;
  std::set<std::string> names_;
  std::map<std::string, std::string> metadata_;
  std::uint64_t data_bytes_ = 0;
  bool written_ = false;
};

// Convenience for tests and tools: writes `tensors` (any dtype; F32 ones converted to `store_as`
// when given) with `metadata` as "__metadata__".
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       std::optional<DType> store_as = std::nullopt);

// Writes a Hugging Face checkpoint into `dir` (created if missing): a single model.safetensors
// when the data fits in `max_shard_bytes`, otherwise shards model-0000i-of-0000n.safetensors of
// at most `max_shard_bytes` each (a larger tensor gets a shard of its own), in the given order,
// plus model.safetensors.index.json (written last, {"metadata": {"total_size": bytes},
// "weight_map": {...}}). A stale file of the other layout is removed, since it would shadow or
// contradict the new one. Returns the paths written, index last.
std::vector<std::filesystem::path> write_checkpoint(
    const std::filesystem::path& dir, std::vector<TensorSource> tensors,
    std::uint64_t max_shard_bytes, const std::map<std::string, std::string>& metadata = {},
    std::size_t chunk_bytes = kDefaultWriteChunkBytes);

}  // namespace huddle::io
