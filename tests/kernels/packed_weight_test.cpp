// linear() on packed Q4_0, Q8_0, Q4_K, F16 and BF16 weights (kernels/packed_weight.h): against
// the reference (the weight's values widened to F32 times the activation, for Q4_0/Q8_0/Q4_K as
// rounded to int8 blocks, double-accumulated), the same bits on every path this CPU supports and
// for every token count, and against the row kernels up to float reassociation (Q4_K: the same
// bits, qdot.h).
#include "kernels/packed_weight.h"
#include "core/error.h"
#include "core/kquant.h"
#include "core/quant.h"
#include "kernels/packed_16bit.h"
#include "kernels/packed_quant.h"
#include "kernels/qdot.h"
#include "kernels/reference.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>
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

// Products of exactly representable values: float32 accumulation error only.
constexpr double kTol = 2e-5;

constexpr DType kQuantised[] = {DType::Q4_0, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                DType::Q4_K, DType::Q5_K, DType::Q6_K};
constexpr DType kPacked[] = {DType::Q4_0, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K,
                             DType::Q5_K, DType::Q6_K, DType::F16,  DType::BF16};

bool is_kquant(DType dtype) {
  return dtype_block_elems(dtype) == kKQuantBlock;
}

bool is_quantised(DType dtype) {
  return dtype_is_quantized(dtype);
}

// The activation a packed product multiplies: int8-block rounded for Q4_0/Q8_0, as is for 16-bit.
Tensor activation_for(DType dtype, const Tensor& x) {
  return is_quantised(dtype) ? rounded_activation(x) : x.clone();
}

Tensor packed_linear(const Tensor& x, const Tensor& w, const Tensor* bias) {
  const auto packed = PackedWeight::pack(w, WeightLayout::OutIn);
  EXPECT_NE(packed, nullptr);
  Tensor y = testing::nan_like(Tensor::empty(DType::F32, {x.dim(0), w.dim(0)}));
  linear(x, w, packed.get(), WeightLayout::OutIn, bias, y);
  return y;
}

TEST(PackedWeight, OnlyLowPrecisionOutInWeightsPack) {
  std::mt19937 rng(1);
  const Tensor f32 = random_tensor(rng, {16, 64});
  EXPECT_EQ(PackedWeight::pack(f32, WeightLayout::OutIn), nullptr);
  for (DType dtype : {DType::F16, DType::BF16}) {
    EXPECT_EQ(PackedWeight::pack(quantize(f32, dtype), WeightLayout::InOut), nullptr);
    const auto p = PackedWeight::pack(quantize(f32, dtype), WeightLayout::OutIn);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->dtype(), dtype);
    EXPECT_EQ(p->groups(), 1);
    EXPECT_EQ(p->group_bytes(), 64 * 32);  // 16 rows of 64 two-byte values
  }
  for (DType dtype : {DType::Q4_0, DType::Q8_0}) {
    EXPECT_EQ(PackedWeight::pack(quantize(f32, dtype), WeightLayout::InOut), nullptr);
    const auto p = PackedWeight::pack(quantize(f32, dtype), WeightLayout::OutIn);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->dtype(), dtype);
    EXPECT_EQ(p->rows(), 16);
    EXPECT_EQ(p->cols(), 64);
    EXPECT_EQ(p->groups(), 1);
    // Two blocks: one pair, the rows' bytes plus 64 bytes of scales per pair.
    EXPECT_EQ(p->group_bytes(), static_cast<std::int64_t>(quantize(f32, dtype).nbytes()));
  }
  const Tensor q4k = random_blocks(rng, DType::Q4_K, 20, 512);
  EXPECT_EQ(PackedWeight::pack(q4k, WeightLayout::InOut), nullptr);
  const auto p = PackedWeight::pack(q4k, WeightLayout::OutIn);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->blocks(), 16);  // sub-blocks of 32
  EXPECT_EQ(p->groups(), 2);
  EXPECT_EQ(p->group_bytes(), 2 * detail::packed_kq_super_bytes(DType::Q4_K));
}

