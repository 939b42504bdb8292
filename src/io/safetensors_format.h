// The safetensors layout, parsed and validated from bytes; no files, no mapping.
//
// File = [u64 little-endian N][N bytes of JSON header][data buffer]. The header maps each tensor
// name to {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]} with offsets relative
// to the data buffer, plus an optional "__metadata__" object of string values. Everything here
// is untrusted input: every field is type-checked, every size computed with checked arithmetic,
// every range checked against the file, and ranges may not overlap.
#pragma once

#include "core/dtype.h"
#include "core/tensor.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::io {

// The reference implementation's limit on N; a larger header is treated as corrupt.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// A tensor Huddle can compute in (F32, F16, BF16, I32).
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::uint64_t offset = 0;  // absolute: from the start of the file, not of the data buffer
  std::uint64_t nbytes = 0;
};

// A tensor stored in a valid safetensors dtype that Huddle has no DType for (I64, F64, U8, BOOL,
// F8_E4M3, ...). It is validated like the others but cannot be viewed. Real checkpoints carry
// such buffers (bert-base's I64 `position_ids`), so they must not make the whole file unreadable.
struct UnsupportedEntry {
  std::string name;
  std::string dtype;  // as stored, e.g. "I64"
  Shape shape;
  std::uint64_t offset = 0;
  std::uint64_t nbytes = 0;
};

struct SafetensorsLayout {
  std::uint64_t header_bytes = 0;             // N
  std::uint64_t data_start = 0;               // 8 + N
  std::vector<SafetensorsEntry> entries;      // sorted by name
  std::vector<UnsupportedEntry> unsupported;  // sorted by name
  std::map<std::string, std::string> metadata;
};

// Validates a whole file's bytes (only the header is read; the data buffer is only
// bounds-checked). Throws LoadError whose message starts with `origin` (the file path) and names
// the tensor or field at fault. Gaps between tensors and trailing bytes are accepted; overlaps
// are not.
SafetensorsLayout parse_safetensors(std::span<const std::byte> file, std::string_view origin);

// Bits per element of any dtype in the safetensors specification; 0 when `name` is not one.
int safetensors_dtype_bits(std::string_view name);

}  // namespace huddle::io
