#include "io/safetensors_writer.h"

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>

namespace huddle::io {

namespace {

namespace fs = std::filesystem;

// Elements per call of a FloatFill: bounds the scratch buffer whatever the chunk size.
constexpr std::size_t kFloatBlock = std::size_t{1} << 16;

std::uint64_t stored_bytes(DType dtype, const Shape& shape) {
  for (std::int64_t d : shape) HUDDLE_CHECK(d >= 0, "negative dimension in {}", shape_str(shape));
  return static_cast<std::uint64_t>(shape_numel(shape)) * dtype_size(dtype);
}

}  // namespace

ByteFill float_fill(DType dtype, FloatFill fill) {
  HUDDLE_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16,
               "float_fill cannot store {}", dtype_name(dtype));
  auto scratch = std::make_shared<std::vector<float>>(kFloatBlock);
  return [dtype, fill = std::move(fill), scratch](std::uint64_t offset, std::span<std::byte> out) {
    const std::size_t esize = dtype_size(dtype);
    const auto first = static_cast<std::int64_t>(offset / esize);
    const std::size_t count = out.size() / esize;
    for (std::size_t done = 0; done < count; done += kFloatBlock) {
      const std::size_t n = std::min(kFloatBlock, count - done);
      const std::span<float> values(scratch->data(), n);
      fill(first + static_cast<std::int64_t>(done), values);
      std::byte* dst = out.data() + done * esize;
      if (dtype == DType::F32) {
        std::memcpy(dst, values.data(), n * sizeof(float));
        continue;
      }
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t h =
            dtype == DType::F16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
    }
  };
}

ByteFill tensor_fill(const Tensor& t, DType dtype) {
  const Tensor src = t.contiguous() ? t : t.clone();
  if (dtype == src.dtype()) {
    return [src](std::uint64_t offset, std::span<std::byte> out) {
      std::memcpy(out.data(), static_cast<const std::byte*>(src.raw()) + offset, out.size());
    };
  }
  HUDDLE_CHECK(src.dtype() == DType::F32, "cannot store a {} tensor as {}", dtype_name(src.dtype()),
               dtype_name(dtype));
  return float_fill(dtype, [src](std::int64_t first, std::span<float> out) {
    std::memcpy(out.data(), src.f32() + first, out.size_bytes());
  });
}

SafetensorsWriter::SafetensorsWriter(fs::path path, std::size_t chunk_bytes)
    : path_(std::move(path)), chunk_bytes_(std::max<std::size_t>(chunk_bytes / 8 * 8, 8)) {}

void SafetensorsWriter::add(TensorSource source) {
  HUDDLE_CHECK(!written_, "add after write of '{}'", path_.string());
  HUDDLE_CHECK(source.name != "__metadata__", "tensor name __metadata__ is reserved");
  HUDDLE_CHECK(source.fill != nullptr || shape_numel(source.shape) == 0, "tensor '{}' has no fill",
               source.name);
  const bool fresh = names_.insert(source.name).second;
  HUDDLE_CHECK(fresh, "tensor '{}' added twice to '{}'", source.name, path_.string());
  data_bytes_ += stored_bytes(source.dtype, source.shape);
  tensors_.push_back(std::move(source));
}

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

std::uint64_t SafetensorsWriter::write() {
  HUDDLE_CHECK(!written_, "second write of '{}'", path_.string());
  written_ = true;
  // Largest elements first keeps every tensor aligned without padding between tensors.
  std::stable_sort(tensors_.begin(), tensors_.end(),
                   [](const TensorSource& a, const TensorSource& b) {
                     return dtype_size(a.dtype) > dtype_size(b.dtype);
                   });

  nlohmann::json header = nlohmann::json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  std::uint64_t offset = 0;
  for (const TensorSource& t : tensors_) {
    const std::uint64_t n = stored_bytes(t.dtype, t.shape);
    header[t.name] = {
        {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  AtomicFile out(path_);
  std::byte length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<std::byte>((text.size() >> (8 * i)) & 0xff);
  out.write(length);
  out.write(std::as_bytes(std::span(text)));

  // Tensors are packed back to back through one buffer; a fill gets whole elements only.
  std::vector<std::byte> buffer(chunk_bytes_);
  std::size_t used = 0;
  for (const TensorSource& t : tensors_) {
    const std::uint64_t total = stored_bytes(t.dtype, t.shape);
    const std::size_t esize = dtype_size(t.dtype);
    for (std::uint64_t done = 0; done < total;) {
      std::size_t n =
          static_cast<std::size_t>(std::min<std::uint64_t>(total - done, buffer.size() - used));
      n = n / esize * esize;
      if (n == 0) {
        out.write(std::span(buffer.data(), used));
        used = 0;
        continue;
      }
      t.fill(done, std::span(buffer.data() + used, n));
      used += n;
      done += n;
      if (used == buffer.size()) {
        out.write(buffer);
        used = 0;
      }
    }
  }
  out.write(std::span(buffer.data(), used));
  const std::uint64_t size = out.written();
  out.commit();
  return size;
}

void write_safetensors(const fs::path& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       std::optional<DType> store_as) {
  SafetensorsWriter writer(path);
  for (const auto& [key, value] : metadata) writer.set_metadata(key, value);
  for (const auto& [name, t] : tensors) {
    const DType dtype = store_as && t.dtype() == DType::F32 ? *store_as : t.dtype();
    writer.add(name, dtype, t.shape(), tensor_fill(t, dtype));
  }
  writer.write();
}

std::vector<fs::path> write_checkpoint(const fs::path& dir, std::vector<TensorSource> tensors,
                                       std::uint64_t max_shard_bytes,
                                       const std::map<std::string, std::string>& metadata,
                                       std::size_t chunk_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create '{}': {}", dir.string(), ec.message()));

  // Greedy split in the given order: a shard closes when the next tensor would overflow it.
  std::vector<std::vector<TensorSource>> shards(1);
  std::uint64_t shard_bytes = 0;
  std::uint64_t total = 0;
  std::set<std::string> names;
  for (TensorSource& t : tensors) {
    const bool fresh = names.insert(t.name).second;
    HUDDLE_CHECK(fresh, "tensor '{}' given twice", t.name);
    const std::uint64_t n = stored_bytes(t.dtype, t.shape);
    if (!shards.back().empty() && shard_bytes + n > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shard_bytes += n;
    total += n;
    shards.back().push_back(std::move(t));
  }

  const auto write_one = [&](const fs::path& path, std::vector<TensorSource>& sources) {
    SafetensorsWriter writer(path, chunk_bytes);
    for (const auto& [key, value] : metadata) writer.set_metadata(key, value);
    for (TensorSource& t : sources) writer.add(std::move(t));
    writer.write();
  };

  std::vector<fs::path> written;
  if (shards.size() == 1) {
    fs::remove(dir / kSafetensorsIndexName, ec);
    written.push_back(dir / kSafetensorsFileName);
    write_one(written.back(), shards[0]);
    return written;
  }
  fs::remove(dir / kSafetensorsFileName, ec);
  fs::remove(dir / kSafetensorsIndexName, ec);  // until the new one is complete
  nlohmann::json weight_map = nlohmann::json::object();
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const std::string name =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    for (const TensorSource& t : shards[i]) weight_map[t.name] = name;
    written.push_back(dir / name);
    write_one(written.back(), shards[i]);
  }
  const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const std::string text = index.dump(2) + "\n";
  written.push_back(dir / kSafetensorsIndexName);
  AtomicFile out(written.back());
  out.write(std::as_bytes(std::span(text)));
  out.commit();
  return written;
}

}  // namespace huddle::io
