// A memory-mapped, validated GGUF file (layout: io/gguf_format.h).
//
//   auto f = io::GgufFile::open("model.gguf");
//   std::string arch = f.string("general.architecture");
//   Tensor w = f.view("blk.0.attn_q.weight");  // borrows the mapping, stored dtype, [rows, cols]
//
// Views keep the mapping alive, so they may outlive the GgufFile; they are read-only memory.
// Metadata getters throw LoadError naming the file and the key when it is absent (for the
// required forms) or of the wrong type.
#pragma once

#include "core/tensor.h"
#include "io/gguf_format.h"
#include "io/mapped_file.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::io {

// Whether `path` names a GGUF file: it ends in ".gguf", or it is a regular file starting with the
// GGUF magic.
bool is_gguf_path(const std::filesystem::path& path);

class GgufFile {
 public:
  // Maps and validates the header; throws LoadError naming the file (and the key or tensor).
  static GgufFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return mapping_->path(); }
  const GgufLayout& layout() const { return layout_; }
  const std::vector<GgufTensorInfo>& tensors() const { return layout_.tensors; }

  // Null when absent.
  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;

  std::string string(std::string_view key) const;
  std::optional<std::string> string_or_null(std::string_view key) const;
  // Any integer type whose value fits an int64.
  std::optional<std::int64_t> integer(std::string_view key) const;
  // f32/f64, or an integer.
  std::optional<double> number(std::string_view key) const;
  std::optional<bool> boolean(std::string_view key) const;
  // Arrays; an absent key gives an empty vector.
  std::vector<std::string> string_array(std::string_view key) const;
  std::vector<double> number_array(std::string_view key) const;
  std::vector<std::int64_t> integer_array(std::string_view key) const;

  // The tensor in its stored dtype, shape outermost first. Zero-copy when aligned to its element
  // (or block scale) size, else an owned copy. LoadError naming the tensor when absent.
  Tensor view(std::string_view name) const;
  std::span<const std::byte> bytes(const GgufTensorInfo& t) const;

 private:
  GgufFile(std::shared_ptr<const MappedFile> mapping, GgufLayout layout)
      : mapping_(std::move(mapping)), layout_(std::move(layout)) {}

  [[noreturn]] void wrong_type(std::string_view key, const GgufValue& v,
                               std::string_view wanted) const;

  std::shared_ptr<const MappedFile> mapping_;
  GgufLayout layout_;
};

}  // namespace huddle::io
