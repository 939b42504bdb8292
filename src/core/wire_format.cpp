#include "core/wire_format.h"

#include "core/dtype.h"
#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace huddle {
namespace {

void encode_f16(const float* x, std::int64_t cols, std::uint16_t* out) {
  std::int64_t j = 0;
#if defined(__F16C__)
  // Compiled for a CPU with F16C (-march=native): vcvtps2ph rounds to nearest even, the bits
  // f32_to_f16 gives (tests/core/wire_format_test.cpp compares them).
  for (; j + 8 <= cols; j += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + j), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), h);
  }
#endif
  for (; j < cols; ++j) out[j] = f32_to_f16(x[j]);
}

template <bool Add>
void decode_f16(const std::uint16_t* in, std::int64_t cols, float* y) {
  std::int64_t j = 0;
#if defined(__F16C__)
  for (; j + 8 <= cols; j += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + j)));
    if constexpr (Add) v = _mm256_add_ps(_mm256_loadu_ps(y + j), v);
    _mm256_storeu_ps(y + j, v);
  }
#endif
  for (; j < cols; ++j) {
    if constexpr (Add)
      y[j] += f16_to_f32(in[j]);
    else
      y[j] = f16_to_f32(in[j]);
  }
}

void encode_int8(const float* x, std::int64_t cols, std::byte* out) {
  float max_abs = 0.0f;
  for (std::int64_t j = 0; j < cols; ++j) max_abs = std::max(max_abs, std::fabs(x[j]));
  const float scale = max_abs / 127.0f;
  const float inv = max_abs > 0.0f ? 127.0f / max_abs : 0.0f;
  std::memcpy(out, &scale, sizeof scale);
  auto* q = reinterpret_cast<std::int8_t*>(out + sizeof scale);
  for (std::int64_t j = 0; j < cols; ++j)
    q[j] = static_cast<std::int8_t>(std::nearbyint(x[j] * inv));
}

template <bool Add>
void decode_int8(const std::byte* in, std::int64_t cols, float* y) {
  float scale = 0.0f;
  std::memcpy(&scale, in, sizeof scale);
  const auto* q = reinterpret_cast<const std::int8_t*>(in + sizeof scale);
  for (std::int64_t j = 0; j < cols; ++j) {
    const float v = static_cast<float>(q[j]) * scale;
    if constexpr (Add)
      y[j] += v;
    else
      y[j] = v;
  }
}

template <bool Add>
void decode(WireFormat format, const std::byte* in, std::int64_t rows, std::int64_t cols, float* y,
            std::int64_t ld) {
  const std::size_t row_bytes = wire_row_bytes(format, cols);
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::byte* src = in + static_cast<std::size_t>(i) * row_bytes;
    float* dst = y + i * ld;
    switch (format) {
      case WireFormat::F32: {
        const auto* v = reinterpret_cast<const float*>(src);
        for (std::int64_t j = 0; j < cols; ++j) {
          if constexpr (Add)
            dst[j] += v[j];
          else
            dst[j] = v[j];
        }
        break;
      }
      case WireFormat::F16:
        decode_f16<Add>(reinterpret_cast<const std::uint16_t*>(src), cols, dst);
        break;
      case WireFormat::BF16: {
        const auto* h = reinterpret_cast<const std::uint16_t*>(src);
        for (std::int64_t j = 0; j < cols; ++j) {
          if constexpr (Add)
            dst[j] += bf16_to_f32(h[j]);
          else
            dst[j] = bf16_to_f32(h[j]);
        }
        break;
      }
      case WireFormat::Int8:
        decode_int8<Add>(src, cols, dst);
        break;
    }
  }
}

}  // namespace

std::string_view wire_format_name(WireFormat format) {
  switch (format) {
#define HUDDLE_WIRE_NAME(e, name) \
  case WireFormat::e:             \
    return name;
    HUDDLE_WIRE_FORMATS(HUDDLE_WIRE_NAME)
#undef HUDDLE_WIRE_NAME
  }
  return "?";
}

std::optional<WireFormat> parse_wire_format(std::string_view name) {
#define HUDDLE_WIRE_PARSE(e, text) \
  if (name == (text)) return WireFormat::e;
  HUDDLE_WIRE_FORMATS(HUDDLE_WIRE_PARSE)
#undef HUDDLE_WIRE_PARSE
  return std::nullopt;
}

std::string_view wire_format_names() {
  // "f32, f16, bf16, int8", from the table.
  static const std::string names = [] {
    std::string s;
#define HUDDLE_WIRE_JOIN(e, name) s += s.empty() ? name : ", " name;
    HUDDLE_WIRE_FORMATS(HUDDLE_WIRE_JOIN)
#undef HUDDLE_WIRE_JOIN
    return s;
  }();
  return names;
}

std::optional<WireFormat> parse_wire_option(std::string_view text) {
  if (text.empty()) return std::nullopt;
  const std::optional<WireFormat> wire = parse_wire_format(text);
  if (!wire)
    throw UsageError(fmt::format("--wire {}: expected one of {}", text, wire_format_names()));
  return wire;
}

std::size_t wire_row_bytes(WireFormat format, std::int64_t cols) {
  const auto n = static_cast<std::size_t>(cols);
  switch (format) {
    case WireFormat::F32:
      return 4 * n;
    case WireFormat::F16:
    case WireFormat::BF16:
      return 2 * n;
    case WireFormat::Int8:
      return sizeof(float) + n;
  }
  return 4 * n;
}

double wire_bytes_per_value(WireFormat format, std::int64_t cols) {
  return cols <= 0 ? 0.0
                   : static_cast<double>(wire_row_bytes(format, cols)) / static_cast<double>(cols);
}

void encode_rows(WireFormat format, const float* x, std::int64_t ld, std::int64_t rows,
                 std::int64_t cols, std::byte* out) {
  const std::size_t row_bytes = wire_row_bytes(format, cols);
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* src = x + i * ld;
    std::byte* dst = out + static_cast<std::size_t>(i) * row_bytes;
    switch (format) {
      case WireFormat::F32:
        std::memcpy(dst, src, row_bytes);
        break;
      case WireFormat::F16:
        encode_f16(src, cols, reinterpret_cast<std::uint16_t*>(dst));
        break;
      case WireFormat::BF16: {
        auto* h = reinterpret_cast<std::uint16_t*>(dst);
        for (std::int64_t j = 0; j < cols; ++j) h[j] = f32_to_bf16(src[j]);
        break;
      }
      case WireFormat::Int8:
        encode_int8(src, cols, dst);
        break;
    }
  }
}

void decode_rows(WireFormat format, const std::byte* in, std::int64_t rows, std::int64_t cols,
                 float* y, std::int64_t ld) {
  decode<false>(format, in, rows, cols, y, ld);
}

void add_decoded_rows(WireFormat format, const std::byte* in, std::int64_t rows, std::int64_t cols,
                      float* y, std::int64_t ld) {
  decode<true>(format, in, rows, cols, y, ld);
}

}  // namespace huddle
