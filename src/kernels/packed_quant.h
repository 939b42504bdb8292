// Internal: the per-instruction-set kernels of packed Q4_0, Q5_0, Q8_0 and k-quant weights
// (kernels/packed_weight.h), one group of 16 weight rows against a few activation tokens.
#pragma once

#include "core/dtype.h"
#include "kernels/lowp.h"
#include "kernels/qdot.h"

#include <cstddef>
#include <cstdint>

namespace huddle::kernels::detail {

// The most tokens one call of a PackedFn takes.
inline constexpr int kPackedTokens = 8;

// A group's bytes (kernels/packed_weight.h) come in pairs of blocks: the 16 f16 scales of block b,
// of block b + 1 (64 bytes), then the quants of b, of b + 1 (Q4_0: 4 chunks of 64 nibble bytes,
// Q8_0: 8 chunks of 64 int8, Q5_0: Q4_0's 4 chunks and one of their high bits, where for row j
// byte 4j + e holds at bit c the high bit of element 4c + e and at bit 4 + c that of element
// 16 + 4c + e; Q5_1: Q5_0's, with the 16 f16 offsets m of block b and b + 1 (64 bytes) after the
// scales), every piece on 64 bytes. An odd last block's pair is padded with zeros. One sequential
// stream per group.
constexpr std::int64_t packed_quant_bytes(DType t) {
  return t == DType::Q8_0 ? 512 : t == DType::Q5_0 || t == DType::Q5_1 ? 256 + 64 : 256;
}
constexpr std::int64_t packed_pair_header_bytes(DType t) {
  return t == DType::Q5_1 ? 128 : 64;
}
constexpr std::int64_t packed_pair_bytes(DType t) {
  return packed_pair_header_bytes(t) + 2 * packed_quant_bytes(t);
}
template <DType T, class Byte>  // Byte: std::byte or const std::byte
Byte* packed_scales(Byte* group, std::int64_t b) {
  return group + (b / 2) * packed_pair_bytes(T) + (b % 2) * 32;
}
template <DType T, class Byte>
Byte* packed_mins(Byte* group, std::int64_t b) {  // Q5_1's offsets m
  return group + (b / 2) * packed_pair_bytes(T) + 64 + (b % 2) * 32;
}
template <DType T, class Byte>
Byte* packed_quants(Byte* group, std::int64_t b) {
  return group + (b / 2) * packed_pair_bytes(T) + packed_pair_header_bytes(T) +
         (b % 2) * packed_quant_bytes(T);
}

// Q4_K and Q5_K (core/kquant.h): a group is a run of super-blocks of 256 elements, each
// packed_kq_super_bytes(T) bytes:
//   [0, 32)               the 16 rows' d (f16), [32, 64) their dmin (f16)
//   [64 + 32j, +16)       sub-block j's (< 8) 6-bit scales s_j, one byte per row; [+16, +32) its
//                         6-bit mins m_j
//   [320 + Qj, +Q)        sub-block j's quants, Q = packed_quant_bytes of Q4_0 (Q4_K: 256) or
//                         Q5_0 (Q5_K: 320): Q4_K's as a Q4_0 block's nibbles (q in [0, 15]),
//                         Q5_K's as a Q5_0 block's nibbles and high bits (q in [0, 31])
// 4.625 (Q4_K) and 5.625 (Q5_K) bits a weight: the file's 4.5 and 5.5, and the 16 rows' scales
// unpacked to bytes.
inline constexpr std::int64_t kQ4KSubBlocks = 8;
constexpr std::int64_t packed_kq_sub_bytes(DType t) {
  return t == DType::Q5_K ? 256 + 64 : 256;
}
constexpr std::int64_t packed_kq_super_bytes(DType t) {
  return 64 + 8 * 32 + 8 * packed_kq_sub_bytes(t);
}
template <DType T, class Byte>
Byte* packed_kq_super(Byte* group, std::int64_t s) {
  return group + s * packed_kq_super_bytes(T);
}
template <class Byte>
Byte* packed_kq_scales(Byte* super, std::int64_t j) {  // then the mins at +16
  return super + 64 + 32 * j;
}
template <DType T, class Byte>
Byte* packed_kq_quants(Byte* super, std::int64_t j) {
  return super + 320 + packed_kq_sub_bytes(T) * j;
}

// Q6_K (core/kquant.h): a group is a run of super-blocks of 256 elements, each 3392 bytes:
//   [0, 32)               the 16 rows' d (f16); [32, 64) zeros
//   [64 + 16k, +16)       sub-block k's (< 16, of 16 elements) int8 scales, one byte per row
//   [320 + 384j, +256)    the low 4 bits of block j's (< 8, of 32 elements) values q, laid out
//                         as a Q4_0 block's nibbles (elements 4c .. 4c + 3 low, 16 + 4c .. high)
//   [320 + 384j + 256, +64)  their high 2 bits for elements 4c + e: bits 2c, 2c + 1 of byte
//                         4j' + e of row j' (Q4_0's chunk order: row j' at bytes 4j' .. 4j' + 3)
//   [320 + 384j + 320, +64)  the same for elements 16 + 4c + e
// 6.625 bits a weight (the file's 6.5625 and the rows' d padded to a cache line).
inline constexpr std::int64_t kPackedQ6KSuperBytes = 64 + 16 * 16 + 8 * 384;
template <class Byte>
Byte* packed_q6k_super(Byte* group, std::int64_t s) {
  return group + s * kPackedQ6KSuperBytes;
}
template <class Byte>
Byte* packed_q6k_scales(Byte* super, std::int64_t k) {
  return super + 64 + 16 * k;
}
template <class Byte>
Byte* packed_q6k_quants(Byte* super, std::int64_t j) {  // the high bits at +256 and +320
  return super + 320 + 384 * j;
}

// For one packed group (PackedWeight::group) of `blocks` blocks, and tokens t < `tokens`
// (<= kPackedTokens) whose activation blocks start at x + t · x_row_blocks:
//   y[t · ldy + j] = Σ_b fma(d_w[j][b] · x[t][b].d, Σ_i w_j[i] · x[t][b].q[i], ·)
// for rows j < `rows` (<= 16), the integer sum exact. Q4_0 (w = q - 8) takes
// seeds[t · x_row_blocks + b] = -8 · Σ_i x[t][b].q[i], the offset's part, Q5_0 (w = q - 16)
// -16 · Σ_i x[t][b].q[i]; Q8_0 ignores seeds. Q5_1 (w = d · q + m) takes S = Σ_i x[t][b].q[i] and
// computes acc = fma(d · x.d, I, acc); acc = fma(m · x.d, S, acc), I = Σ_i q_i · x.q[i].
// Q4_K and Q5_K (`blocks` counts sub-blocks of 32, a multiple of 8) take seeds = S = Σ_i
// x[t][b].q[i] and computes, for sub-block b of super-block s with the row's d, dmin, s_b, m_b:
//   acc = fma((d · s_b) · x.d, I, acc);  acc = fma(-((dmin · m_b) · x.d), S, acc)
// where I = Σ_i q_i · x.q[i] (the products d · s_b and dmin · m_b are exact in f32).
// Q6_K (`blocks` counts blocks of 32, a multiple of 8) takes two seeds per activation block,
// seeds[2 · (t · x_row_blocks + b) + h] = -32 · Σ_{i<16} x[t][b].q[16h + i], and computes
//   acc = fma(d · x.d, (float)(sc_2b · (I_0 + seed_0) + sc_2b+1 · (I_1 + seed_1)), acc)
// where I_h = Σ_{i<16} q_{16h+i} · x.q[16h + i]; the integer is exact (|.| < 2^24).
using PackedFn = void (*)(const std::byte* group, std::int64_t blocks, int rows, const BlockQ8A* x,
                          const std::int32_t* seeds, std::int64_t x_row_blocks, int tokens,
                          float* y, std::int64_t ldy);

// The kernel for `dtype` (a block type) on path `isa` (isa_supported(isa)): every path has
// one (AVX-512 without VNNI runs AVX2's), and all give the same bits.
PackedFn packed_fn(DType dtype, Isa isa);

// Per-path kernels (packed_quant_x86.cpp); null off x86-64.
PackedFn avx2_packed(DType dtype);
PackedFn avx512vnni_packed(DType dtype);

}  // namespace huddle::kernels::detail
