// linear(): fast path (sgemm, and the GEMV loops at T = 1) against the reference over a grid of
// shapes, both weight layouts, bias or not, contiguous or strided (column-view) operands.
#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <random>
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
  Tensor fast = testing::nan_like(ref);
  reference::linear(x, w, c.layout, bias, ref);
  linear(x, w, c.layout, bias, fast);
  EXPECT_TRUE(close(fast, ref)) << "T=" << c.t << " K=" << c.k << " N=" << c.n << " layout="
                                << (c.layout == WeightLayout::OutIn ? "OutIn" : "InOut")
                                << " bias=" << c.bias << " strided x/w=" << c.strided_x << "/"
                                << c.strided_w;
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

}  // namespace
}  // namespace huddle::kernels
