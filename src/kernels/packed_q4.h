// Internal: the per-instruction-set kernels of packed Q4_0 weights (kernels/packed_weight.h),
// one group of 16 weight rows against a few activation tokens.
#pragma once

#include "kernels/lowp.h"
#include "kernels/qdot.h"

#include <cstddef>
#include <cstdint>

namespace huddle::kernels::detail {

// The most tokens one call of a PackedQ4Fn takes.
inline constexpr int kPackedTokens = 8;

// A group's bytes (kernels/packed_weight.h) come in pairs of blocks, 576 bytes each (a multiple of
// 64): the 16 f16 scales of block b, of block b + 1, then the 256 nibble bytes of b, of b + 1. An
// odd last block's pair is padded with zeros. One sequential stream per group.
inline constexpr std::int64_t kPackedPairBytes = 576;
template <class Byte>  // std::byte or const std::byte
Byte* packed_scales(Byte* group, std::int64_t b) {
  return group + (b / 2) * kPackedPairBytes + (b % 2) * 32;
}
template <class Byte>
Byte* packed_nibbles(Byte* group, std::int64_t b) {
  return group + (b / 2) * kPackedPairBytes + 64 + (b % 2) * 256;
}

// For one packed group (PackedWeight::group) of `blocks` blocks, and tokens t < `tokens`
// (<= kPackedTokens) whose activation blocks start at
// x + t · x_row_blocks:
//   y[t · ldy + j] = Σ_b fma(d_w[j][b] · x[t][b].d, seeds[t · x_row_blocks + b] + Σ_i q·x, ·)
// for rows j < `rows` (<= 16), where seeds hold -8 · Σ_i x[t][b].q[i] (the Q4_0 offset).
using PackedQ4Fn = void (*)(const std::byte* group, std::int64_t blocks, int rows,
                            const BlockQ8A* x, const std::int32_t* seeds, std::int64_t x_row_blocks,
                            int tokens, float* y, std::int64_t ldy);

// The kernel on path `isa` (isa_supported(isa)): every path has one (AVX-512 without VNNI runs
// AVX2's), and all give the same bits.
PackedQ4Fn packed_q4_fn(Isa isa);

// Per-path kernels (packed_q4_x86.cpp); null off x86-64.
PackedQ4Fn avx2_packed_q4();
PackedQ4Fn avx512vnni_packed_q4();

}  // namespace huddle::kernels::detail
