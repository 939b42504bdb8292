#include "io/checkpoint.h"

#include "core/quant.h"

#include "core/error.h"
#include "io/strict_json.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace huddle::io {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LoadError(fmt::format("cannot read '{}'", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw LoadError(fmt::format("error reading '{}'", path.string()));
  return std::move(text).str();
}

// A shard is named by a file name inside the model directory, never by a path: refusing '/',
// '\' and ".." keeps a hostile index from reading files elsewhere on the device.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find("..") == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// weight_map: tensor name -> shard file name, validated.
std::map<std::string, std::string> read_weight_map(const json& index, const fs::path& path) {
  const std::string origin = path.string();
  if (!index.is_object()) {
    throw LoadError(fmt::format("{}: must be a JSON object, not {}", origin, index.type_name()));
  }
  const auto it = index.find("weight_map");
  if (it == index.end()) throw LoadError(fmt::format("{}: missing \"weight_map\"", origin));
  if (!it->is_object()) {
    throw LoadError(
        fmt::format("{}: \"weight_map\" must be an object of tensor name -> shard "
                    "file, not {}",
                    origin, it->type_name()));
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [tensor, shard] : it->items()) {
    if (!shard.is_string()) {
      throw LoadError(
          fmt::format("{}: \"weight_map\" entry for tensor '{}' must be a file name, "
                      "not {}",
                      origin, tensor, shard.dump()));
    }
    std::string name = shard.get<std::string>();
    if (!is_plain_file_name(name)) {
      throw LoadError(
          fmt::format("{}: tensor '{}' names shard '{}', which is not a plain file "
                      "name in the model directory (refused)",
                      origin, tensor, name));
    }
    weight_map.emplace(tensor, std::move(name));
  }
  return weight_map;
}

std::map<std::string, std::string> read_index_metadata(const json& index, const fs::path& path) {
  std::map<std::string, std::string> metadata;
  const auto it = index.find("metadata");
  if (it == index.end() || it->is_null()) return metadata;
  if (!it->is_object()) {
    throw LoadError(
        fmt::format("{}: \"metadata\" must be an object, not {}", path.string(), it->type_name()));
  }
  for (const auto& [key, value] : it->items()) {
    metadata.emplace(key, value.is_string() ? value.get<std::string>() : value.dump());
  }
  return metadata;
}

}  // namespace

Checkpoint Checkpoint::open(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw LoadError(fmt::format("model directory '{}' {}", dir.string(),
                                fs::exists(dir, ec) ? "is not a directory" : "does not exist"));
  }
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  const fs::path single = dir / kSafetensorsFileName;
  const fs::path index_path = dir / kSafetensorsIndexName;

  if (fs::exists(single, ec)) {
    ckpt.files_.push_back(SafetensorsFile::open(single));
    const SafetensorsFile& file = ckpt.files_.back();
    for (std::size_t i = 0; i < file.entries().size(); ++i) {
      ckpt.tensors_.emplace(file.entries()[i].name, Location{0, i});
    }
    for (const UnsupportedEntry& u : file.unsupported()) ckpt.unsupported_.emplace(u.name, u.dtype);
    ckpt.metadata_ = file.metadata();
    return ckpt;
  }
  if (!fs::exists(index_path, ec)) {
    throw LoadError(fmt::format("model directory '{}' has no weights: neither {} nor {} found",
                                dir.string(), kSafetensorsFileName, kSafetensorsIndexName));
  }

  const json index = parse_strict_json(read_text(index_path), index_path.string());
  const std::map<std::string, std::string> weight_map = read_weight_map(index, index_path);
  ckpt.metadata_ = read_index_metadata(index, index_path);

  // Shard file name -> position in files_, each opened once; the first tensor needing a shard
  // is named when it is missing.
  std::map<std::string, std::size_t> opened;
  for (const auto& [tensor, shard] : weight_map) {
    auto it = opened.find(shard);
    if (it == opened.end()) {
      const fs::path shard_path = dir / shard;
      if (!fs::exists(shard_path, ec)) {
        throw LoadError(fmt::format("{}: shard '{}' (holding tensor '{}') does not exist in '{}'",
                                    index_path.string(), shard, tensor, dir.string()));
      }
      ckpt.files_.push_back(SafetensorsFile::open(shard_path));
      it = opened.emplace(shard, ckpt.files_.size() - 1).first;
    }
    const SafetensorsFile& file = ckpt.files_[it->second];
    if (const SafetensorsEntry* e = file.find(tensor)) {
      ckpt.tensors_.emplace(
          tensor, Location{it->second, static_cast<std::size_t>(e - file.entries().data())});
    } else if (const UnsupportedEntry* u = file.find_unsupported(tensor)) {
      ckpt.unsupported_.emplace(tensor, u->dtype);
    } else {
      throw LoadError(fmt::format("{}: tensor '{}' is listed in shard '{}' but {} does not hold it",
                                  index_path.string(), tensor, shard, file.path().string()));
    }
  }
  return ckpt;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, loc] : tensors_) out.push_back(name);
  return out;
}

bool Checkpoint::has(std::string_view name) const {
  return tensors_.find(name) != tensors_.end();
}

const SafetensorsFile& Checkpoint::file_of(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    const auto u = unsupported_.find(name);
    if (u != unsupported_.end()) {
      throw LoadError(
          fmt::format("model directory '{}': tensor '{}' has dtype {}, which Huddle "
                      "does not support",
                      dir_.string(), name, u->second));
    }
    throw LoadError(fmt::format("model directory '{}': no tensor named '{}'", dir_.string(), name));
  }
  return files_[it->second.file];
}

const SafetensorsEntry& Checkpoint::entry(std::string_view name) const {
  const SafetensorsFile& file = file_of(name);
  return file.entries()[tensors_.find(name)->second.entry];
}

TensorInfo Checkpoint::info(std::string_view name) const {
  const SafetensorsEntry& e = entry(name);
  return {e.dtype, e.shape, file_of(name).path(), e.offset, e.nbytes};
}

Tensor Checkpoint::view(std::string_view name) const {
  return file_of(name).view(entry(name));
}

Tensor Checkpoint::load_f32(std::string_view name) const {
  const SafetensorsFile& file = file_of(name);
  const SafetensorsEntry& e = entry(name);
  switch (e.dtype) {
    case DType::F32:
      return file.view(e);
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: {
      Tensor out = Tensor::empty(DType::F32, e.shape);
      dequantize_row(e.dtype, file.bytes(e).data(), out.f32(), out.numel());
      return out;
    }
    case DType::I32:
      break;
  }
  throw LoadError(fmt::format("{}: tensor '{}' is {}, not a floating-point type",
                              file.path().string(), name, dtype_name(e.dtype)));
}

std::uint64_t Checkpoint::total_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [name, loc] : tensors_) total += files_[loc.file].entries()[loc.entry].nbytes;
  return total;
}

}  // namespace huddle::io
