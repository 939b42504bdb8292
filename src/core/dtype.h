// Element types. One table (HUDDLE_DTYPES) generates the enum, its names and its sizes.
//
// Scalar types store one element in `block_bytes`. Block-quantised types (Q8_0, Q4_0, k-quants)
// store `block_elems` consecutive elements of a row in one `block_bytes` block, bit-compatible with
// GGUF/ggml's blocks of the same name (src/core/quant.h, src/core/kquant.h); a row of such a
// tensor must hold a whole number of blocks, and views may only cut a row at block boundaries.
// Q5_0, Q5_1 and the k-quants Q4_K, Q5_K and Q6_K are read from GGUF files, never written: Huddle
// has no quantiser for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace huddle {

// X(enum name, name (safetensors' for the scalar types), elements per block, bytes per block)
#define HUDDLE_DTYPES(X)    \
  X(F32, "F32", 1, 4)       \
  X(F16, "F16", 1, 2)       \
  X(BF16, "BF16", 1, 2)     \
  X(I32, "I32", 1, 4)       \
  X(Q8_0, "Q8_0", 32, 34)   \
  X(Q4_0, "Q4_0", 32, 18)   \
  X(Q5_0, "Q5_0", 32, 22)   \
  X(Q5_1, "Q5_1", 32, 24)   \
  X(Q4_K, "Q4_K", 256, 144) \
  X(Q5_K, "Q5_K", 256, 176) \
  X(Q6_K, "Q6_K", 256, 210)

enum class DType : std::uint8_t {
#define HUDDLE_DTYPE_ENUM(name, str, elems, bytes) name,
  HUDDLE_DTYPES(HUDDLE_DTYPE_ENUM)
#undef HUDDLE_DTYPE_ENUM
};

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
#define HUDDLE_DTYPE_NAME(name, str, elems, bytes) \
  case DType::name:                                \
    return str;
    HUDDLE_DTYPES(HUDDLE_DTYPE_NAME)
#undef HUDDLE_DTYPE_NAME
  }
  return "?";
}

// Elements per block: 1 for scalar types.
constexpr std::int64_t dtype_block_elems(DType t) {
  switch (t) {
#define HUDDLE_DTYPE_ELEMS(name, str, elems, bytes) \
  case DType::name:                                 \
    return elems;
    HUDDLE_DTYPES(HUDDLE_DTYPE_ELEMS)
#undef HUDDLE_DTYPE_ELEMS
  }
  return 1;
}

// Bytes per block: the element size for scalar types.
constexpr std::size_t dtype_block_bytes(DType t) {
  switch (t) {
#define HUDDLE_DTYPE_BYTES(name, str, elems, bytes) \
  case DType::name:                                 \
    return bytes;
    HUDDLE_DTYPES(HUDDLE_DTYPE_BYTES)
#undef HUDDLE_DTYPE_BYTES
  }
  return 0;
}

constexpr bool dtype_is_quantized(DType t) {
  return dtype_block_elems(t) > 1;
}

// Bytes per element of a scalar type. Block-quantised types have no per-element size: code that
// may see them uses dtype_bytes(t, n) instead (this returns 0 for them).
constexpr std::size_t dtype_size(DType t) {
  return dtype_is_quantized(t) ? 0 : dtype_block_bytes(t);
}

// Bytes of n consecutive elements of one row; for block types n must be a multiple of the block
// (callers check with dtype_fits first where n comes from a file or a peer).
constexpr std::size_t dtype_bytes(DType t, std::int64_t n) {
  return static_cast<std::size_t>(n / dtype_block_elems(t)) * dtype_block_bytes(t);
}
constexpr bool dtype_fits(DType t, std::int64_t n) {
  return n % dtype_block_elems(t) == 0;
}

// Parses a safetensors dtype string ("F32", "BF16", ...); nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view name);

// Widening conversions used when a checkpoint stores half-precision weights.
float f16_to_f32(std::uint16_t h);
float bf16_to_f32(std::uint16_t h);
std::uint16_t f32_to_f16(float f);
std::uint16_t f32_to_bf16(float f);

}  // namespace huddle
