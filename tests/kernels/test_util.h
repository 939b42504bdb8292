// Helpers for the kernel tests: seeded random tensors, strided views, and the closeness check
// max|fast - ref| <= tol · max|ref| used throughout.
#pragma once

#include "core/kquant.h"
#include "core/quant.h"
#include "core/tensor.h"
#include "kernels/lowp.h"
#include "kernels/qdot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace huddle::kernels::testing {

// Relative tolerance for fast-vs-reference comparisons (float32 kernels vs double references).
inline constexpr double kTol = 1e-5;

inline Tensor random_tensor(std::mt19937& rng, Shape shape, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (float& x : v) x = dist(rng);
  return Tensor::from_f32(std::move(shape), v);
}

// Forces an instruction-set path (kernels/lowp.h) for a scope; automatic selection after it.
struct ForcedIsa {
  explicit ForcedIsa(Isa isa) { force_isa(isa); }
  ~ForcedIsa() { force_isa(std::nullopt); }
  ForcedIsa(const ForcedIsa&) = delete;
  ForcedIsa& operator=(const ForcedIsa&) = delete;
};

// Every path this CPU supports, scalar first.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : kAllIsas) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

// A [rows, cols] weight of `dtype` quantised from uniform(-1, 1) values (the types Huddle only
// reads: random blocks, random_blocks);
// strided: a block-aligned column view of a wider tensor (as a tensor-parallel slice is).
inline Tensor random_weight(std::mt19937& rng, DType dtype, std::int64_t rows, std::int64_t cols,
                            bool strided) {
  const std::int64_t block = std::max<std::int64_t>(32, dtype_block_elems(dtype));
  const std::int64_t pad = strided ? 2 * block : 0;
  const Tensor wide = can_quantize(dtype) ? quantize(random_tensor(rng, {rows, cols + pad}), dtype)
                                          : random_blocks(rng, dtype, rows, cols + pad);
  return strided ? wide.cols(block, block + cols) : wide;
}

// x with every row rounded as the Q8_0/Q4_0 paths round activations (kernels/lowp.h).
inline Tensor rounded_activation(const Tensor& x) {
  const std::int64_t k = x.dim(1);
  std::vector<detail::BlockQ8A> blocks(static_cast<std::size_t>(k / detail::kQBlock));
  Tensor out = Tensor::empty(DType::F32, x.shape());
  for (std::int64_t r = 0; r < x.dim(0); ++r) {
    detail::quantize_activation(x.f32() + r * x.row_stride(), blocks.data(), k);
    detail::dequantize_activation(blocks.data(), out.f32() + r * k, k);
  }
  return out;
}

// A [rows, cols] column view into a wider random matrix (row stride cols + pad), as GPT-2's
// packed q/k/v weights are.
inline Tensor random_strided(std::mt19937& rng, std::int64_t rows, std::int64_t cols,
                             std::int64_t pad = 5, float lo = -1.0f, float hi = 1.0f) {
  const std::int64_t offset = 2;
  Tensor wide = random_tensor(rng, {rows, cols + pad + offset}, lo, hi);
  return wide.cols(offset, offset + cols);
}

inline Tensor random_matrix(std::mt19937& rng, std::int64_t rows, std::int64_t cols, bool strided,
                            float lo = -1.0f, float hi = 1.0f) {
  return strided ? random_strided(rng, rows, cols, 5, lo, hi)
                 : random_tensor(rng, {rows, cols}, lo, hi);
}

// An output of the same shape as t, filled with NaN so unwritten elements fail the comparison.
inline Tensor nan_like(const Tensor& t) {
  Tensor y = Tensor::empty(DType::F32, t.shape());
  std::fill(y.f32(), y.f32() + y.numel(), std::nanf(""));
  return y;
}

inline ::testing::AssertionResult close(const Tensor& fast, const Tensor& ref, double tol = kTol) {
  if (fast.shape() != ref.shape()) {
    return ::testing::AssertionFailure()
           << "shapes " << shape_str(fast.shape()) << " vs " << shape_str(ref.shape());
  }
  const std::vector<float> f = fast.to_vector();
  const std::vector<float> r = ref.to_vector();
  double max_ref = 0.0;
  double max_diff = 0.0;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(r[i])));
    const double d = std::fabs(static_cast<double>(f[i]) - r[i]);
    if (!(d <= max_diff)) {  // also catches NaN
      max_diff = std::isnan(d) ? INFINITY : d;
      worst = i;
    }
  }
  const double bound = tol * std::max(max_ref, 1e-30);
  if (max_diff <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max|fast-ref| = " << max_diff << " at element " << worst << " (fast " << f[worst]
         << ", ref " << r[worst] << ") > " << tol << " * max|ref| = " << bound << " for "
         << shape_str(ref.shape());
}

}  // namespace huddle::kernels::testing
