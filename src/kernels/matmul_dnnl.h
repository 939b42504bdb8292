// The F32 GEMM of kernels::linear through oneDNN's matmul, the weight read in place
// (matmul_dnnl.cpp says why). Built when oneDNN is (HUDDLE_WITH_DNNL; not in ThreadSanitizer
// builds, whose uninstrumented OpenMP runtime TSan cannot follow).
#pragma once

#include "kernels/kernels.h"
#include "kernels/mat_view.h"

namespace huddle::kernels::detail {

// y[T, N] = x[T, K] · W for W [N, K] (OutIn) or [K, N] (InOut); every operand a row-strided view.
// False when oneDNN does not take the product (the caller computes it, y untouched). With
// threads_here() > 1 the output columns are split over the kernels' pool, one single-threaded
// oneDNN call per part (oneDNN's own OpenMP team, measured beside the pool, ran erratically).
bool matmul_dnnl(ConstMat x, ConstMat w, WeightLayout layout, std::int64_t t, std::int64_t k,
                 std::int64_t n, Mat y);

// Whether matmul_dnnl takes products of this K, N and layout.
bool matmul_dnnl_takes(std::int64_t k, std::int64_t n, WeightLayout layout);

}  // namespace huddle::kernels::detail
