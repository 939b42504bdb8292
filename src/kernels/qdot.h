// Internal: dot products of one weight row in a non-F32 dtype with one F32 activation row, per
// instruction set (kernels/lowp.h). linear_lowp.cpp builds linear() on them.
#pragma once

#include "core/dtype.h"
#include "kernels/lowp.h"

#include <cstdint>

namespace huddle::kernels::detail {

inline constexpr std::int64_t kQBlock = 32;

// An activation block: x[i] ≈ d · q[i], d = max|x| / 127, q[i] = round(x[i] / d) in [-127, 127].
struct BlockQ8A {
  float d;
  std::int8_t q[kQBlock];
};
static_assert(sizeof(BlockQ8A) == 36);

// x[k] -> k / 32 blocks (k a multiple of 32). The same rounding on every path.
void quantize_activation(const float* x, BlockQ8A* out, std::int64_t k);
// The values those blocks hold (d · q), as f32: what the GEMM path multiplies.
void dequantize_activation(const BlockQ8A* in, float* x, std::int64_t k);

// Σ_i w[i] · x[i] over k elements (a multiple of the weight dtype's block). `w` points at the row
// in its stored dtype; `x` is `const float*` for F16 and BF16 weights and `const BlockQ8A*` for
// block-quantised weights (the activation quantised by quantize_activation).
using DotFn = float (*)(const void* w, const void* x, std::int64_t k);

// Two rows w0, w1 against the same x: out[i] = the DotFn's result for row i, bit for bit, with x
// read once for both.
using Dot2Fn = void (*)(const void* w0, const void* w1, const void* x, std::int64_t k, float* out);

// The dot product for weights of `dtype` on path `isa`; dtype is F16, BF16 or a block
// type and isa_supported(isa).
DotFn dot_fn(DType dtype, Isa isa);

// The two-row form where path `isa` has one for `dtype`, else null.
Dot2Fn dot2_fn(DType dtype, Isa isa);

// Whether activations for a `dtype` weight are quantised (every block type) or stay F32
// (F16, BF16).
constexpr bool quantizes_activation(DType dtype) {
  return dtype_is_quantized(dtype);
}

// Per-path tables, defined in qdot_scalar.cpp and qdot_x86.cpp (null where a dtype has no
// special code on that path: the caller falls back to the next lower path).
DotFn scalar_dot(DType dtype);
DotFn avx2_dot(DType dtype);
DotFn avx512_dot(DType dtype);
DotFn avx512vnni_dot(DType dtype);
Dot2Fn avx512_dot2(DType dtype);

}  // namespace huddle::kernels::detail
