// Block quantisation: layouts and rounding against hand-worked blocks, and round-trip error bounds.
#include "core/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace huddle {
namespace {

std::vector<float> ramp(float scale) {
  std::vector<float> x(kQuantBlock);
  for (std::int64_t i = 0; i < kQuantBlock; ++i) x[i] = scale * static_cast<float>(i - 16);
  return x;
}

TEST(Quant, DtypeTableDescribesBlocks) {
  EXPECT_EQ(dtype_block_elems(DType::Q8_0), 32);
  EXPECT_EQ(dtype_block_bytes(DType::Q8_0), 34u);
  EXPECT_EQ(dtype_block_bytes(DType::Q4_0), 18u);
  EXPECT_EQ(dtype_bytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(dtype_bytes(DType::F16, 64), 128u);
  EXPECT_TRUE(dtype_is_quantized(DType::Q8_0));
  EXPECT_FALSE(dtype_is_quantized(DType::BF16));
  EXPECT_FALSE(dtype_fits(DType::Q8_0, 48));
}

TEST(Quant, Q8_0BlockByHand) {
  // Values -16..15 (x 0.5): amax 8, d = 8/127, q[i] = round((i-16)*0.5*127/8).
  const std::vector<float> x = ramp(0.5f);
  BlockQ8_0 b{};
  quantize_row(DType::Q8_0, x.data(), &b, kQuantBlock);
  EXPECT_EQ(b.d, f32_to_f16(8.0f / 127.0f));
  EXPECT_EQ(b.q[0], -127);
  EXPECT_EQ(b.q[16], 0);
  EXPECT_EQ(b.q[17], 8);    // 0.5 * 127/8 = 7.9375 -> 8
  EXPECT_EQ(b.q[19], 24);   // 1.5 * 15.875 = 23.8125 -> 24
  EXPECT_EQ(b.q[31], 119);  // 7.5 * 15.875 = 119.06 -> 119
}

TEST(Quant, Q4_0BlockByHand) {
  // Largest magnitude is x[0] = -16 (signed), so d = -16/-8 = 2 and x[0] maps to 0 (= -8 + 8).
  const std::vector<float> x = ramp(1.0f);
  BlockQ4_0 b{};
  quantize_row(DType::Q4_0, x.data(), &b, kQuantBlock);
  EXPECT_EQ(b.d, f32_to_f16(2.0f));
  // Element i (low nibble) = trunc((i-16)/2 + 8.5); element i+16 (high) = min(15, trunc(i/2+8.5)).
  for (int i = 0; i < 16; ++i) {
    const int lo = static_cast<int>(static_cast<float>(i - 16) / 2.0f + 8.5f);
    const int hi = std::min(15, static_cast<int>(static_cast<float>(i) / 2.0f + 8.5f));
    EXPECT_EQ(b.q[i] & 15, lo) << i;
    EXPECT_EQ(b.q[i] >> 4, hi) << i;
  }
  std::vector<float> y(kQuantBlock);
  dequantize_row(DType::Q4_0, &b, y.data(), kQuantBlock);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[31], 14.0f);  // 15 clamps to the top code 15 -> (15-8)*2
}

TEST(Quant, ZeroBlockHasZeroScale) {
  const std::vector<float> x(kQuantBlock, 0.0f);
  BlockQ4_0 b4{};
  quantize_row(DType::Q4_0, x.data(), &b4, kQuantBlock);
  EXPECT_EQ(f16_to_f32(b4.d), 0.0f);  // -0 as in ggml (0 / -8)
  for (std::uint8_t q : b4.q) EXPECT_EQ(q, 0x88);
  BlockQ8_0 b8{};
  quantize_row(DType::Q8_0, x.data(), &b8, kQuantBlock);
  for (std::int8_t q : b8.q) EXPECT_EQ(q, 0);
}

TEST(Quant, RoundTripErrorWithinHalfStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t n = 32 * 13;
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    std::vector<std::byte> packed(dtype_bytes(t, n));
    std::vector<float> y(n);
    quantize_row(t, x.data(), packed.data(), n);
    dequantize_row(t, packed.data(), y.data(), n);
    for (std::int64_t b = 0; b < n / 32; ++b) {
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
      // Half a quantisation step: amax/127 (Q8_0), amax/8 (Q4_0), relative for the float types;
      // a whole Q4_0 step on the side opposite the extreme, where code 15 clamps +8 steps to +7;
      // plus the scale's rounding to f16 (2^-11 relative) times the largest code (127 or 8).
      const float step = t == DType::Q8_0   ? amax / 127.0f
                         : t == DType::Q4_0 ? amax / 8.0f
                         : t == DType::F16  ? amax / 1024.0f
                                            : amax / 128.0f;
      for (int i = 0; i < 32; ++i) {
        const float bound = t == DType::Q8_0   ? step * (0.5f + 127.0f / 2048.0f)
                            : t == DType::Q4_0 ? step * (1.0f + 8.0f / 2048.0f)
                                               : step * 0.501f;
        EXPECT_LE(std::fabs(y[b * 32 + i] - x[b * 32 + i]), bound + 1e-6f)
            << dtype_name(t) << " element " << b * 32 + i;
      }
    }
  }
}

}  // namespace
}  // namespace huddle
