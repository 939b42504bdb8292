#include "io/gguf_format.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace huddle::io {

namespace {

// Reads little-endian fields from the front of the file; every read is bounds-checked.
class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, std::string_view origin)
      : bytes_(bytes), origin_(origin) {}

  std::size_t pos() const { return pos_; }
  std::size_t left() const { return bytes_.size() - pos_; }
  std::string_view origin() const { return origin_; }

  void need(std::uint64_t n, std::string_view what) const {
    if (n > left()) {
      throw LoadError(
          fmt::format("{}: {} runs past the end of the file (at byte {}, needs {} bytes, {} left)",
                      origin_, what, pos_, n, left()));
    }
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(std::string_view what) {
    const auto n = read<std::uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }

 private:
  std::span<const std::byte> bytes_;
  std::string_view origin_;
  std::size_t pos_ = 0;
};

bool known_type(std::uint32_t id) {
  switch (id) {
#define HUDDLE_GGUF_TYPE_CASE(name, tid, str) case tid:
    HUDDLE_GGUF_TYPES(HUDDLE_GGUF_TYPE_CASE)
#undef HUDDLE_GGUF_TYPE_CASE
    return true;
    default:
      return false;
  }
}

// Fewest bytes one value of `type` occupies: bounds an array's count by the bytes left.
std::uint64_t min_value_bytes(GgufType type) {
  switch (type) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::Bool:
      return 1;
    case GgufType::U16:
    case GgufType::I16:
      return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32:
      return 4;
    case GgufType::String:
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64:
      return 8;
    case GgufType::Array:
      return 12;
  }
  return 1;
}

GgufValue read_value(Cursor& c, GgufType type, int depth, const std::string& what) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufType::U8:
      v.u = c.read<std::uint8_t>(what);
      break;
    case GgufType::I8:
      v.i = c.read<std::int8_t>(what);
      break;
    case GgufType::U16:
      v.u = c.read<std::uint16_t>(what);
      break;
    case GgufType::I16:
      v.i = c.read<std::int16_t>(what);
      break;
    case GgufType::U32:
      v.u = c.read<std::uint32_t>(what);
      break;
    case GgufType::I32:
      v.i = c.read<std::int32_t>(what);
      break;
    case GgufType::U64:
      v.u = c.read<std::uint64_t>(what);
      break;
    case GgufType::I64:
      v.i = c.read<std::int64_t>(what);
      break;
    case GgufType::F32:
      v.f = c.read<float>(what);
      break;
    case GgufType::F64:
      v.f = c.read<double>(what);
      break;
    case GgufType::Bool: {
      const auto b = c.read<std::uint8_t>(what);
      if (b > 1) {
        throw LoadError(fmt::format("{}: {} is a bool stored as {}, not 0 or 1", c.origin(), what,
                                    static_cast<int>(b)));
      }
      v.u = b;
      break;
    }
    case GgufType::String:
      v.s = c.read_string(what);
      break;
    case GgufType::Array: {
      if (depth >= kGgufMaxArrayDepth) {
        throw LoadError(fmt::format("{}: {} nests arrays deeper than {} levels (refused)",
                                    c.origin(), what, kGgufMaxArrayDepth));
      }
      const auto elem = c.read<std::uint32_t>(what);
      if (!known_type(elem)) {
        throw LoadError(
            fmt::format("{}: {} is an array of unknown value type {}", c.origin(), what, elem));
      }
      v.elem_type = static_cast<GgufType>(elem);
      const auto count = c.read<std::uint64_t>(what);
      if (count > c.left() / min_value_bytes(v.elem_type)) {
        throw LoadError(fmt::format(
            "{}: {} claims {} {} items; they would run past the end of the file ({} bytes left)",
            c.origin(), what, count, gguf_type_name(v.elem_type), c.left()));
      }
      v.items.reserve(static_cast<std::size_t>(count));
      for (std::uint64_t k = 0; k < count; ++k) {
        v.items.push_back(read_value(c, v.elem_type, depth + 1, what));
      }
      break;
    }
  }
  return v;
}

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view origin,
                          std::string_view what) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw LoadError(fmt::format("{}: {} overflows 64 bits", origin, what));
  }
  return r;
}

