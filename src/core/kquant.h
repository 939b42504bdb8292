// llama.cpp's k-quant blocks, read: GGUF files quantised Q4_K_M / Q4_K_S hold their matrices as
// Q4_K and some (the output head, attention values, part of the MLP's down projections) as Q6_K.
// Both stay as their blocks in memory (DType::Q4_K, DType::Q6_K), multiplied by their own kernels
// (kernels/packed_weight.h; docs/weights.md, "k-quants").
//
// A row of n elements (n a multiple of 256) is n/256 super-blocks, ggml's layouts (ggml-common.h):
//   Q4_K (144 bytes): { f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]; }
//     8 sub-blocks of 32, each with a 6-bit scale s_j and a 6-bit min m_j packed in `scales`
//     (j < 4: s_j = scales[j] & 63, m_j = scales[j+4] & 63; j >= 4: the low 4 bits in
//     scales[j+4] (s_j low nibble, m_j high), the high 2 bits in the top of scales[j-4] (s_j)
//     and scales[j] (m_j)); qs holds 4-bit q: sub-blocks 2i and 2i+1 share bytes 32i..32i+31,
//     low nibble and high nibble. x = d*s_j * q - dmin*m_j.
//   Q6_K (210 bytes): { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d; }
//     16 sub-blocks of 16 with signed 8-bit scales; 6-bit q = 4 low bits from ql, 2 high bits from
//     qh, minus 32: in each half of 128 elements h (ql += 64h, qh += 32h), element 32k + l
//     (k = 0..3, l = 0..31) takes ql[l + 32*(k&1)] (low nibble for k < 2, high for k >= 2) and bits
//     2k..2k+1 of qh[l]. x = d * scales[e/16] * q.
// Every product here is exact in f32 (an f16 scale times 6-bit and 8-bit integers), so the values
// are llama.cpp's bit for bit whatever the order of operations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace huddle {

enum class KQuant { Q4_K, Q5_K, Q6_K };

inline constexpr std::int64_t kKQuantBlock = 256;  // elements per super-block

// ggml's block_q4_K (DType::Q4_K's block) and block_q6_K (DType::Q6_K's).
struct BlockQ4_K {
  std::uint16_t d;     // f16 scale of the sub-block scales
  std::uint16_t dmin;  // f16 scale of the sub-block mins
  std::uint8_t scales[12];
  std::uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);
struct BlockQ5_K {
  std::uint16_t d;
  std::uint16_t dmin;
  std::uint8_t scales[12];  // as Q4_K's
  std::uint8_t qh[32];      // the high bits: element l of sub-block j at bit j of qh[l]
  std::uint8_t qs[128];     // the low 4 bits, as Q4_K's quants
};
static_assert(sizeof(BlockQ5_K) == 176);
struct BlockQ6_K {
  std::uint8_t ql[128];  // the low 4 bits
  std::uint8_t qh[64];   // the high 2 bits
  std::int8_t scales[16];
  std::uint16_t d;  // f16
};
static_assert(sizeof(BlockQ6_K) == 210);

// Sub-block j's (< 8) 6-bit scale s_j and min m_j from Q4_K's or Q5_K's 12 scale bytes: its
// elements are d·s_j · q - dmin·m_j.
void kquant_scale_min(const std::uint8_t scales[12], int j, int& scale, int& min);
inline void q4_k_scale_min(const BlockQ4_K& b, int j, int& scale, int& min) {
  kquant_scale_min(b.scales, j, scale, min);
}
// Sub-block j's 32 quants, in [0, 15], element order.
void q4_k_quants(const BlockQ4_K& b, int j, std::uint8_t out[32]);
// Sub-block j's 32 quants of a Q5_K block, in [0, 31].
void q5_k_quants(const BlockQ5_K& b, int j, std::uint8_t out[32]);

// The 256 values q in [0, 63] of a Q6_K block, element order (an element is d · scales[e/16] ·
// (q - 32)).
void q6_k_quants(const BlockQ6_K& b, std::uint8_t out[256]);

std::size_t kquant_block_bytes(KQuant type);  // 144 (Q4_K), 210 (Q6_K)
std::string_view kquant_name(KQuant type);

// kquant_block_bytes(type) * n/256 bytes -> out[n], n a multiple of 256.
void dequantize_kquant_row(KQuant type, std::span<const std::byte> blocks, std::span<float> out);

}  // namespace huddle
