#include "core/tensor.h"

#include <gtest/gtest.h>

namespace huddle {
namespace {

TEST(Tensor, RowAndColumnViewsShareStorage) {
  Tensor t = Tensor::from_f32({3, 4}, std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor c = t.cols(1, 3);
  EXPECT_EQ(c.shape(), (Shape{3, 2}));
  EXPECT_EQ(c.row_stride(), 4);
  EXPECT_FALSE(c.contiguous());
  EXPECT_EQ(c.to_vector(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  Tensor r = c.rows(1, 3);
  EXPECT_EQ(r.to_vector(), (std::vector<float>{5, 6, 9, 10}));
  r.f32()[0] = 50;
  EXPECT_EQ(t.f32()[5], 50);
}

TEST(Tensor, CloneIsDeepAndContiguous) {
  Tensor t = Tensor::from_f32({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  Tensor c = t.cols(1, 3).clone();
  EXPECT_TRUE(c.contiguous());
  c.f32()[0] = -1;
  EXPECT_EQ(t.f32()[1], 2);
  EXPECT_EQ(c.to_vector(), (std::vector<float>{-1, 3, 5, 6}));
}

TEST(Tensor, ReshapeKeepsData) {
  Tensor t = Tensor::from_i32({2, 3}, std::vector<std::int32_t>{1, 2, 3, 4, 5, 6});
  Tensor r = t.reshape({3, 2});
  EXPECT_EQ(r.dim(0), 3);
  EXPECT_EQ(r.i32()[5], 6);
  EXPECT_EQ(r.dim(-1), 2);
}

TEST(Tensor, ZerosAreZero) {
  Tensor t = Tensor::zeros(DType::F32, {5, 7});
  for (float v : t.to_vector()) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(t.nbytes(), 5u * 7u * 4u);
}

}  // namespace
}  // namespace huddle
