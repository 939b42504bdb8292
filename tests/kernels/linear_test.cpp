// linear(): fast path (sgemm, and the GEMV loops at T = 1) against the reference over a grid of
// shapes, both weight layouts, bias or not, contiguous or strided (column-view) operands.
#include "kernels/blas.h"
#include "kernels/cnn.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>

namespace huddle::kernels {
namespace {

using testing::close;
using testing::random_matrix;
using testing::random_tensor;

struct LinearCase {
  std::int64_t t, k, n;
  WeightLayout layout;
  bool bias, strided_x, strided_w;
};

void check_linear(const LinearCase& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const Tensor x = random_matrix(rng, c.t, c.k, c.strided_x);
  const Tensor w = c.layout == WeightLayout::OutIn ? random_matrix(rng, c.n, c.k, c.strided_w)
                                                   : random_matrix(rng, c.k, c.n, c.strided_w);
  const Tensor b = random_tensor(rng, {c.n});
  const Tensor* bias = c.bias ? &b : nullptr;
  Tensor ref = testing::nan_like(Tensor::empty(DType::F32, {c.t, c.n}));
  reference::linear(x, w, c.layout, bias, ref);
  // One thread and two: on two, F32 GEMMs split their output columns over the pool (oneDNN).
  const int saved = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor fast = testing::nan_like(ref);
    linear(x, w, c.layout, bias, fast);
    EXPECT_TRUE(close(fast, ref)) << "T=" << c.t << " K=" << c.k << " N=" << c.n << " layout="
                                  << (c.layout == WeightLayout::OutIn ? "OutIn" : "InOut")
                                  << " bias=" << c.bias << " strided x/w=" << c.strided_x << "/"
                                  << c.strided_w << " threads=" << threads;
  }
  set_num_threads(saved);
}

TEST(Linear, MatchesReferenceOverShapeGrid) {
  std::uint32_t seed = 1;
  for (std::int64_t t : {1, 3, 13, 127, 130}) {
    for (std::int64_t k : {1, 13, 130}) {
      for (std::int64_t n : {1, 3, 127}) {
        for (WeightLayout layout : {WeightLayout::OutIn, WeightLayout::InOut}) {
          for (bool bias : {false, true}) {
            for (bool strided : {false, true}) {
              check_linear({t, k, n, layout, bias, strided, strided}, seed++);
            }
          }
        }
      }
    }
  }
}

TEST(Linear, MixedStridesAndLargerGemv) {
  std::uint32_t seed = 1000;
  for (WeightLayout layout : {WeightLayout::OutIn, WeightLayout::InOut}) {
    check_linear({5, 64, 48, layout, true, true, false}, seed++);
    check_linear({5, 64, 48, layout, false, false, true}, seed++);
    // Big enough for the GEMV loops to split across threads; K not a multiple of 16 or 4.
    check_linear({1, 1027, 1001, layout, true, false, false}, seed++);
    check_linear({1, 1027, 1001, layout, false, true, true}, seed++);
    check_linear({2, 1027, 301, layout, true, false, true}, seed++);
  }
}

TEST(Linear, WritesIntoStridedOutputViews) {
  // y as columns [2, 2 + N) of a wider matrix (e.g. one block of a packed output); the columns
  // around it must stay untouched.
  std::mt19937 rng(5);
  for (std::int64_t t : {1, 13}) {
    for (WeightLayout layout : {WeightLayout::OutIn, WeightLayout::InOut}) {
      const std::int64_t k = 130, n = 127;
      const Tensor x = random_tensor(rng, {t, k});
      const Tensor w =
          layout == WeightLayout::OutIn ? random_tensor(rng, {n, k}) : random_tensor(rng, {k, n});
      const Tensor b = random_tensor(rng, {n});
      Tensor ref = Tensor::empty(DType::F32, {t, n});
      reference::linear(x, w, layout, &b, ref);
      const int saved = num_threads();
      for (int threads : {1, 2}) {  // one oneDNN call, or columns split over the pool
        set_num_threads(threads);
        Tensor wide = testing::nan_like(Tensor::empty(DType::F32, {t, n + 5}));
        Tensor view = wide.cols(2, 2 + n);
        linear(x, w, layout, &b, view);
        EXPECT_TRUE(close(view, ref)) << "T=" << t << " threads=" << threads;
        for (std::int64_t r = 0; r < t; ++r) {
          for (std::int64_t c : {std::int64_t{0}, std::int64_t{1}, 2 + n, 3 + n, 4 + n}) {
            EXPECT_TRUE(std::isnan(wide.f32()[r * (n + 5) + c])) << r << "," << c;
          }
        }
      }
      set_num_threads(saved);
    }
  }
}

TEST(Linear, ZeroInnerDimensionGivesBias) {
  std::mt19937 rng(7);
  const Tensor x = Tensor::empty(DType::F32, {3, 0});
  const Tensor w = Tensor::empty(DType::F32, {4, 0});
  const Tensor b = random_tensor(rng, {4});
  for (std::int64_t t : {1, 3}) {
    Tensor y = testing::nan_like(Tensor::empty(DType::F32, {t, 4}));
    Tensor ref = testing::nan_like(y);
    linear(x.rows(0, t), w, WeightLayout::OutIn, &b, y);
    reference::linear(x.rows(0, t), w, WeightLayout::OutIn, &b, ref);
    EXPECT_TRUE(close(y, ref));
    EXPECT_EQ(y.f32()[4 * t - 1], b.f32()[3]);
  }
}

// Builds with oneDNN (those that convolve through it) multiply F32 linears through it too: the
// tests above then check its results (OpenBLAS's in builds without it, as under TSan).
TEST(Linear, F32GemmsRunThroughOneDnnWhereItIsBuilt) {
  for (WeightLayout layout : {WeightLayout::OutIn, WeightLayout::InOut}) {
    EXPECT_EQ(linear_uses_onednn(768, 2304, layout), channels_last_convs());
    EXPECT_EQ(linear_uses_onednn(3, 5, layout), channels_last_convs());
  }
}

TEST(Linear, OneAndTwoThreadsAgree) {
  std::mt19937 rng(11);
  const int saved = num_threads();
  for (const auto& [t, k, n] :
       {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 768, 900}, {64, 256, 384}}) {
    for (WeightLayout layout : {WeightLayout::OutIn, WeightLayout::InOut}) {
      const Tensor x = random_tensor(rng, {t, k});
      const Tensor w =
          layout == WeightLayout::OutIn ? random_tensor(rng, {n, k}) : random_tensor(rng, {k, n});
      const Tensor b = random_tensor(rng, {n});
      Tensor one = Tensor::empty(DType::F32, {t, n});
      Tensor two = Tensor::empty(DType::F32, {t, n});
      set_num_threads(1);
      linear(x, w, layout, &b, one);
      set_num_threads(2);
      EXPECT_EQ(num_threads(), 2);
      linear(x, w, layout, &b, two);
      EXPECT_TRUE(close(two, one));
    }
  }
  set_num_threads(saved);
}