// Rows around the group of 16 (padded last groups), K with odd block counts, T around the
// kernels' token tiles (8 VNNI, 2 AVX2), bias, strided weights and activations.
TEST(PackedWeight, EveryPathMatchesReference) {
  std::uint32_t seed = 10;
  for (DType dtype : kPacked) {
    for (Isa isa : supported_isas()) {
      for (std::int64_t t : {1, 2, 3, 8, 9, 19}) {
        for (std::int64_t k : is_kquant(dtype) ? std::vector<std::int64_t>{256, 768}
                              : is_quantised(dtype)
                                  ? std::vector<std::int64_t>{32, 96, 320}
                                  : std::vector<std::int64_t>{1, 2, 33, 96, 321}) {
          for (std::int64_t n : {1, 15, 16, 17, 50}) {
            std::mt19937 rng(seed++);
            const bool strided = (seed % 2) == 0;
            const Tensor x = testing::random_matrix(rng, t, k, strided);
            const Tensor w = random_weight(rng, dtype, n, k, strided);
            const Tensor b = random_tensor(rng, {n});
            const Tensor* bias = (seed % 3) == 0 ? &b : nullptr;
            Tensor fast;
            {
              ForcedIsa scope(isa);
              fast = packed_linear(x, w, bias);
            }
            Tensor ref = Tensor::empty(DType::F32, {t, n});
            reference::linear(activation_for(dtype, x), w, WeightLayout::OutIn, bias, ref);
            EXPECT_TRUE(close(fast, ref, kTol)) << dtype_name(dtype) << " " << isa_name(isa)
                                                << " T=" << t << " K=" << k << " N=" << n;
          }
        }
      }
    }
  }
}

// The packed kernels state their float operations exactly: every path gives the scalar path's
// bits, and each token of a T-token call the bits it gets alone.
TEST(PackedWeight, EveryPathAndEveryTokenCountGiveTheSameBits) {
  std::mt19937 rng(5);
  const std::int64_t t = 11, n = 37;
  for (DType dtype : kPacked) {
    SCOPED_TRACE(dtype_name(dtype));
    // An odd block count (a padded pair) where blocks go in pairs.
    const std::int64_t k = is_kquant(dtype) ? 2048 + 256 : 2048 + 32;
    const Tensor x = random_tensor(rng, {t, k});
    const Tensor w = random_weight(rng, dtype, n, k, false);
    const Tensor bias = random_tensor(rng, {n});
    Tensor scalar;
    {
      ForcedIsa scope(Isa::Scalar);
      scalar = packed_linear(x, w, &bias);
    }
    for (Isa isa : supported_isas()) {
      ForcedIsa scope(isa);
      EXPECT_TRUE(close(packed_linear(x, w, &bias), scalar, 0.0))
          << dtype_name(dtype) << " " << isa_name(isa);
      for (std::int64_t r0 = 0; r0 < t; r0 += 3) {
        const std::int64_t r1 = std::min(t, r0 + (r0 % 2 == 0 ? 1 : 4));
        EXPECT_TRUE(close(packed_linear(x.rows(r0, r1), w, &bias), scalar.rows(r0, r1), 0.0))
            << dtype_name(dtype) << " " << isa_name(isa) << " rows " << r0 << ".." << r1;
      }
    }
  }
}

