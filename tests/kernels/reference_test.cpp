// Independent checks of the reference kernels on tiny cases computed by hand, so that the
// fast-vs-reference comparisons rest on a reference that is itself right.
#include "kernels/reference.h"
#include "core/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

namespace huddle::kernels {
// Calls are qualified: argument-dependent lookup would also find the fast kernels.
namespace {

Tensor make(Shape shape, std::vector<float> v) {
  return Tensor::from_f32(std::move(shape), v);
}

TEST(Reference, Linear2x2BothLayouts) {
  const Tensor x = make({1, 2}, {1, 2});
  const Tensor w = make({2, 2}, {1, 2, 3, 4});
  const Tensor bias = make({2}, {0.5f, -1});
  Tensor y = Tensor::zeros(DType::F32, {1, 2});
  reference::linear(x, w, WeightLayout::OutIn, nullptr, y);  // [1·1 + 2·2, 1·3 + 2·4]
  EXPECT_EQ(y.to_vector(), (std::vector<float>{5, 11}));
  reference::linear(x, w, WeightLayout::OutIn, &bias, y);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{5.5f, 10}));
  reference::linear(x, w, WeightLayout::InOut, nullptr, y);  // [1·1 + 2·3, 1·2 + 2·4]
  EXPECT_EQ(y.to_vector(), (std::vector<float>{7, 10}));
}

TEST(Reference, LinearReadsStridedViews) {
  // x = [[1, 2], [3, 4]] taken as columns 1..2 of a 2x4 matrix; W = I.
  const Tensor wide = make({2, 4}, {9, 1, 2, 9, 9, 3, 4, 9});
  const Tensor eye = make({2, 2}, {1, 0, 0, 1});
  Tensor y = Tensor::zeros(DType::F32, {2, 2});
  reference::linear(wide.cols(1, 3), eye, WeightLayout::OutIn, nullptr, y);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(Reference, SoftmaxOfZeroAndLn2) {
  Tensor x = make({1, 2}, {0, static_cast<float>(std::numbers::ln2)});
  reference::softmax_rows(x);
  EXPECT_NEAR(x.f32()[0], 1.0 / 3.0, 1e-7);
  EXPECT_NEAR(x.f32()[1], 2.0 / 3.0, 1e-7);
}

TEST(Reference, SoftmaxIsShiftInvariantForLargeValues) {
  Tensor x = make({1, 2}, {1000, 1000 + static_cast<float>(std::numbers::ln2)});
  reference::softmax_rows(x);
  EXPECT_NEAR(x.f32()[0], 1.0 / 3.0, 1e-4);  // ln 2 is rounded at magnitude 1000
  EXPECT_FALSE(std::isnan(x.f32()[1]));
}

TEST(Reference, GeluAndSiluAtKnownPoints) {
  Tensor x = make({3}, {1, 0, static_cast<float>(std::log(3.0))});
  Tensor y = Tensor::zeros(DType::F32, {3});
  reference::gelu_erf(x, y);
  EXPECT_NEAR(y.f32()[0], 0.8413447460685429, 1e-7);  // Φ(1)
  EXPECT_EQ(y.f32()[1], 0.0f);
  reference::silu(x, y);
  EXPECT_NEAR(y.f32()[2], 0.75 * std::log(3.0), 1e-7);  // σ(ln 3) = 3/4
  reference::gelu_tanh(x, y);
  // 0.5·(1 + tanh(√(2/π)·1.044715)), with tanh written out through exp; 0.841192 by hand.
  const double u = std::sqrt(2.0 / std::numbers::pi) * 1.044715;
  EXPECT_NEAR(y.f32()[0], 0.5 * (1.0 + (std::exp(2 * u) - 1) / (std::exp(2 * u) + 1)), 1e-7);
  EXPECT_NEAR(y.f32()[0], 0.841192, 1e-6);
}

TEST(Reference, NormsOfSmallRows) {
  const Tensor x = make({1, 3}, {1, 2, 3});
  const Tensor ones = make({3}, {1, 1, 1});
  const Tensor zeros = make({3}, {0, 0, 0});
  Tensor y = Tensor::zeros(DType::F32, {1, 3});
  reference::layer_norm(x, ones, zeros, 0.0f, y);  // mean 2, variance 2/3
  const double s = std::sqrt(1.5);
  EXPECT_NEAR(y.f32()[0], -s, 1e-6);
  EXPECT_NEAR(y.f32()[1], 0.0, 1e-7);
  EXPECT_NEAR(y.f32()[2], s, 1e-6);

  const Tensor x2 = make({1, 2}, {3, 4});
  const Tensor w2 = make({2}, {1, 2});
  Tensor y2 = Tensor::zeros(DType::F32, {1, 2});
  reference::rms_norm(x2, w2, 0.0f, y2);  // rms = √12.5
  EXPECT_NEAR(y2.f32()[0], 3 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(y2.f32()[1], 8 / std::sqrt(12.5), 1e-6);
}

TEST(Reference, AddMulEmbedding) {
  const Tensor a = make({2}, {1, 2});
  const Tensor b = make({2}, {3, -4});
  Tensor y = Tensor::zeros(DType::F32, {2});
  reference::add(a, b, y);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{4, -2}));
  reference::mul(a, b, y);
  EXPECT_EQ(y.to_vector(), (std::vector<float>{3, -8}));

  const Tensor table = make({3, 2}, {0, 1, 10, 11, 20, 21});
  Tensor e = Tensor::zeros(DType::F32, {2, 2});
  const std::vector<std::int32_t> ids{2, 0};
  reference::embedding(ids, table, e);
  EXPECT_EQ(e.to_vector(), (std::vector<float>{20, 21, 0, 1}));
}