TEST(Blas, RawWrappersMatchReferenceForAllTransposes) {
  // C[m,n] = op(A)·op(B) with A, B stored transposed or not, row strides wider than the rows.
  std::mt19937 rng(21);
  const std::int64_t m = 5, n = 7, k = 9, pad = 3;
  for (Trans ta : {Trans::No, Trans::Yes}) {
    for (Trans tb : {Trans::No, Trans::Yes}) {
      const std::int64_t a_rows = ta == Trans::No ? m : k, a_cols = ta == Trans::No ? k : m;
      const std::int64_t b_rows = tb == Trans::No ? k : n, b_cols = tb == Trans::No ? n : k;
      const Tensor a = testing::random_strided(rng, a_rows, a_cols, pad);
      const Tensor b = testing::random_strided(rng, b_rows, b_cols, pad);
      Tensor c = Tensor::zeros(DType::F32, {m, n});
      raw_sgemm(ta, tb, m, n, k, 1.0f, a.f32(), a.row_stride(), b.f32(), b.row_stride(), 0.0f,
                c.f32(), n);
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          double acc = 0.0;
          for (std::int64_t p = 0; p < k; ++p) {
            const float av =
                ta == Trans::No ? a.f32()[i * a.row_stride() + p] : a.f32()[p * a.row_stride() + i];
            const float bv =
                tb == Trans::No ? b.f32()[p * b.row_stride() + j] : b.f32()[j * b.row_stride() + p];
            acc += static_cast<double>(av) * bv;
          }
          EXPECT_NEAR(c.f32()[i * n + j], acc, 1e-5) << i << "," << j;
        }
      }
    }
  }
  // y = 2·A·x + y and y = Aᵀ·x for A [3, 4].
  const Tensor a = testing::random_tensor(rng, {3, 4});
  const std::vector<float> x4{1, -2, 3, 0.5f}, x3{2, 0, -1};
  std::vector<float> y3{1, 1, 1}, y4(4, 0.0f);
  raw_sgemv(Trans::No, 3, 4, 2.0f, a.f32(), 4, x4.data(), 1.0f, y3.data());
  raw_sgemv(Trans::Yes, 3, 4, 1.0f, a.f32(), 4, x3.data(), 0.0f, y4.data());
  for (int i = 0; i < 3; ++i) {
    double acc = 1.0;
    for (int j = 0; j < 4; ++j) acc += 2.0 * a.f32()[i * 4 + j] * x4[j];
    EXPECT_NEAR(y3[i], acc, 1e-5);
  }
  for (int j = 0; j < 4; ++j) {
    double acc = 0.0;
    for (int i = 0; i < 3; ++i) acc += static_cast<double>(a.f32()[i * 4 + j]) * x3[i];
    EXPECT_NEAR(y4[j], acc, 1e-5);
  }
  const std::string description = blas_description();
  EXPECT_NE(description.find("core="), std::string::npos) << description;
}

// Every AVX-512 CPU gets the core of its instruction set (Debian's OpenBLAS takes AMD's for AVX2
// Zen cores and an AVX-512 FP16 Xeon for Prescott); without AVX-512, OpenBLAS chooses.
TEST(Blas, CoreTypeFollowsTheInstructionSet) {
  EXPECT_STREQ(openblas_coretype_for({.avx512f = true, .avx512bf16 = true}), "Cooperlake");
  EXPECT_STREQ(openblas_coretype_for({.avx512f = true, .avx512bf16 = false}), "SkylakeX");
  EXPECT_EQ(openblas_coretype_for({.avx512f = false, .avx512bf16 = false}), nullptr);
}

}  // namespace
}  // namespace huddle::kernels
