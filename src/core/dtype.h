// Element types. One table (HUDDLE_DTYPES) generates the enum, its names and its sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace huddle {

// X(enum name, safetensors name, bytes per element)
#define HUDDLE_DTYPES(X) \
  X(F32, "F32", 4)       \
  X(F16, "F16", 2)       \
  X(BF16, "BF16", 2)     \
  X(I32, "I32", 4)

enum class DType : std::uint8_t {
#define HUDDLE_DTYPE_ENUM(name, str, size) name,
  HUDDLE_DTYPES(HUDDLE_DTYPE_ENUM)
#undef HUDDLE_DTYPE_ENUM
};

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
#define HUDDLE_DTYPE_NAME(name, str, size) \
  case DType::name:                        \
    return str;
    HUDDLE_DTYPES(HUDDLE_DTYPE_NAME)
#undef HUDDLE_DTYPE_NAME
  }
  return "?";
}

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
#define HUDDLE_DTYPE_SIZE(name, str, size) \
  case DType::name:                        \
    return size;
    HUDDLE_DTYPES(HUDDLE_DTYPE_SIZE)
#undef HUDDLE_DTYPE_SIZE
  }
  return 0;
}

// Parses a safetensors dtype string ("F32", "BF16", ...); nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view name);

// Widening conversions used when a checkpoint stores half-precision weights.
float f16_to_f32(std::uint16_t h);
float bf16_to_f32(std::uint16_t h);
std::uint16_t f32_to_f16(float f);
std::uint16_t f32_to_bf16(float f);

}  // namespace huddle
