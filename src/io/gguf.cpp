#include "io/gguf.h"

#include "core/error.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <vector>

namespace huddle::io {

bool is_gguf_path(const std::filesystem::path& path) {
  if (path.extension() == ".gguf") return true;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  std::byte magic[4] = {};
  if (!in.read(reinterpret_cast<char*>(magic), 4)) return false;
  return has_gguf_magic(magic);
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  std::shared_ptr<const MappedFile> mapping = MappedFile::open(path);
  GgufLayout layout = parse_gguf(mapping->bytes(), path.string());
  return GgufFile(std::move(mapping), std::move(layout));
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = layout_.metadata_index.find(key);
  return it == layout_.metadata_index.end() ? nullptr : &layout_.metadata[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = layout_.tensor_index.find(name);
  return it == layout_.tensor_index.end() ? nullptr : &layout_.tensors[it->second];
}

void GgufFile::wrong_type(std::string_view key, const GgufValue& v, std::string_view wanted) const {
  throw LoadError(fmt::format(
      "{}: metadata '{}' is {}{}, not {}", path().string(), key, gguf_type_name(v.type),
      v.type == GgufType::Array ? fmt::format(" of {}", gguf_type_name(v.elem_type)) : "", wanted));
}

std::string GgufFile::string(std::string_view key) const {
  std::optional<std::string> s = string_or_null(key);
  if (!s) throw LoadError(fmt::format("{}: metadata '{}' is missing", path().string(), key));
  return *s;
}

std::optional<std::string> GgufFile::string_or_null(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::String) wrong_type(key, *v, "a string");
  return v->s;
}

std::optional<std::int64_t> GgufFile::integer(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  const std::optional<std::int64_t> i = v->as_int();
  if (!i) wrong_type(key, *v, "an integer that fits 63 bits");
  return i;
}

std::optional<double> GgufFile::number(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type == GgufType::F32 || v->type == GgufType::F64) return v->f;
  if (const std::optional<std::int64_t> i = v->as_int()) return static_cast<double>(*i);
  wrong_type(key, *v, "a number");
}

std::optional<bool> GgufFile::boolean(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::Bool) wrong_type(key, *v, "a bool");
  return v->u != 0;
}

std::vector<std::string> GgufFile::string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return {};
  if (v->type != GgufType::Array || v->elem_type != GgufType::String) {
    wrong_type(key, *v, "an array of strings");
  }
  std::vector<std::string> out;
  out.reserve(v->items.size());
  for (const GgufValue& item : v->items) out.push_back(item.s);
  return out;
}

std::vector<double> GgufFile::number_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return {};
  if (v->type != GgufType::Array ||
      !(v->elem_type == GgufType::F32 || v->elem_type == GgufType::F64 || v->items.empty() ||
        v->items.front().as_int())) {
    wrong_type(key, *v, "an array of numbers");
  }
  std::vector<double> out;
  out.reserve(v->items.size());
  for (const GgufValue& item : v->items) {
    if (item.type == GgufType::F32 || item.type == GgufType::F64) {
      out.push_back(item.f);
    } else if (const auto i = item.as_int()) {
      out.push_back(static_cast<double>(*i));
    } else {
      wrong_type(key, *v, "an array of numbers");
    }
  }
  return out;
}

std::vector<std::int64_t> GgufFile::integer_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return {};
  if (v->type != GgufType::Array) wrong_type(key, *v, "an array of integers");
  std::vector<std::int64_t> out;
  out.reserve(v->items.size());
  for (const GgufValue& item : v->items) {
    const std::optional<std::int64_t> i = item.as_int();
    if (!i) wrong_type(key, *v, "an array of integers");
    out.push_back(*i);
  }
  return out;
}

std::span<const std::byte> GgufFile::bytes(const GgufTensorInfo& t) const {
  return mapping_->bytes().subspan(static_cast<std::size_t>(t.offset),
                                   static_cast<std::size_t>(t.nbytes));
}

Tensor GgufFile::view(std::string_view name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (t == nullptr) throw LoadError(fmt::format("{}: no tensor named '{}'", path().string(), name));
  const std::span<const std::byte> b = bytes(*t);
  // Blocks of every block type hold f16 scales at even offsets of an even-sized block; scalar
  // types need their element size.
  const std::size_t align = dtype_is_quantized(t->dtype) ? 2 : dtype_size(t->dtype);
  if (reinterpret_cast<std::uintptr_t>(b.data()) % align == 0) {
    // Tensor has no const view type; the mapping is PROT_READ, so writes fault.
    return Tensor::borrow(t->dtype, t->shape, const_cast<std::byte*>(b.data()), mapping_);
  }
  Tensor copy = Tensor::empty(t->dtype, t->shape);
  if (!b.empty()) std::memcpy(copy.raw(), b.data(), b.size());
  return copy;
}

}  // namespace huddle::io