TEST(Reference, EmbeddingRejectsOutOfRangeIds) {
  const Tensor table = make({3, 2}, {0, 1, 10, 11, 20, 21});
  Tensor e = Tensor::zeros(DType::F32, {2, 2});
  for (std::int32_t bad : {3, -1}) {
    const std::vector<std::int32_t> ids{0, bad};
    try {
      reference::embedding(ids, table, e);
      FAIL() << "id " << bad << " accepted";
    } catch (const InputError& err) {
      EXPECT_NE(std::string(err.what()).find(std::to_string(bad)), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find("3)"), std::string::npos) << err.what();
    }
  }
}

TEST(Reference, RopeAtPositionZeroIsIdentityAndRotatesPairs) {
  const std::vector<float> v{1, 2, 3, 4, 5, 6, 7, 8};  // 2 heads of 4
  Tensor x = make({1, 8}, v);
  const std::vector<std::int32_t> zero{0};
  reference::rope(x, zero, 2, 4, {10000.0f});
  EXPECT_EQ(x.to_vector(), v);

  // Head dim 2: one pair (x0, x1) with inv_freq 1, rotated by angle = position.
  Tensor p = make({1, 2}, {1, 0});
  const std::vector<std::int32_t> three{3};
  reference::rope(p, three, 1, 2, {10000.0f});
  EXPECT_NEAR(p.f32()[0], std::cos(3.0), 1e-7);
  EXPECT_NEAR(p.f32()[1], std::sin(3.0), 1e-7);

  // Head dim 4, pair i = 1 (elements 1 and 3) turns at theta^(-1/2) = 0.01 rad per position.
  Tensor q = make({1, 4}, {0, 1, 0, 0});
  const std::vector<std::int32_t> hundred{100};
  reference::rope(q, hundred, 1, 4, {10000.0f});
  EXPECT_NEAR(q.f32()[1], std::cos(1.0), 1e-7);
  EXPECT_NEAR(q.f32()[3], std::sin(1.0), 1e-7);
}

TEST(Reference, AttentionWithOneKeyReturnsItsValue) {
  // H = 2 query heads sharing Hkv = 1, D = 2, one key: softmax weight 1 on it.
  const Tensor q = make({1, 4}, {0.3f, -2, 5, 1});
  const Tensor k = make({1, 2}, {1, 2});
  const Tensor v = make({1, 2}, {7, -3});
  Tensor out = Tensor::zeros(DType::F32, {1, 4});
  reference::attention(q, k, v, 2, 1, 2, 0, true, out);
  EXPECT_EQ(out.to_vector(), (std::vector<float>{7, -3, 7, -3}));
}

TEST(Reference, AttentionAveragesEqualScoresAndMasksTheFuture) {
  // q = 0 gives equal scores: bidirectional output is the mean of v; causal query 0 sees key 0
  // only and query 1 the mean of keys 0 and 1.
  const Tensor q = make({2, 1}, {0, 0});
  const Tensor k = make({3, 1}, {1, 2, 3});
  const Tensor v = make({3, 1}, {3, 6, 12});
  Tensor out = Tensor::zeros(DType::F32, {2, 1});
  reference::attention(q, k, v, 1, 1, 1, 0, false, out);
  EXPECT_NEAR(out.f32()[0], 7.0, 1e-6);
  EXPECT_NEAR(out.f32()[1], 7.0, 1e-6);
  reference::attention(q, k, v, 1, 1, 1, 0, true, out);
  EXPECT_NEAR(out.f32()[0], 3.0, 1e-6);
  EXPECT_NEAR(out.f32()[1], 4.5, 1e-6);
  // Queries at positions 1 and 2 (one cached key before them).
  reference::attention(q, k, v, 1, 1, 1, 1, true, out);
  EXPECT_NEAR(out.f32()[0], 4.5, 1e-6);
  EXPECT_NEAR(out.f32()[1], 7.0, 1e-6);
}

TEST(Reference, AttentionScoresAreScaledByInverseSqrtD) {
  // D = 4: q·k0 = 4a = 2 ln 2, scaled by 1/√4 to ln 2; q·k1 = 0. Weights 2/3 and 1/3.
  const float a = static_cast<float>(std::numbers::ln2) / 2;
  const Tensor q = make({1, 4}, {a, a, a, a});
  const Tensor k = make({2, 4}, {1, 1, 1, 1, 0, 0, 0, 0});
  const Tensor v = make({2, 4}, {3, 0, 0, 0, 0, 3, 0, 0});
  Tensor out = Tensor::zeros(DType::F32, {1, 4});
  reference::attention(q, k, v, 1, 1, 4, 0, false, out);
  EXPECT_NEAR(out.f32()[0], 2.0, 1e-6);
  EXPECT_NEAR(out.f32()[1], 1.0, 1e-6);
}

}  // namespace
}  // namespace huddle::kernels
