// A memory-mapped, validated .safetensors file.
//
//   auto f = io::SafetensorsFile::open("model.safetensors");
//   for (const auto& e : f.entries()) ...        // name, DType, Shape, byte range
//   Tensor w = f.view("transformer.wte.weight");  // borrows the mapping, stored dtype
//
// Views keep the mapping alive (their keepalive is the MappedFile), so a view may outlive the
// SafetensorsFile. Views are read-only memory: do not write through them.
#pragma once

#include "core/tensor.h"
#include "io/mapped_file.h"
#include "io/safetensors_format.h"

#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::io {

class SafetensorsFile {
 public:
  // Maps and validates the whole header; throws LoadError naming the file (and the tensor).
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return mapping_->path(); }
  const std::shared_ptr<const MappedFile>& mapping() const { return mapping_; }
  const SafetensorsLayout& layout() const { return layout_; }

  // Tensors Huddle can use, sorted by name.
  const std::vector<SafetensorsEntry>& entries() const { return layout_.entries; }
  // Tensors in dtypes Huddle cannot compute in (see UnsupportedEntry), sorted by name.
  const std::vector<UnsupportedEntry>& unsupported() const { return layout_.unsupported; }
  const std::map<std::string, std::string>& metadata() const { return layout_.metadata; }

  // Null when absent or stored in an unsupported dtype.
  const SafetensorsEntry* find(std::string_view name) const;
  const UnsupportedEntry* find_unsupported(std::string_view name) const;

  // The tensor in its stored dtype and shape. Zero-copy when the bytes are aligned to the
  // element size; otherwise an owned aligned copy, because the format allows any offset and
  // unaligned float loads are undefined behaviour in C++. Throws LoadError naming the tensor
  // and the file when it is absent or in an unsupported dtype.
  Tensor view(std::string_view name) const;
  Tensor view(const SafetensorsEntry& entry) const;

  // The raw stored bytes of an entry (always zero-copy).
  std::span<const std::byte> bytes(const SafetensorsEntry& entry) const;

 private:
  SafetensorsFile(std::shared_ptr<const MappedFile> mapping, SafetensorsLayout layout)
      : mapping_(std::move(mapping)), layout_(std::move(layout)) {}

  std::shared_ptr<const MappedFile> mapping_;
  SafetensorsLayout layout_;
};

}  // namespace huddle::io
