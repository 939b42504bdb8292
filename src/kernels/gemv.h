// Internal: matrix-vector products for linear() at one token (decode), threaded over outputs.
// Decode is memory-bound: each weight is read once per token, so these loops aim to stream the
// weight matrix at memory bandwidth. bench/kernels/bench_sgemm compares them with cblas_sgemv.
#pragma once

#include "kernels/mat_view.h"

namespace huddle::kernels::detail {

// y[n] = Σ_k x[k]·w[n][k] (+ bias[n]) for w [N, K] (OutIn). bias may be null.
void gemv_out_in(const float* x, ConstMat w, const float* bias, float* y);

// y[n] = Σ_k x[k]·w[k][n] (+ bias[n]) for w [K, N] (InOut). bias may be null.
void gemv_in_out(const float* x, ConstMat w, const float* bias, float* y);

}  // namespace huddle::kernels::detail
