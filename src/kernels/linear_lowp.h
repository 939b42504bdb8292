// Internal: linear() for weights in F16, BF16, Q8_0 or Q4_0 (kernels/lowp.h).
#pragma once

#include "core/tensor.h"
#include "kernels/kernels.h"

namespace huddle::kernels::detail {

// Tokens from which a [T, K] x [K, N] product with an OutIn weight goes through sgemm on
// dequantised weight panels instead of one dot product per output element (F16/BF16, and
// Q8_0/Q4_0 on paths without tiles). Widening a panel costs as much as multiplying it by a few
// dozen rows: measured (bench_lowp_gemv --cpu-time, F16, one thread, Zen 4) dots 48-50 GFLOP/s
// against sgemm 21-36 at T = 32-64 with K = 2048, where sgemm overtakes at about T = 96 (at
// K = 8192 about T = 56).
inline constexpr std::int64_t kLowpGemmTokens = 64;
// The threshold in use (kLowpGemmTokens unless a benchmark sets another; process-wide).
std::int64_t lowp_gemm_tokens();
void set_lowp_gemm_tokens(std::int64_t t);

// Whether Q8_0/Q4_0 products use the tile kernels where the active path has them (qtile.h; on
// unless a test or benchmark compares them with the dot products and sgemm; process-wide).
bool qtiles_enabled();
void set_qtiles_enabled(bool enabled);

// Same contract as linear(); shapes already checked, T, N > 0; bias F32 or null.
void linear_lowp(const Tensor& x, const Tensor& w, WeightLayout layout, const float* bias,
                 Tensor& y);

}  // namespace huddle::kernels::detail
