#include "io/safetensors_format.h"

#include "core/error.h"
#include "io/strict_json.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

namespace huddle::io {

namespace {

using nlohmann::json;

// X(name, bits): every dtype of the safetensors specification (safetensors 0.5). One entry a
// line; clang-format would re-flow the list differently on every pass.
// clang-format off
#define HUDDLE_SAFETENSORS_DTYPES(X) \
  X("BOOL", 8) \
  X("U8", 8) \
  X("I8", 8) \
  X("F8_E5M2", 8) \
  X("F8_E4M3", 8) \
  X("F8_E8M0", 8) \
  X("F4", 4) \
  X("F6_E2M3", 6) \
  X("F6_E3M2", 6) \
  X("I16", 16) \
  X("U16", 16) \
  X("F16", 16) \
  X("BF16", 16) \
  X("I32", 32) \
  X("U32", 32) \
  X("F32", 32) \
  X("C64", 64) \
  X("F64", 64) \
  X("I64", 64) \
  X("U64", 64)
// clang-format on

std::uint64_t read_u64_le(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(p[i]);
  return v;
}

// One tensor's fields, checked for type but not yet against the file.
struct RawEntry {
  std::string dtype;
  Shape shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

class EntryParser {
 public:
  EntryParser(std::string_view origin, const std::string& name) : origin_(origin), name_(name) {}

  [[noreturn]] void fail(std::string_view what) const {
    throw LoadError(fmt::format("{}: tensor '{}': {}", origin_, name_, what));
  }

  const json& field(const json& entry, const char* key) const {
    const auto it = entry.find(key);
    if (it == entry.end()) fail(fmt::format("missing field \"{}\"", key));
    return *it;
  }

  // A JSON integer in [0, max]; floats, negatives and out-of-range values are rejected.
  std::uint64_t non_negative(const json& v, std::string_view what, std::uint64_t max) const {
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u <= max) return u;
      fail(fmt::format("{} {} is too large", what, u));
    }
    if (v.is_number_integer()) fail(fmt::format("{} {} is negative", what, v.get<std::int64_t>()));
    fail(fmt::format("{} must be a non-negative integer, not {}", what, v.dump()));
  }

  RawEntry parse(const json& entry) const {
    if (!entry.is_object()) fail(fmt::format("entry must be an object, not {}", entry.type_name()));
    RawEntry raw;
    const json& dtype = field(entry, "dtype");
    if (!dtype.is_string()) fail(fmt::format("\"dtype\" must be a string, not {}", dtype.dump()));
    raw.dtype = dtype.get<std::string>();

    const json& shape = field(entry, "shape");
    if (!shape.is_array()) fail(fmt::format("\"shape\" must be an array, not {}", shape.dump()));
    for (const json& d : shape) {
      raw.shape.push_back(static_cast<std::int64_t>(
          non_negative(d, "shape dimension",
                       static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))));
    }

    const json& offsets = field(entry, "data_offsets");
    if (!offsets.is_array() || offsets.size() != 2) {
      fail(fmt::format("\"data_offsets\" must be [begin, end], not {}", offsets.dump()));
    }
    raw.begin = non_negative(offsets[0], "data_offsets begin", UINT64_MAX);
    raw.end = non_negative(offsets[1], "data_offsets end", UINT64_MAX);
    if (raw.end < raw.begin) {
      fail(fmt::format("data_offsets [{}, {}] end before begin", raw.begin, raw.end));
    }
    return raw;
  }

 private:
  std::string_view origin_;
  const std::string& name_;
};

}  // namespace

int safetensors_dtype_bits(std::string_view name) {
#define HUDDLE_SAFETENSORS_BITS(str, bits) \
  if (name == str) return bits;
  HUDDLE_SAFETENSORS_DTYPES(HUDDLE_SAFETENSORS_BITS)
#undef HUDDLE_SAFETENSORS_BITS
  return 0;
}