GgufTensorInfo read_tensor_info(Cursor& c, std::size_t index) {
  GgufTensorInfo t;
  t.name = c.read_string(fmt::format("the name of tensor #{}", index));
  const std::string what = fmt::format("tensor '{}'", t.name);
  const auto n_dims = c.read<std::uint32_t>(what);
  if (n_dims < 1 || n_dims > 4) {
    throw LoadError(
        fmt::format("{}: {} has {} dimensions (GGUF allows 1 to 4)", c.origin(), what, n_dims));
  }
  std::vector<std::int64_t> ne(n_dims);
  std::uint64_t numel = 1;
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    const auto n = c.read<std::uint64_t>(what);
    if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw LoadError(
          fmt::format("{}: {} dimension {} is {}, not a valid size", c.origin(), what, d, n));
    }
    ne[d] = static_cast<std::int64_t>(n);
    numel = checked_mul(numel, n, c.origin(), what + "'s element count");
  }
  const auto type = c.read<std::uint32_t>(what);
  const std::optional<DType> dtype = ggml_dtype(type);
  if (!dtype) {
    const std::optional<std::string_view> name = ggml_type_name(type);
    if (name) {
      throw LoadError(
          fmt::format("{}: {} has type {}, which Huddle does not read", c.origin(), what, *name));
    }
    throw LoadError(fmt::format("{}: {} has unknown type id {}", c.origin(), what, type));
  }
  t.dtype = *dtype;
  const std::int64_t block = dtype_block_elems(t.dtype);
  const std::uint64_t block_bytes = dtype_block_bytes(t.dtype);
  if (ne[0] % block != 0) {
    throw LoadError(fmt::format("{}: {} is {} with rows of {} elements, not whole blocks of {}",
                                c.origin(), what, dtype_name(t.dtype), ne[0], block));
  }
  t.nbytes = checked_mul(numel / static_cast<std::uint64_t>(block), block_bytes, c.origin(),
                         what + "'s byte size");
  t.offset = c.read<std::uint64_t>(what);  // relative until the data section is known
  t.shape.assign(ne.rbegin(), ne.rend());
  return t;
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
#define HUDDLE_GGUF_TYPE_NAME(name, id, str) \
  case GgufType::name:                       \
    return str;
    HUDDLE_GGUF_TYPES(HUDDLE_GGUF_TYPE_NAME)
#undef HUDDLE_GGUF_TYPE_NAME
  }
  return "?";
}

GgufValue GgufValue::u32(std::uint32_t v) {
  GgufValue r;
  r.type = GgufType::U32;
  r.u = v;
  return r;
}
GgufValue GgufValue::i32(std::int32_t v) {
  GgufValue r;
  r.type = GgufType::I32;
  r.i = v;
  return r;
}
GgufValue GgufValue::u64(std::uint64_t v) {
  GgufValue r;
  r.type = GgufType::U64;
  r.u = v;
  return r;
}
GgufValue GgufValue::f32(float v) {
  GgufValue r;
  r.type = GgufType::F32;
  r.f = v;
  return r;
}
GgufValue GgufValue::boolean(bool v) {
  GgufValue r;
  r.type = GgufType::Bool;
  r.u = v ? 1 : 0;
  return r;
}
GgufValue GgufValue::string(std::string v) {
  GgufValue r;
  r.type = GgufType::String;
  r.s = std::move(v);
  return r;
}
GgufValue GgufValue::array(GgufType elem_type, std::vector<GgufValue> items) {
  GgufValue r;
  r.type = GgufType::Array;
  r.elem_type = elem_type;
  r.items = std::move(items);
  return r;
}
GgufValue GgufValue::string_array(const std::vector<std::string>& v) {
  std::vector<GgufValue> items;
  items.reserve(v.size());
  for (const std::string& s : v) items.push_back(string(s));
  return array(GgufType::String, std::move(items));
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::U16:
    case GgufType::I16:
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::U64:
    case GgufType::I64:
      return true;
    default:
      return false;
  }
}

std::optional<std::int64_t> GgufValue::as_int() const {
  switch (type) {
    case GgufType::I8:
    case GgufType::I16:
    case GgufType::I32:
    case GgufType::I64:
      return i;
    case GgufType::U8:
    case GgufType::U16:
    case GgufType::U32:
    case GgufType::U64:
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return std::nullopt;
      }
      return static_cast<std::int64_t>(u);
    default:
      return std::nullopt;
  }
}

std::optional<std::string_view> ggml_type_name(std::uint32_t id) {
  switch (id) {
#define HUDDLE_GGML_TYPE_NAME(name, tid) \
  case tid:                              \
    return #name;
    HUDDLE_GGML_TYPES(HUDDLE_GGML_TYPE_NAME)
#undef HUDDLE_GGML_TYPE_NAME
    default:
      return std::nullopt;
  }
}

std::optional<DType> ggml_dtype(std::uint32_t id) {
  switch (id) {
    case 0:
      return DType::F32;
    case 1:
      return DType::F16;
    case 2:
      return DType::Q4_0;
    case 6:
      return DType::Q5_0;
    case 7:
      return DType::Q5_1;
    case 8:
      return DType::Q8_0;
    case 12:
      return DType::Q4_K;
    case 13:
      return DType::Q5_K;
    case 14:
      return DType::Q6_K;
    case 30:
      return DType::BF16;
    default:
      return std::nullopt;
  }
}

std::optional<std::uint32_t> ggml_type_id(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q5_0:
      return 6;
    case DType::Q5_1:
      return 7;
    case DType::Q8_0:
      return 8;
    case DType::Q4_K:
      return 12;
    case DType::Q5_K:
      return 13;
    case DType::Q6_K:
      return 14;
    case DType::BF16:
      return 30;
    case DType::I32:
      break;
  }
  return std::nullopt;
}

