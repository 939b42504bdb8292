// linear() and embedding() with weights in F16, BF16, Q8_0 and Q4_0, on every path this CPU
// supports (kernels/lowp.h), against the reference: the weight's values widened to F32, then the
// double-accumulated product (kernels/reference.h). Q8_0/Q4_0 linears with OutIn weights multiply
// the activation rounded to int8 blocks, so they are compared with the reference run on those
// rounded values (tight) and on the raw activation (the rounding's error, looser).
#include "core/quant.h"
#include "kernels/kernels.h"
#include "kernels/linear_lowp.h"
#include "kernels/lowp.h"
#include "kernels/qdot.h"
#include "kernels/qtile.h"
#include "kernels/reference.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace huddle::kernels {
namespace {

using testing::close;
using testing::ForcedIsa;
using testing::random_tensor;
using testing::random_weight;
using testing::rounded_activation;
using testing::supported_isas;

struct Case {
  DType dtype;
  std::int64_t t, k, n;
  WeightLayout layout;
  bool bias, strided;
};

std::string describe(const Case& c, Isa isa) {
  return std::string(dtype_name(c.dtype)) + " " + std::string(isa_name(isa)) +
         " T=" + std::to_string(c.t) + " K=" + std::to_string(c.k) + " N=" + std::to_string(c.n) +
         (c.layout == WeightLayout::OutIn ? " OutIn" : " InOut") + (c.bias ? " bias" : "") +
         (c.strided ? " strided" : "");
}

// Tolerance (max|fast - ref| <= tol · max|ref|) against the reference on the values multiplied:
// products of exactly representable values, so float32 accumulation error only.
constexpr double kExactTol = 2e-5;

// Against the reference on the raw activation (OutIn Q8_0/Q4_0): rounding moves each element of
// x by at most half a step, max|x over its block| / 254, so output (t, n) is off by at most
// Σ_blocks step/2 · Σ_{k in block} |w[n][k]| (plus float32 error, 1e-5 of the largest output).
::testing::AssertionResult within_rounding_bound(const Tensor& x, const Tensor& w,
                                                 const Tensor& fast, const Tensor& raw) {
  const Tensor wf = dequantize(w);
  const std::int64_t k = x.dim(1);
  double max_ref = 0.0;
  for (float v : raw.to_vector()) max_ref = std::max(max_ref, std::fabs(static_cast<double>(v)));
  for (std::int64_t t = 0; t < x.dim(0); ++t) {
    const float* xr = x.f32() + t * x.row_stride();
    for (std::int64_t n = 0; n < w.dim(0); ++n) {
      double bound = 1e-5 * max_ref;
      for (std::int64_t b = 0; b < k; b += detail::kQBlock) {
        double amax = 0.0, wsum = 0.0;
        for (std::int64_t i = b; i < b + detail::kQBlock; ++i) {
          amax = std::max(amax, std::fabs(static_cast<double>(xr[i])));
          wsum += std::fabs(static_cast<double>(wf.f32()[n * k + i]));
        }
        bound += amax / 254.0 * wsum * 1.001;
      }
      const double diff = std::fabs(static_cast<double>(fast.f32()[t * fast.row_stride() + n]) -
                                    raw.f32()[t * raw.row_stride() + n]);
      if (!(diff <= bound)) {
        return ::testing::AssertionFailure()
               << "output (" << t << ", " << n << ") off by " << diff << " > bound " << bound;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

void check(const Case& c, Isa isa, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const Tensor x = testing::random_matrix(rng, c.t, c.k, c.strided);
  const Tensor w = c.layout == WeightLayout::OutIn
                       ? random_weight(rng, c.dtype, c.n, c.k, c.strided)
                       : random_weight(rng, c.dtype, c.k, c.n, c.strided);
  const Tensor b = random_tensor(rng, {c.n});
  const Tensor* bias = c.bias ? &b : nullptr;
  Tensor fast = testing::nan_like(Tensor::empty(DType::F32, {c.t, c.n}));
  {
    ForcedIsa forced(isa);
    linear(x, w, c.layout, bias, fast);
  }
  Tensor ref = Tensor::empty(DType::F32, {c.t, c.n});
  const bool rounds = c.layout == WeightLayout::OutIn && detail::quantizes_activation(c.dtype);
  reference::linear(rounds ? rounded_activation(x) : x, w, c.layout, bias, ref);
  EXPECT_TRUE(close(fast, ref, kExactTol)) << describe(c, isa);
  if (rounds) {
    Tensor raw = Tensor::empty(DType::F32, {c.t, c.n});
    reference::linear(x, w, c.layout, bias, raw);
    EXPECT_TRUE(within_rounding_bound(x, w, fast, raw)) << describe(c, isa) << " (raw activation)";
  }
}

TEST(LowpLinear, EveryPathMatchesReferenceOverShapeGrid) {
  std::uint32_t seed = 1;
  for (Isa isa : supported_isas()) {
    for (DType dtype : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
      // T below and above kLowpGemmTokens (dot products, then sgemm on widened panels).
      for (std::int64_t t : {std::int64_t{1}, std::int64_t{3}, detail::kLowpGemmTokens + 6}) {
        for (std::int64_t k : {32, 96, 320}) {
          for (std::int64_t n : {1, 13, 127}) {
            for (WeightLayout layout : {WeightLayout::OutIn, WeightLayout::InOut}) {
              // An InOut weight's rows are N long: whole blocks only for N a multiple of 32.
              const bool fits = layout == WeightLayout::OutIn || dtype_fits(dtype, n);
              if (!fits) continue;
              for (bool strided : {false, true}) {
                check({dtype, t, k, n, layout, strided, strided}, isa, seed++);
              }
            }
          }
        }
      }
      // 16-bit weights take any K (tails after the vector loop).
      if (!dtype_is_quantized(dtype)) {
        for (std::int64_t k : {1, 13, 127, 130}) {
          check({dtype, 1, k, 13, WeightLayout::OutIn, true, false}, isa, seed++);
          check({dtype, 9, k, 13, WeightLayout::OutIn, false, true}, isa, seed++);
        }
      }
    }
  }
}

TEST(LowpLinear, InOutQuantisedWeightsOnColumnGrid) {
  std::uint32_t seed = 100;
  for (DType dtype : {DType::Q8_0, DType::Q4_0}) {
    for (std::int64_t t : {1, 13}) {
      for (std::int64_t n : {32, 96, 160})
        check({dtype, t, 64, n, WeightLayout::InOut, true, true}, best_isa(), seed++);
    }
  }
}

// Every path computes each output as the scalar path does, up to float reassociation.
TEST(LowpLinear, VectorPathsAgreeWithScalarPath) {
  std::mt19937 rng(7);
  for (DType dtype : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    for (std::int64_t k : {32, 64, 2048}) {
      const Tensor x = random_tensor(rng, {1, k});
      const Tensor w = random_weight(rng, dtype, 127, k, false);
      Tensor scalar = Tensor::empty(DType::F32, {1, 127});
      {
        ForcedIsa forced(Isa::Scalar);
        linear(x, w, WeightLayout::OutIn, nullptr, scalar);
      }
      for (Isa isa : supported_isas()) {
        Tensor y = testing::nan_like(scalar);
        ForcedIsa forced(isa);
        linear(x, w, WeightLayout::OutIn, nullptr, y);
        EXPECT_TRUE(close(y, scalar, kExactTol))
            << dtype_name(dtype) << " " << isa_name(isa) << " K=" << k;
      }
    }
  }
}

// Prefill (sgemm on widened panels) and decode (dot products) round the same way: each row of a
// T-token product matches that row computed alone.
TEST(LowpLinear, PrefillRowsMatchDecodeOfEachRow) {
  std::mt19937 rng(11);
  const std::int64_t t = detail::kLowpGemmTokens + 5, k = 256, n = 77;
  for (DType dtype : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    const Tensor x = random_tensor(rng, {t, k});
    const Tensor w = random_weight(rng, dtype, n, k, false);
    Tensor all = Tensor::empty(DType::F32, {t, n});
    linear(x, w, WeightLayout::OutIn, nullptr, all);
    for (std::int64_t r = 0; r < t; ++r) {
      Tensor one = Tensor::empty(DType::F32, {1, n});
      linear(x.rows(r, r + 1), w, WeightLayout::OutIn, nullptr, one);
      EXPECT_TRUE(close(all.rows(r, r + 1), one, kExactTol)) << dtype_name(dtype) << " row " << r;
    }
  }
}

// Paths with tile kernels (qtile.h) give every token of a T-token product exactly the bits it
// gets alone, for every tile shape (T and N around the tile's 4 x 4, K with an odd last block),
// and agree with their dot products up to float reassociation.
TEST(LowpLinear, TilesGiveEachTokenItsBitsAloneAndAgreeWithDots) {
  std::mt19937 rng(17);
  int tiled_paths = 0;
  for (Isa isa : supported_isas()) {
    for (DType dtype : {DType::Q8_0, DType::Q4_0}) {
      if (detail::qtile_fn(dtype, isa) == nullptr) continue;
      ++tiled_paths;
      ForcedIsa forced(isa);
      for (std::int64_t k : {32, 96, 2048}) {
        for (std::int64_t n : {1, 3, 13, 130}) {
          const std::int64_t t = 9;
          const Tensor x = random_tensor(rng, {t, k});
          const Tensor w = random_weight(rng, dtype, n, k, n == 13);
          const Tensor bias = random_tensor(rng, {n});
          const std::string what = std::string(dtype_name(dtype)) + " " +
                                   std::string(isa_name(isa)) + " K=" + std::to_string(k) +
                                   " N=" + std::to_string(n);
          Tensor all = Tensor::empty(DType::F32, {t, n});
          linear(x, w, WeightLayout::OutIn, &bias, all);
          for (std::int64_t r0 = 0; r0 < t; ++r0) {
            for (std::int64_t len : {1, 2, 3}) {
              const std::int64_t r1 = std::min(t, r0 + len);
              Tensor part = Tensor::empty(DType::F32, {r1 - r0, n});
              linear(x.rows(r0, r1), w, WeightLayout::OutIn, &bias, part);
              EXPECT_TRUE(close(all.rows(r0, r1), part, 0.0))
                  << what << " rows " << r0 << ".." << r1;
            }
          }
          detail::set_qtiles_enabled(false);
          Tensor dots = testing::nan_like(all);
          linear(x, w, WeightLayout::OutIn, &bias, dots);
          detail::set_qtiles_enabled(true);
          EXPECT_TRUE(close(all, dots, kExactTol)) << what << " (tiles against dot products)";
        }
      }
    }
  }
#if defined(__x86_64__)
  // Every x86-64 CPU with AVX2 has tiles for both dtypes.
  if (isa_supported(Isa::Avx2)) {
    EXPECT_GE(tiled_paths, 2);
  }
#endif
}

// Rows too long for x to stay in L1 go two at a time where a path can (linear_lowp.cpp); each
// output keeps the bits of its one-row dot product. K exercises the 64-, 16- and 1-element tails.
TEST(LowpLinear, LongRowsTwoAtATimeKeepOneRowBits) {
  std::mt19937 rng(23);
  const std::int64_t k = 4096 + 64 + 16 + 3, n = 7;
  for (DType dtype : {DType::F16, DType::BF16}) {
    const Tensor x = random_tensor(rng, {2, k});
    const Tensor w = random_weight(rng, dtype, n, k, false);
    const Tensor bias = random_tensor(rng, {n});
    for (Isa isa : supported_isas()) {
      ForcedIsa forced(isa);
      Tensor y = testing::nan_like(Tensor::empty(DType::F32, {2, n}));
      linear(x, w, WeightLayout::OutIn, &bias, y);
      const detail::DotFn dot = detail::dot_fn(dtype, isa);
      Tensor expected = Tensor::empty(DType::F32, {2, n});
      for (std::int64_t t = 0; t < 2; ++t) {
        for (std::int64_t c = 0; c < n; ++c) {
          const auto* row = static_cast<const std::byte*>(w.raw()) + dtype_bytes(dtype, c * k);
          expected.f32()[t * n + c] = dot(row, x.f32() + t * k, k) + bias.f32()[c];
        }
      }
      EXPECT_TRUE(close(y, expected, 0.0)) << dtype_name(dtype) << " " << isa_name(isa);
    }
  }
}

TEST(LowpEmbedding, MatchesReference) {
  std::mt19937 rng(3);
  const std::vector<std::int32_t> ids = {0, 12, 5, 12, 126};
  for (DType dtype : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    const Tensor table = random_weight(rng, dtype, 127, 64, false);
    Tensor fast = Tensor::empty(DType::F32, {5, 64});
    Tensor ref = Tensor::empty(DType::F32, {5, 64});
    embedding(ids, table, fast);
    reference::embedding(ids, table, ref);
    EXPECT_TRUE(close(fast, ref, 0.0)) << dtype_name(dtype);
  }
}

TEST(LowpIsa, NamesRoundTripAndScalarIsAlwaysThere) {
  for (Isa isa : kAllIsas) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_FALSE(parse_isa("sse9"));
  EXPECT_TRUE(isa_supported(Isa::Scalar));
  EXPECT_TRUE(isa_supported(best_isa()));
  EXPECT_EQ(active_isa(), best_isa());
}

}  // namespace
}  // namespace huddle::kernels
