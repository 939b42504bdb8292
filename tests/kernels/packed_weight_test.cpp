// linear() on packed Q4_0 weights (kernels/packed_weight.h): against the reference (the weight's
// values widened to F32 times the activation as rounded to int8 blocks, double-accumulated), the
// same bits on every path this CPU supports and for every token count, and against the row
// kernels (the plain Q4_0 path) up to float reassociation.
#include "kernels/packed_weight.h"
#include "core/quant.h"
#include "kernels/packed_q4.h"
#include "kernels/qdot.h"
#include "kernels/reference.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace huddle::kernels {
namespace {

using testing::close;
using testing::random_tensor;

// Products of exactly representable values: float32 accumulation error only.
constexpr double kTol = 2e-5;

struct IsaScope {
  explicit IsaScope(Isa isa) { force_isa(isa); }
  ~IsaScope() { force_isa(std::nullopt); }
};

std::vector<Isa> isas_here() {
  std::vector<Isa> out;
  for (Isa isa : kAllIsas) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

// A Q4_0 [rows, cols] weight; strided: a block-aligned column view of a wider one.
Tensor q4_weight(std::mt19937& rng, std::int64_t rows, std::int64_t cols, bool strided) {
  const std::int64_t pad = strided ? 96 : 0;
  const Tensor wide = quantize(random_tensor(rng, {rows, cols + pad}), DType::Q4_0);
  return strided ? wide.cols(64, 64 + cols) : wide;
}

// x with each row rounded as the quantised paths round activations (lowp.h).
Tensor rounded(const Tensor& x) {
  const std::int64_t k = x.dim(1);
  std::vector<detail::BlockQ8A> blocks(static_cast<std::size_t>(k / detail::kQBlock));
  Tensor out = Tensor::empty(DType::F32, x.shape());
  for (std::int64_t r = 0; r < x.dim(0); ++r) {
    detail::quantize_activation(x.f32() + r * x.row_stride(), blocks.data(), k);
    detail::dequantize_activation(blocks.data(), out.f32() + r * k, k);
  }
  return out;
}

Tensor packed_linear(const Tensor& x, const Tensor& w, const Tensor* bias) {
  const auto packed = PackedWeight::pack(w, WeightLayout::OutIn);
  EXPECT_NE(packed, nullptr);
  Tensor y = testing::nan_like(Tensor::empty(DType::F32, {x.dim(0), w.dim(0)}));
  linear(x, w, packed.get(), WeightLayout::OutIn, bias, y);
  return y;
}

TEST(PackedWeight, OnlyQ4_0OutInWeightsPack) {
  std::mt19937 rng(1);
  const Tensor f32 = random_tensor(rng, {16, 64});
  EXPECT_EQ(PackedWeight::pack(f32, WeightLayout::OutIn), nullptr);
  EXPECT_EQ(PackedWeight::pack(quantize(f32, DType::Q8_0), WeightLayout::OutIn), nullptr);
  EXPECT_EQ(PackedWeight::pack(quantize(f32, DType::Q4_0), WeightLayout::InOut), nullptr);
  const auto p = PackedWeight::pack(quantize(f32, DType::Q4_0), WeightLayout::OutIn);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->rows(), 16);
  EXPECT_EQ(p->cols(), 64);
  EXPECT_EQ(p->groups(), 1);
  EXPECT_EQ(p->group_bytes() % 64, 0);
}

// Rows around the group of 16 (padded last groups), K with odd block counts, T around the
// kernels' token tiles (8 VNNI, 2 AVX2), bias, strided weights and activations.
TEST(PackedWeight, EveryPathMatchesReference) {
  std::uint32_t seed = 10;
  for (Isa isa : isas_here()) {
    for (std::int64_t t : {1, 2, 3, 8, 9, 19}) {
      for (std::int64_t k : {32, 96, 320}) {
        for (std::int64_t n : {1, 15, 16, 17, 50}) {
          std::mt19937 rng(seed++);
          const bool strided = (seed % 2) == 0;
          const Tensor x = testing::random_matrix(rng, t, k, strided);
          const Tensor w = q4_weight(rng, n, k, strided);
          const Tensor b = random_tensor(rng, {n});
          const Tensor* bias = (seed % 3) == 0 ? &b : nullptr;
          Tensor fast;
          {
            IsaScope scope(isa);
            fast = packed_linear(x, w, bias);
          }
          Tensor ref = Tensor::empty(DType::F32, {t, n});
          reference::linear(rounded(x), w, WeightLayout::OutIn, bias, ref);
          EXPECT_TRUE(close(fast, ref, kTol))
              << isa_name(isa) << " T=" << t << " K=" << k << " N=" << n;
        }
      }
    }
  }
}

// The packed kernels state their float operations exactly: every path gives the scalar path's
// bits, and each token of a T-token call the bits it gets alone.
TEST(PackedWeight, EveryPathAndEveryTokenCountGiveTheSameBits) {
  std::mt19937 rng(5);
  const std::int64_t t = 11, k = 2048, n = 37;
  const Tensor x = random_tensor(rng, {t, k});
  const Tensor w = q4_weight(rng, n, k, false);
  const Tensor bias = random_tensor(rng, {n});
  Tensor scalar;
  {
    IsaScope scope(Isa::Scalar);
    scalar = packed_linear(x, w, &bias);
  }
  for (Isa isa : isas_here()) {
    IsaScope scope(isa);
    EXPECT_TRUE(close(packed_linear(x, w, &bias), scalar, 0.0)) << isa_name(isa);
    for (std::int64_t r0 = 0; r0 < t; r0 += 3) {
      const std::int64_t r1 = std::min(t, r0 + (r0 % 2 == 0 ? 1 : 4));
      EXPECT_TRUE(close(packed_linear(x.rows(r0, r1), w, &bias), scalar.rows(r0, r1), 0.0))
          << isa_name(isa) << " rows " << r0 << ".." << r1;
    }
  }
}

TEST(PackedWeight, AgreesWithRowKernels) {
  std::mt19937 rng(9);
  for (std::int64_t t : {1, 7}) {
    const Tensor x = random_tensor(rng, {t, 4096});
    const Tensor w = q4_weight(rng, 300, 4096, true);
    Tensor rows = Tensor::empty(DType::F32, {t, 300});
    linear(x, w, WeightLayout::OutIn, nullptr, rows);
    EXPECT_TRUE(close(packed_linear(x, w, nullptr), rows, kTol)) << "T=" << t;
  }
}

TEST(PackedWeight, EveryPathHasAKernel) {
  for (Isa isa : isas_here()) EXPECT_NE(detail::packed_q4_fn(isa), nullptr) << isa_name(isa);
}

}  // namespace
}  // namespace huddle::kernels
