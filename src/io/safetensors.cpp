#include "io/safetensors.h"

#include "core/error.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace huddle::io {

namespace {

template <typename Entry>
const Entry* find_sorted(const std::vector<Entry>& entries, std::string_view name) {
  const auto it = std::lower_bound(entries.begin(), entries.end(), name,
                                   [](const Entry& e, std::string_view n) { return e.name < n; });
  return it != entries.end() && it->name == name ? &*it : nullptr;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  std::shared_ptr<const MappedFile> mapping = MappedFile::open(path);
  SafetensorsLayout layout = parse_safetensors(mapping->bytes(), path.string());
  return SafetensorsFile(std::move(mapping), std::move(layout));
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  return find_sorted(layout_.entries, name);
}

const UnsupportedEntry* SafetensorsFile::find_unsupported(std::string_view name) const {
  return find_sorted(layout_.unsupported, name);
}

std::span<const std::byte> SafetensorsFile::bytes(const SafetensorsEntry& entry) const {
  HUDDLE_CHECK(entry.offset + entry.nbytes <= mapping_->size(), "entry '{}' outside '{}'",
               entry.name, path().string());
  return mapping_->bytes().subspan(static_cast<std::size_t>(entry.offset),
                                   static_cast<std::size_t>(entry.nbytes));
}

Tensor SafetensorsFile::view(std::string_view name) const {
  if (const SafetensorsEntry* e = find(name)) return view(*e);
  if (const UnsupportedEntry* u = find_unsupported(name)) {
    throw LoadError(fmt::format("{}: tensor '{}' has dtype {}, which Huddle does not support",
                                path().string(), name, u->dtype));
  }
  throw LoadError(fmt::format("{}: no tensor named '{}'", path().string(), name));
}

Tensor SafetensorsFile::view(const SafetensorsEntry& entry) const {
  const std::span<const std::byte> b = bytes(entry);
  const auto address = reinterpret_cast<std::uintptr_t>(b.data());
  if (address % dtype_size(entry.dtype) == 0) {
    // Tensor has no const view type; the mapping is PROT_READ, so writes fault rather than
    // corrupt the file.
    return Tensor::borrow(entry.dtype, entry.shape, const_cast<std::byte*>(b.data()), mapping_);
  }
  Tensor copy = Tensor::empty(entry.dtype, entry.shape);
  if (!b.empty()) std::memcpy(copy.raw(), b.data(), b.size());
  return copy;
}

}  // namespace huddle::io