// Weights at the ends of their range: Q8_0 quants of ±127 (and -128, which a GGUF may hold) and
// Q4_0 nibbles of 0 and 15, against activations of ±127: the integer sums at their extremes.
TEST(PackedWeight, ExtremeQuantsSumExactly) {
  for (DType dtype : {DType::Q4_0, DType::Q8_0}) {
    const std::int64_t n = 16, k = 64;
    Tensor w = quantize(Tensor::zeros(DType::F32, {n, k}), dtype);
    auto* bytes = static_cast<std::uint8_t*>(w.raw());
    const std::size_t block = dtype_block_bytes(dtype);
    for (std::size_t b = 0; b < w.nbytes() / block; ++b) {
      const std::uint16_t one = 0x3C00;  // f16 1.0
      std::memcpy(bytes + b * block, &one, 2);
      for (std::size_t i = 2; i < block; ++i) {
        bytes[b * block + i] =
            dtype == DType::Q8_0 ? (b % 2 == 0 ? 0x80 : 0x7F) : (b % 2 ? 0xFF : 0x00);
      }
    }
    Tensor x = Tensor::empty(DType::F32, {1, k});
    for (std::int64_t i = 0; i < k; ++i) x.f32()[i] = i % 3 == 0 ? -1.0f : 1.0f;
    Tensor scalar;
    {
      ForcedIsa scope(Isa::Scalar);
      scalar = packed_linear(x, w, nullptr);
    }
    Tensor ref = Tensor::empty(DType::F32, {1, n});
    reference::linear(rounded_activation(x), w, WeightLayout::OutIn, nullptr, ref);
    EXPECT_TRUE(close(scalar, ref, kTol)) << dtype_name(dtype);
    for (Isa isa : supported_isas()) {
      ForcedIsa scope(isa);
      EXPECT_TRUE(close(packed_linear(x, w, nullptr), scalar, 0.0))
          << dtype_name(dtype) << " " << isa_name(isa);
    }
  }
}

// Weights at their extremes against activations of ±1 (±127 once rounded): the scalar path
// within float accumulation of the reference, every other path its bits.
void expect_extremes_exact(const Tensor& w) {
  const std::int64_t k = w.dim(1);
  Tensor x = Tensor::empty(DType::F32, {2, k});
  for (std::int64_t i = 0; i < 2 * k; ++i) x.f32()[i] = i % 3 == 0 ? -1.0f : 1.0f;
  Tensor scalar;
  {
    ForcedIsa scope(Isa::Scalar);
    scalar = packed_linear(x, w, nullptr);
  }
  Tensor ref = Tensor::empty(DType::F32, {2, w.dim(0)});
  reference::linear(rounded_activation(x), w, WeightLayout::OutIn, nullptr, ref);
  EXPECT_TRUE(close(scalar, ref, kTol)) << dtype_name(w.dtype());
  for (Isa isa : supported_isas()) {
    ForcedIsa scope(isa);
    EXPECT_TRUE(close(packed_linear(x, w, nullptr), scalar, 0.0))
        << dtype_name(w.dtype()) << " " << isa_name(isa);
  }
}

// Q4_K at its extremes: every 6-bit scale and min 63, nibbles of 0 and 15, activations of ±127.
TEST(PackedWeight, ExtremeQ4KSumsExactly) {
  const std::int64_t n = 16, k = 512;
  Tensor w = Tensor::empty(DType::Q4_K, {n, k});
  auto* bytes = static_cast<std::uint8_t*>(w.raw());
  const std::size_t block = dtype_block_bytes(DType::Q4_K);
  for (std::size_t b = 0; b < w.nbytes() / block; ++b) {
    const std::uint16_t one = 0x3C00;  // f16 1.0
    std::memcpy(bytes + b * block, &one, 2);
    std::memcpy(bytes + b * block + 2, &one, 2);
    std::memset(bytes + b * block + 4, 0xFF, 12);  // scales and mins of 63
    std::memset(bytes + b * block + 16, b % 2 ? 0xFF : 0x0F, 128);
  }
  expect_extremes_exact(w);
}

// Q5_0 at its extremes: values 0 and 31 (high bits clear and set), activations of ±127.
TEST(PackedWeight, ExtremeQ5_0SumsExactly) {
  const std::int64_t n = 16, k = 96;
  Tensor w = Tensor::empty(DType::Q5_0, {n, k});
  auto* blocks = static_cast<BlockQ5_0*>(w.raw());
  for (std::int64_t b = 0; b < n * k / 32; ++b) {
    blocks[b].d = 0x3C00;  // f16 1.0
    std::memset(blocks[b].qh, b % 2 ? 0xFF : 0x00, sizeof blocks[b].qh);
    std::memset(blocks[b].q, b % 2 ? 0xFF : 0x00, sizeof blocks[b].q);
  }
  expect_extremes_exact(w);
}