bool has_gguf_magic(std::span<const std::byte> bytes) {
  if (bytes.size() < 4) return false;
  std::uint32_t magic;
  std::memcpy(&magic, bytes.data(), 4);
  return magic == kGgufMagic;
}

GgufLayout parse_gguf(std::span<const std::byte> file, std::string_view origin) {
  Cursor c(file, origin);
  GgufLayout layout;
  if (!has_gguf_magic(file)) {
    throw LoadError(
        fmt::format("{}: not a GGUF file (the first 4 bytes are not \"GGUF\")", origin));
  }
  c.read<std::uint32_t>("the magic");
  layout.version = c.read<std::uint32_t>("the version");
  if (layout.version != 2 && layout.version != 3) {
    throw LoadError(fmt::format("{}: GGUF version {} is not supported (Huddle reads 2 and 3)",
                                origin, layout.version));
  }
  const auto tensor_count = c.read<std::uint64_t>("the tensor count");
  const auto kv_count = c.read<std::uint64_t>("the metadata count");
  // A key-value pair takes at least 12 bytes (key length, value type), a tensor info at least 32
  // (name length, n_dims, one dimension, type, offset).
  if (kv_count > c.left() / 12) {
    throw LoadError(
        fmt::format("{}: the header claims {} metadata entries; they would run past the end "
                    "of the file ({} bytes left)",
                    origin, kv_count, c.left()));
  }
  if (tensor_count > c.left() / 32) {
    throw LoadError(fmt::format(
        "{}: the header claims {} tensors; they would run past the end of the file ({} bytes left)",
        origin, tensor_count, c.left()));
  }

  layout.metadata.reserve(static_cast<std::size_t>(kv_count));
  for (std::uint64_t k = 0; k < kv_count; ++k) {
    std::string key = c.read_string(fmt::format("the key of metadata entry #{}", k));
    const std::string what = fmt::format("metadata '{}'", key);
    const auto type = c.read<std::uint32_t>(what);
    if (!known_type(type)) {
      throw LoadError(fmt::format("{}: {} has unknown value type {}", origin, what, type));
    }
    GgufValue value = read_value(c, static_cast<GgufType>(type), 0, what);
    if (!layout.metadata_index.emplace(key, layout.metadata.size()).second) {
      throw LoadError(fmt::format("{}: metadata key '{}' appears twice", origin, key));
    }
    layout.metadata.emplace_back(std::move(key), std::move(value));
  }

  if (const auto it = layout.metadata_index.find("general.alignment");
      it != layout.metadata_index.end()) {
    const GgufValue& v = layout.metadata[it->second].second;
    if (v.type != GgufType::U32 || v.u == 0 || (v.u & (v.u - 1)) != 0) {
      throw LoadError(fmt::format(
          "{}: metadata 'general.alignment' must be a u32 power of two, not {} {}", origin,
          gguf_type_name(v.type), v.type == GgufType::U32 ? std::to_string(v.u) : ""));
    }
    layout.alignment = static_cast<std::uint32_t>(v.u);
  }

  layout.tensors.reserve(static_cast<std::size_t>(tensor_count));
  for (std::uint64_t k = 0; k < tensor_count; ++k) {
    GgufTensorInfo t = read_tensor_info(c, static_cast<std::size_t>(k));
    if (!layout.tensor_index.emplace(t.name, layout.tensors.size()).second) {
      throw LoadError(fmt::format("{}: tensor '{}' appears twice", origin, t.name));
    }
    layout.tensors.push_back(std::move(t));
  }

  const std::uint64_t a = layout.alignment;
  layout.data_start = (c.pos() + a - 1) / a * a;
  const std::uint64_t size = file.size();
  if (!layout.tensors.empty() && layout.data_start > size) {
    throw LoadError(
        fmt::format("{}: the data section (at byte {}) starts past the end of the file "
                    "({} bytes)",
                    origin, layout.data_start, size));
  }
  const std::uint64_t data_size = layout.tensors.empty() ? 0 : size - layout.data_start;
  for (GgufTensorInfo& t : layout.tensors) {
    if (t.offset % a != 0) {
      throw LoadError(
          fmt::format("{}: tensor '{}' has offset {}, not a multiple of the alignment {}", origin,
                      t.name, t.offset, a));
    }
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      throw LoadError(fmt::format(
          "{}: tensor '{}' ({} bytes at offset {} of the data section) runs past the end of the "
          "file (the data section has {} bytes)",
          origin, t.name, t.nbytes, t.offset, data_size));
    }
    t.offset += layout.data_start;
  }

  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(layout.tensors.size());
  for (const GgufTensorInfo& t : layout.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* x, const auto* y) { return x->offset < y->offset; });
  for (std::size_t k = 1; k < by_offset.size(); ++k) {
    const GgufTensorInfo& prev = *by_offset[k - 1];
    if (prev.offset + prev.nbytes > by_offset[k]->offset) {
      throw LoadError(fmt::format("{}: the data of tensors '{}' and '{}' overlap", origin,
                                  prev.name, by_offset[k]->name));
    }
  }
  return layout;
}

}  // namespace huddle::io
