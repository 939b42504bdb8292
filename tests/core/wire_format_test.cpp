// The wire formats' codec (core/wire_format.h) against per-element references: f16 and bf16 give
// the bits of the scalar conversions (core/dtype.h), for row lengths that exercise the vector
// body and its tail; int8 stays within half a step of its row's scale.
#include "core/wire_format.h"
#include "core/dtype.h"
#include "core/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace huddle {
namespace {

// rows x cols values of mixed magnitudes and signs, with zeros, f16-subnormal sized values and
// values past f16's range.
std::vector<float> sample(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float scale = std::pow(10.0f, static_cast<float>(static_cast<int>(i % 11)) - 6.0f);
    x[i] = normal(rng) * scale;
    if (i % 17 == 3) x[i] = 0.0f;
    if (i % 29 == 5) x[i] = 70000.0f * (i % 2 == 0 ? 1.0f : -1.0f);
  }
  return x;
}

TEST(WireFormat, NamesParseBackAndUnknownOnesAreRefused) {
  for (WireFormat f : {WireFormat::F32, WireFormat::F16, WireFormat::BF16, WireFormat::Int8})
    EXPECT_EQ(parse_wire_format(wire_format_name(f)), f);
  EXPECT_FALSE(parse_wire_format("fp16").has_value());
  EXPECT_FALSE(parse_wire_format("").has_value());
  EXPECT_FALSE(parse_wire_option("").has_value());  // --wire not given
  EXPECT_EQ(parse_wire_option("bf16"), WireFormat::BF16);
  try {
    parse_wire_option("fp8");
    ADD_FAILURE() << "--wire fp8 was accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--wire fp8: expected one of f32, f16, bf16, int8");
  }
  EXPECT_EQ(wire_row_bytes(WireFormat::F32, 13), 52u);
  EXPECT_EQ(wire_row_bytes(WireFormat::F16, 13), 26u);
  EXPECT_EQ(wire_row_bytes(WireFormat::BF16, 13), 26u);
  EXPECT_EQ(wire_row_bytes(WireFormat::Int8, 13), 17u);
  EXPECT_DOUBLE_EQ(wire_bytes_per_value(WireFormat::Int8, 64), 1.0625);
}

TEST(WireFormat, F32TravelsExactlyThroughAStridedRow) {
  const std::vector<float> x = sample(3, 13, 1);
  std::vector<float> wide(3 * 16, -1.0f);
  for (int i = 0; i < 3; ++i)
    std::memcpy(&wide[static_cast<std::size_t>(i) * 16], &x[static_cast<std::size_t>(i) * 13],
                13 * sizeof(float));
  std::vector<std::byte> wire(3 * wire_row_bytes(WireFormat::F32, 13));
  encode_rows(WireFormat::F32, wide.data(), 16, 3, 13, wire.data());
  std::vector<float> y(3 * 13);
  decode_rows(WireFormat::F32, wire.data(), 3, 13, y.data(), 13);
  EXPECT_EQ(y, x);
}

TEST(WireFormat, HalfFormatsGiveTheScalarConversionsBits) {
  for (const std::int64_t cols : {1, 7, 8, 13, 127}) {
    const std::int64_t rows = 3;
    const std::vector<float> x = sample(rows, cols, static_cast<unsigned>(cols));
    for (WireFormat f : {WireFormat::F16, WireFormat::BF16}) {
      std::vector<std::byte> wire(static_cast<std::size_t>(rows) * wire_row_bytes(f, cols));
      encode_rows(f, x.data(), cols, rows, cols, wire.data());
      std::vector<float> y(x.size(), 0.0f), again(x.size(), 0.0f);
      decode_rows(f, wire.data(), rows, cols, y.data(), cols);
      for (std::size_t i = 0; i < x.size(); ++i) {
        std::uint16_t h = 0;
        std::memcpy(&h, wire.data() + 2 * i, 2);
        const std::uint16_t want = f == WireFormat::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        ASSERT_EQ(h, want) << wire_format_name(f) << " cols " << cols << " element " << i << " ("
                           << x[i] << ")";
        ASSERT_EQ(y[i], f == WireFormat::F16 ? f16_to_f32(h) : bf16_to_f32(h));
        if (std::isfinite(y[i]) && std::fabs(x[i]) > 1e-4f) {
          const float rel = f == WireFormat::F16 ? 0x1p-11f : 0x1p-8f;
          EXPECT_LE(std::fabs(y[i] - x[i]), rel * std::fabs(x[i]));
        }
      }
      // Encoding what was decoded gives the same bytes: forwarding never rounds twice.
      std::vector<std::byte> rewire(wire.size());
      encode_rows(f, y.data(), cols, rows, cols, rewire.data());
      EXPECT_EQ(rewire, wire);
      // y + decoded = 2 y.
      add_decoded_rows(f, wire.data(), rows, cols, y.data(), cols);
      decode_rows(f, wire.data(), rows, cols, again.data(), cols);
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (std::isfinite(again[i])) {
          ASSERT_EQ(y[i], 2.0f * again[i]);
        }
      }
    }
  }
}

TEST(WireFormat, Int8StaysWithinHalfAStepOfItsRowsScale) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (const std::int64_t cols : {1, 13, 64, 127}) {
    const std::int64_t rows = 4;
    std::vector<float> x(static_cast<std::size_t>(rows * cols));
    for (float& v : x) v = u(rng);
    for (std::int64_t j = 0; j < cols; ++j) x[static_cast<std::size_t>(2 * cols + j)] = 0.0f;
    std::vector<std::byte> wire(static_cast<std::size_t>(rows) *
                                wire_row_bytes(WireFormat::Int8, cols));
    encode_rows(WireFormat::Int8, x.data(), cols, rows, cols, wire.data());
    std::vector<float> y(x.size(), 1.0f);
    decode_rows(WireFormat::Int8, wire.data(), rows, cols, y.data(), cols);
    for (std::int64_t i = 0; i < rows; ++i) {
      float max_abs = 0.0f;
      for (std::int64_t j = 0; j < cols; ++j)
        max_abs = std::max(max_abs, std::fabs(x[static_cast<std::size_t>(i * cols + j)]));
      const float step = max_abs / 127.0f;
      for (std::int64_t j = 0; j < cols; ++j) {
        const auto k = static_cast<std::size_t>(i * cols + j);
        ASSERT_LE(std::fabs(y[k] - x[k]), 0.5f * step * 1.0001f) << "row " << i << " col " << j;
      }
    }
    for (std::int64_t j = 0; j < cols; ++j)
      EXPECT_EQ(y[static_cast<std::size_t>(2 * cols + j)], 0.0f);
  }
}

}  // namespace
}  // namespace huddle
