// Written from ggml's block layouts (see kquant.h); scalar code, run once per tensor at load.
#include "core/kquant.h"

#include "core/dtype.h"
#include "core/error.h"

#include <cstring>

namespace huddle {
namespace {

constexpr std::size_t kQ4KBytes = 2 + 2 + 12 + 128;
constexpr std::size_t kQ6KBytes = 128 + 64 + 16 + 2;

// A Q4_K or Q5_K block (Block) of values step_j * q - offset_j per sub-block j, its quants from
// `quants` (q4_k_quants, q5_k_quants).
template <class Block>
void dequantize_kq_block(const std::uint8_t* bytes, float* out,
                         void (*quants)(const Block&, int, std::uint8_t*)) {
  Block b;
  std::memcpy(&b, bytes, sizeof b);  // the rows of a mapped file may be unaligned
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  for (int j = 0; j < 8; ++j) {
    int scale = 0, min = 0;
    kquant_scale_min(b.scales, j, scale, min);
    const float step = d * static_cast<float>(scale);
    const float offset = dmin * static_cast<float>(min);
    std::uint8_t q[32];
    quants(b, j, q);
    for (int l = 0; l < 32; ++l) out[32 * j + l] = step * static_cast<float>(q[l]) - offset;
  }
}

void dequantize_q6_k_block(const std::uint8_t* bytes, float* out) {
  BlockQ6_K b;
  std::memcpy(&b, bytes, sizeof b);  // the rows of a mapped file may be unaligned
  const float d = f16_to_f32(b.d);
  std::uint8_t q[256];
  q6_k_quants(b, q);
  for (int e = 0; e < 256; ++e) {
    out[e] = d * static_cast<float>(b.scales[e / 16]) * static_cast<float>(q[e] - 32);
  }
}

}  // namespace

void kquant_scale_min(const std::uint8_t s[12], int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void q4_k_quants(const BlockQ4_K& b, int j, std::uint8_t out[32]) {
  // Sub-blocks 2i and 2i + 1 share bytes 32i .. 32i + 31: low nibbles, then high ones.
  const std::uint8_t* qs = b.qs + 32 * (j / 2);
  for (int l = 0; l < 32; ++l) out[l] = j % 2 == 0 ? qs[l] & 0x0F : qs[l] >> 4;
}

void q5_k_quants(const BlockQ5_K& b, int j, std::uint8_t out[32]) {
  // The low 4 bits as Q4_K's quants; the high bit of element l at bit j of qh[l].
  const std::uint8_t* qs = b.qs + 32 * (j / 2);
  for (int l = 0; l < 32; ++l) {
    const int low = j % 2 == 0 ? qs[l] & 0x0F : qs[l] >> 4;
    out[l] = static_cast<std::uint8_t>(low | ((b.qh[l] >> j) & 1) << 4);
  }
}

void q6_k_quants(const BlockQ6_K& b, std::uint8_t out[256]) {
  // Each half of 128 elements h (ql + 64h, qh + 32h): element 32k + l (k < 4, l < 32) takes
  // ql[l + 32(k & 1)] (low nibble for k < 2, high for k >= 2) and bits 2k, 2k + 1 of qh[l].
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const std::uint8_t low_byte = b.ql[64 * h + l + 32 * (k & 1)];
        const int low = k < 2 ? low_byte & 0x0F : low_byte >> 4;
        const int high = (b.qh[32 * h + l] >> (2 * k)) & 3;
        out[128 * h + 32 * k + l] = static_cast<std::uint8_t>(low | high << 4);
      }
    }
  }
}

std::size_t kquant_block_bytes(KQuant type) {
  return type == KQuant::Q4_K ? kQ4KBytes : type == KQuant::Q5_K ? sizeof(BlockQ5_K) : kQ6KBytes;
}

std::string_view kquant_name(KQuant type) {
  return type == KQuant::Q4_K ? "Q4_K" : type == KQuant::Q5_K ? "Q5_K" : "Q6_K";
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
      dequantize_kq_block<BlockQ4_K>(b + i * block_bytes, y, &q4_k_quants);
    } else if (type == KQuant::Q5_K) {
      dequantize_kq_block<BlockQ5_K>(b + i * block_bytes, y, &q5_k_quants);
    } else {
      dequantize_q6_k_block(b + i * block_bytes, y);
    }
  }
}

}  // namespace huddle
