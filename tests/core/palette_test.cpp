#include "core/palette.h"
#include "core/error.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace huddle {
namespace {

// An image's rows as a model reads them: 8-bit pixels of 3 channels, channels last, each
// normalised with its channel's mean and standard deviation.
std::vector<float> normalised_pixels(std::size_t pixels, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
  std::vector<float> v(pixels * 3);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const float p = static_cast<float>(rng() % 256) / 255.0f;
    v[i] = (p - mean[i % 3]) / sd[i % 3];
  }
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Palette, AnImagesRowsRoundTripExactlyInAboutAQuarterOfTheirBytes) {
  const std::vector<float> v = normalised_pixels(640 * 40, 7);
  std::vector<std::byte> bytes = {std::byte{42}};  // appended after what is there
  ASSERT_TRUE(encode_palette(v, 3, bytes));
  EXPECT_EQ(bytes.front(), std::byte{42});
  EXPECT_LT(bytes.size(), 1 + 12 + v.size() + 3 * (2 + 4 * 256) + 1);
  EXPECT_GT(bytes.size(), v.size());  // one byte per value, then the tables
  std::vector<float> back(v.size());
  decode_palette(std::span(bytes).subspan(1), 3, back);
  EXPECT_TRUE(same_bits(v, back));
}

TEST(Palette, ValuesKeepTheirBits) {
  const float nan1 = std::bit_cast<float>(0x7FC00001u), nan2 = std::bit_cast<float>(0x7FC00002u);
  const std::vector<float> v = {0.0f, -0.0f, nan1, nan2, std::numeric_limits<float>::infinity(),
                                1.0f, -0.0f, 0.0f};
  std::vector<std::byte> bytes;
  ASSERT_TRUE(encode_palette(v, 1, bytes));
  std::vector<float> back(v.size());
  decode_palette(bytes, 1, back);
  EXPECT_TRUE(same_bits(v, back));
}

// 256 distinct values in a channel qualify; 257 do not, whatever the other channels hold.
TEST(Palette, AChannelOfMoreThan256ValuesDoesNotQualify) {
  std::vector<float> v;
  for (int i = 0; i < 256; ++i) {
    v.push_back(static_cast<float>(i));
    v.push_back(1.0f);
  }
  std::vector<std::byte> bytes;
  EXPECT_TRUE(encode_palette(v, 2, bytes));
  v.push_back(256.0f);
  v.push_back(1.0f);
  bytes = {std::byte{7}};
  EXPECT_FALSE(encode_palette(v, 2, bytes));
  EXPECT_EQ(bytes, std::vector<std::byte>{std::byte{7}});  // left as it was
  std::vector<float> activations(4096);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (float& x : activations) x = normal(rng);
  EXPECT_FALSE(encode_palette(activations, 8, bytes));  // 512 values a channel
}

TEST(Palette, BytesThatAreNotAnEncodingAreRefused) {
  const std::vector<float> v = normalised_pixels(100, 1);
  std::vector<std::byte> good;
  ASSERT_TRUE(encode_palette(v, 3, good));
  std::vector<float> out(v.size());
  // Another count or channel count than the receiver expects.
  std::vector<float> longer(v.size() + 3);
  EXPECT_THROW(decode_palette(good, 3, longer), InputError);
  EXPECT_THROW(decode_palette(good, 1, out), InputError);
  // Cut short anywhere.
  for (std::size_t cut : {std::size_t{0}, std::size_t{5}, std::size_t{13}, good.size() - 1}) {
    EXPECT_THROW(decode_palette(std::span(good).first(cut), 3, out), InputError) << cut;
  }
  // An index beyond its channel's table.
  std::vector<std::byte> bad = good;
  bad[12] = std::byte{255};
  EXPECT_THROW(decode_palette(bad, 3, out), InputError);
  // A table longer than 256 (the first table follows the header and the 300 indices).
  bad = good;
  const std::uint16_t n = 300;
  std::memcpy(bad.data() + 12 + v.size(), &n, sizeof n);
  EXPECT_THROW(decode_palette(bad, 3, out), InputError);
  // Bytes left over.
  bad = good;
  bad.push_back(std::byte{0});
  EXPECT_THROW(decode_palette(bad, 3, out), InputError);
  decode_palette(good, 3, out);  // the good bytes still decode
}

}  // namespace
}  // namespace huddle
