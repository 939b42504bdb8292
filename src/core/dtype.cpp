#include "core/dtype.h"

#include <bit>
#include <cmath>

namespace huddle {

std::optional<DType> parse_dtype(std::string_view name) {
#define HUDDLE_DTYPE_PARSE(e, str, elems, bytes) \
  if (name == str) return DType::e;
  HUDDLE_DTYPES(HUDDLE_DTYPE_PARSE)
#undef HUDDLE_DTYPE_PARSE
  return std::nullopt;
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: value = mant * 2^-24.
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / nan
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

float bf16_to_f32(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // nan
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<std::uint16_t>(u >> 16);
}

std::uint16_t f32_to_f16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00u;
  if (a >= 65520.0f) return sign | 0x7c00u;  // overflow to inf
  if (a < 6.103515625e-05f) {                // subnormal: round(a * 2^24)
    return sign | static_cast<std::uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  std::uint32_t bits = std::bit_cast<std::uint32_t>(a);
  bits += 0xfffu + ((bits >> 13) & 1u);  // round mantissa to 10 bits, nearest even
  const std::uint32_t exp = (bits >> 23) - 112;
  return sign | static_cast<std::uint16_t>((exp << 10) | ((bits >> 13) & 0x3ffu));
}

}  // namespace huddle