SafetensorsLayout parse_safetensors(std::span<const std::byte> file, std::string_view origin) {
  if (file.size() < 8) {
    throw LoadError(fmt::format("{}: file is {} bytes, shorter than the 8-byte header length",
                                origin, file.size()));
  }
  SafetensorsLayout layout;
  layout.header_bytes = read_u64_le(file.data());
  if (layout.header_bytes > kMaxSafetensorsHeaderBytes) {
    throw LoadError(fmt::format("{}: header length {} exceeds the {}-byte limit (corrupt file?)",
                                origin, layout.header_bytes, kMaxSafetensorsHeaderBytes));
  }
  if (layout.header_bytes > file.size() - 8) {
    throw LoadError(fmt::format("{}: header length {} runs past the end of the {}-byte file",
                                origin, layout.header_bytes, file.size()));
  }
  layout.data_start = 8 + layout.header_bytes;
  const std::uint64_t data_size = file.size() - layout.data_start;

  const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8,
                              static_cast<std::size_t>(layout.header_bytes));
  const json header = parse_strict_json(text, fmt::format("{}: header", origin));
  if (!header.is_object()) {
    throw LoadError(
        fmt::format("{}: header must be a JSON object, not {}", origin, header.type_name()));
  }

  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) {
        throw LoadError(fmt::format("{}: \"__metadata__\" must be an object of strings, not {}",
                                    origin, value.type_name()));
      }
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) {
          throw LoadError(fmt::format("{}: \"__metadata__\" field '{}' must be a string, not {}",
                                      origin, key, v.dump()));
        }
        layout.metadata.emplace(key, v.get<std::string>());
      }
      continue;
    }
    const EntryParser parser(origin, name);
    RawEntry raw = parser.parse(value);
    const int bits = safetensors_dtype_bits(raw.dtype);
    if (bits == 0) parser.fail(fmt::format("unknown dtype \"{}\"", raw.dtype));

    std::int64_t numel = 1;
    for (std::int64_t d : raw.shape) {
      if (__builtin_mul_overflow(numel, d, &numel)) {
        parser.fail(fmt::format("shape {} overflows", shape_str(raw.shape)));
      }
    }
    std::uint64_t total_bits = 0;
    if (__builtin_mul_overflow(static_cast<std::uint64_t>(numel), static_cast<std::uint64_t>(bits),
                               &total_bits)) {
      parser.fail(fmt::format("shape {} {} overflows", shape_str(raw.shape), raw.dtype));
    }
    if (total_bits % 8 != 0) {
      parser.fail(fmt::format("shape {} {} is not a whole number of bytes", shape_str(raw.shape),
                              raw.dtype));
    }
    const std::uint64_t needed = total_bits / 8;
    if (raw.end > data_size) {
      parser.fail(fmt::format("data_offsets [{}, {}] run past the end of the {}-byte data buffer",
                              raw.begin, raw.end, data_size));
    }
    if (raw.end - raw.begin != needed) {
      parser.fail(fmt::format("shape {} {} needs {} bytes but data_offsets span {}",
                              shape_str(raw.shape), raw.dtype, needed, raw.end - raw.begin));
    }
    const std::uint64_t offset = layout.data_start + raw.begin;
    if (const std::optional<DType> dtype = parse_dtype(raw.dtype)) {
      layout.entries.push_back({name, *dtype, std::move(raw.shape), offset, needed});
    } else {
      layout.unsupported.push_back({name, raw.dtype, std::move(raw.shape), offset, needed});
    }
  }

  // Overlaps: sort the non-empty ranges by start; each must begin at or after the previous end.
  struct Range {
    std::uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Range> ranges;
  for (const auto& e : layout.entries) {
    if (e.nbytes > 0) ranges.push_back({e.offset, e.offset + e.nbytes, &e.name});
  }
  for (const auto& e : layout.unsupported) {
    if (e.nbytes > 0) ranges.push_back({e.offset, e.offset + e.nbytes, &e.name});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i - 1].end) {
      throw LoadError(fmt::format(
          "{}: tensors '{}' and '{}' overlap: data_offsets [{}, {}) and [{}, {})", origin,
          *ranges[i - 1].name, *ranges[i].name, ranges[i - 1].begin - layout.data_start,
          ranges[i - 1].end - layout.data_start, ranges[i].begin - layout.data_start,
          ranges[i].end - layout.data_start));
    }
  }

  // nlohmann's object iterates keys in sorted order, so both lists are already sorted by name.
  return layout;
}

}  // namespace huddle::io