// Q6_K at its extremes: scales of 127 and -128, values 0 and 63, activations of ±127.
TEST(PackedWeight, ExtremeQ6KSumsExactly) {
  const std::int64_t n = 16, k = 512;
  Tensor w = Tensor::empty(DType::Q6_K, {n, k});
  auto* blocks = static_cast<BlockQ6_K*>(w.raw());
  for (std::int64_t b = 0; b < n * k / 256; ++b) {
    std::memset(blocks[b].ql, b % 2 ? 0xFF : 0x00, sizeof blocks[b].ql);
    std::memset(blocks[b].qh, b % 2 ? 0xFF : 0x00, sizeof blocks[b].qh);
    for (int s = 0; s < 16; ++s) blocks[b].scales[s] = static_cast<std::int8_t>(s % 2 ? -128 : 127);
    blocks[b].d = 0x3C00;  // f16 1.0
  }
  expect_extremes_exact(w);
}

// Q5_0 and k-quant rows through the row kernels (qdot.h) give the packed kernels' bits: both
// state the same operations.
TEST(PackedWeight, ReadOnlyTypesRowKernelsGiveThePackedBits) {
  std::mt19937 rng(31);
  for (DType dtype : {DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const Tensor x = random_tensor(rng, {3, 1024});
    const Tensor w = random_weight(rng, dtype, 40, 1024, true);
    Tensor rows = Tensor::empty(DType::F32, {3, 40});
    linear(x, w, WeightLayout::OutIn, nullptr, rows);
    for (Isa isa : supported_isas()) {
      ForcedIsa scope(isa);
      EXPECT_TRUE(close(packed_linear(x, w, nullptr), rows, 0.0))
          << dtype_name(dtype) << " " << isa_name(isa);
    }
  }
}

TEST(PackedWeight, AgreesWithRowKernels) {
  std::mt19937 rng(9);
  for (DType dtype : kPacked) {
    for (std::int64_t t : {1, 7}) {
      const Tensor x = random_tensor(rng, {t, 4096});
      const Tensor w = random_weight(rng, dtype, 300, 4096, true);
      Tensor rows = Tensor::empty(DType::F32, {t, 300});
      linear(x, w, WeightLayout::OutIn, nullptr, rows);
      EXPECT_TRUE(close(packed_linear(x, w, nullptr), rows, kTol))
          << dtype_name(dtype) << " T=" << t;
    }
  }
}

// A table held packed gives the embedding the rows it was packed from, bit for bit.
TEST(PackedWeight, UnpackedRowsAreTheRowsValues) {
  std::mt19937 rng(21);
  for (DType dtype : kPacked) {
    const std::int64_t n = 37, k = is_kquant(dtype) ? 512 : is_quantised(dtype) ? 96 : 45;
    const Tensor w = random_weight(rng, dtype, n, k, true);
    const auto packed = PackedWeight::pack(w, WeightLayout::OutIn);
    ASSERT_NE(packed, nullptr);
    const std::vector<std::int32_t> ids = {0, 36, 15, 16, 17, 3, 3};
    Tensor from_rows = Tensor::empty(DType::F32, {7, k});
    Tensor from_packed = testing::nan_like(from_rows);
    embedding(ids, w, from_rows);
    embedding(ids, *packed, from_packed);
    EXPECT_TRUE(close(from_packed, from_rows, 0.0)) << dtype_name(dtype);
    const std::vector<std::int32_t> bad = {37};
    Tensor one = Tensor::empty(DType::F32, {1, k});
    EXPECT_THROW(embedding(bad, *packed, one), InputError) << dtype_name(dtype);
  }
}

TEST(PackedWeight, EveryPathHasAKernel) {
  for (Isa isa : supported_isas()) {
    for (DType dtype : kQuantised)
      EXPECT_NE(detail::packed_fn(dtype, isa), nullptr) << isa_name(isa);
    for (DType dtype : {DType::F16, DType::BF16}) {
      EXPECT_NE(detail::packed16_fn(dtype, isa), nullptr) << isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace huddle::kernels
