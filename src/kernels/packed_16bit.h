// Internal: the per-instruction-set kernels of packed F16 and BF16 weights
// (kernels/packed_weight.h), one group of 16 weight rows against a few F32 activation tokens.
#pragma once

#include "core/dtype.h"
#include "kernels/lowp.h"

#include <cstddef>
#include <cstdint>

namespace huddle::kernels::detail {

// The most tokens one call of a Packed16Fn takes.
inline constexpr int kPacked16Tokens = 8;

// A group's bytes: for every input index i, the 16 rows' 16-bit values of element i (32 bytes),
// so one vector load is element i of all sixteen rows; the group padded to 64 bytes.
constexpr std::int64_t packed16_group_bytes(std::int64_t cols) {
  return (cols * 32 + 63) / 64 * 64;
}

// For one packed group of `cols` inputs, and tokens t < `tokens` (<= kPacked16Tokens) whose
// activations start at x + t · ldx, for rows j < `rows` (<= 16):
//   y[t · ldy + j] = a_0 + a_1,  a_p = fma(w_j[i], x[t][i], a_p) for i ≡ p (mod 2), i ascending,
// from a_p = 0: two chains per output, the operations every path performs in this order, so all
// give the same bits, whatever the number of tokens in the call.
using Packed16Fn = void (*)(const std::byte* group, std::int64_t cols, int rows, const float* x,
                            std::int64_t ldx, int tokens, float* y, std::int64_t ldy);

// The kernel for `dtype` (F16 or BF16) on path `isa` (isa_supported(isa)); every path has one.
Packed16Fn packed16_fn(DType dtype, Isa isa);

// Per-path kernels (packed_16bit_x86.cpp); null off x86-64.
Packed16Fn avx2_packed16(DType dtype);
Packed16Fn avx512_packed16(DType dtype);

}  // namespace huddle::kernels::detail
