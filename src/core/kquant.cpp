// Written from ggml's block layouts (see kquant.h); scalar code, run once per tensor at load.
#include "core/kquant.h"

#include "core/dtype.h"
#include "core/error.h"

#include <cstring>

namespace huddle {
namespace {

constexpr std::size_t kQ4KBytes = 2 + 2 + 12 + 128;
constexpr std::size_t kQ6KBytes = 128 + 64 + 16 + 2;

std::uint16_t u16_at(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);  // little-endian, as GGUF stores it
  return v;
}

// Sub-block j's 6-bit scale and min from Q4_K's 12 packed bytes.
void q4_k_scale_min(int j, const std::uint8_t* s, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void dequantize_q4_k_block(const std::uint8_t* b, float* out) {
  const float d = f16_to_f32(u16_at(b));
  const float dmin = f16_to_f32(u16_at(b + 2));
  const std::uint8_t* scales = b + 4;
  const std::uint8_t* qs = b + 16;
  for (int pair = 0; pair < 4; ++pair) {
    for (int half = 0; half < 2; ++half) {
      int scale = 0, min = 0;
      q4_k_scale_min(2 * pair + half, scales, scale, min);
      const float step = d * static_cast<float>(scale);
      const float offset = dmin * static_cast<float>(min);
      float* y = out + 64 * pair + 32 * half;
      for (int l = 0; l < 32; ++l) {
        const int q = half == 0 ? qs[32 * pair + l] & 0x0F : qs[32 * pair + l] >> 4;
        y[l] = step * static_cast<float>(q) - offset;
      }
    }
  }
}

void dequantize_q6_k_block(const std::uint8_t* b, float* out) {
  const std::uint8_t* ql = b;
  const std::uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192);
  const float d = f16_to_f32(u16_at(b + 208));
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const std::uint8_t low_byte = ql[64 * h + l + 32 * (k & 1)];
        const int low = k < 2 ? low_byte & 0x0F : low_byte >> 4;
        const int high = (qh[32 * h + l] >> (2 * k)) & 3;
        const int e = 128 * h + 32 * k + l;
        out[e] =
            d * static_cast<float>(scales[e / 16]) * static_cast<float>((low | high << 4) - 32);
      }
    }
  }
}

}  // namespace

std::size_t kquant_block_bytes(KQuant type) {
  return type == KQuant::Q4_K ? kQ4KBytes : kQ6KBytes;
}

std::string_view kquant_name(KQuant type) {
  return type == KQuant::Q4_K ? "Q4_K" : "Q6_K";
}

void dequantize_kquant_row(KQuant type, std::span<const std::byte> blocks, std::span<float> out) {
  const auto n = static_cast<std::int64_t>(out.size());
  const std::size_t block_bytes = kquant_block_bytes(type);
  HUDDLE_CHECK(n % kKQuantBlock == 0 &&
                   blocks.size() == static_cast<std::size_t>(n / kKQuantBlock) * block_bytes,
               "{} row of {} elements from {} bytes", kquant_name(type), n, blocks.size());
  const auto* b = reinterpret_cast<const std::uint8_t*>(blocks.data());
  for (std::int64_t i = 0; i < n / kKQuantBlock; ++i) {
    float* y = out.data() + i * kKQuantBlock;
    if (type == KQuant::Q4_K) {
      dequantize_q4_k_block(b + i * block_bytes, y);
    } else {
      dequantize_q6_k_block(b + i * block_bytes, y);
    }
  }
}

}  // namespace huddle
