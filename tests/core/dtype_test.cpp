#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace huddle {
namespace {

TEST(DType, ParsesSafetensorsNames) {
  EXPECT_EQ(parse_dtype("F32"), DType::F32);
  EXPECT_EQ(parse_dtype("BF16"), DType::BF16);
  EXPECT_EQ(parse_dtype("F16"), DType::F16);
  EXPECT_FALSE(parse_dtype("F8_E4M3").has_value());
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_name(DType::F16), "F16");
}

TEST(DType, HalfRoundTripsRepresentableValues) {
  for (float v :
       {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, 0.333251953125f}) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v) << v;
  }
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-3.140625f)), -3.140625f);
  // 1 + 2^-8 lies exactly between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_NEAR(bf16_to_f32(f32_to_bf16(0.1f)), 0.1f, 1e-3f);
}

}  // namespace
}  // namespace huddle
