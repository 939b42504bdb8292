// RoPE scaling (rope_inv_freq): frequencies against values computed by the independent float64
// implementation in tests/fixtures/make_arch_fixtures.py (inv_freq_for, Hugging Face's
// modeling_rope_utils formulas), and the fast rope() against the reference with each scaling.
#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace huddle::kernels {
namespace {

using testing::close;
using testing::random_matrix;

std::vector<double> inv_freq(const RopeSpec& spec, int head_dim, std::int64_t position) {
  std::vector<double> out(static_cast<std::size_t>(head_dim / 2));
  rope_inv_freq(spec, head_dim, position, out);
  return out;
}

void expect_freqs(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 * want[i]) << "pair " << i;
  }
}

TEST(RopeScaling, UnscaledIsThetaPower) {
  const auto f = inv_freq({.theta = 10000.0f}, 8, 5);
  expect_freqs(f, {1.0, 0.1, 0.01, 0.001});
}

TEST(RopeScaling, LinearDividesEveryFrequency) {
  expect_freqs(inv_freq({.theta = 10000.0f, .scaling = RopeScaling::Linear, .factor = 4.0f}, 8, 0),
               {0.25, 0.025, 0.0025, 0.00025});
}

// The llama3-tiny fixture's parameters: pair 0 is kept (wavelength 6.3 < 64/4), pair 1 blended
// (16 <= 32.4 <= 64), pairs 2-7 divided by the factor (wavelength > 64).
TEST(RopeScaling, Llama3RescalesByWavelength) {
  const RopeSpec spec{.theta = 500000.0f,
                      .scaling = RopeScaling::Llama3,
                      .factor = 8.0f,
                      .low_freq_factor = 1.0f,
                      .high_freq_factor = 4.0f,
                      .original_max_positions = 64};
  expect_freqs(
      inv_freq(spec, 16, 0),
      {1.0, 0.0794030091792082, 0.004700753866357992, 0.0009115830921521388, 0.0001767766952966369,
       3.428102195952591e-05, 6.647869871181236e-06, 1.2891731721515574e-06});
  // The same at every position.
  expect_freqs(inv_freq(spec, 16, 1000), inv_freq(spec, 16, 0));
}

// llama-dynamic-tiny's parameters (theta 10000, factor 2, original context 32): unscaled up to
// position 31, then the NTK base for seq_len = position + 1.
TEST(RopeScaling, DynamicScalesBeyondTheOriginalContextPerPosition) {
  const RopeSpec spec{.theta = 10000.0f,
                      .scaling = RopeScaling::Dynamic,
                      .factor = 2.0f,
                      .original_max_positions = 32};
  expect_freqs(inv_freq(spec, 16, 31), inv_freq({.theta = 10000.0f}, 16, 31));
  expect_freqs(
      inv_freq(spec, 16, 32),
      {1.0, 0.3135008502610082, 0.09828278311437509, 0.030811736072374852, 0.009659505456707292,
       0.003028263173778585, 0.0009493630797936855, 0.0002976261327217298});
  expect_freqs(
      inv_freq(spec, 16, 63),
      {1.0, 0.27029612569240363, 0.07305999556432366, 0.019747833744140873, 0.005337762951858991,
       0.001442776645751933, 0.000389976937586229, 0.000105409255338946});
}

TEST(RopeScaling, FastMatchesReferenceForEachScaling) {
  std::mt19937 rng(21);
  const std::vector<RopeSpec> specs = {
      {.theta = 10000.0f, .scaling = RopeScaling::Linear, .factor = 4.0f},
      {.theta = 10000.0f,
       .scaling = RopeScaling::Dynamic,
       .factor = 2.0f,
       .original_max_positions = 32},
      {.theta = 500000.0f,
       .scaling = RopeScaling::Llama3,
       .factor = 8.0f,
       .low_freq_factor = 1.0f,
       .high_freq_factor = 4.0f,
       .original_max_positions = 64}};
  for (const RopeSpec& spec : specs) {
    for (int head_dim : {8, 64}) {
      for (std::int64_t t : {1, 13, 130}) {
        std::vector<std::int32_t> positions(static_cast<std::size_t>(t));
        for (std::size_t i = 0; i < positions.size(); ++i) {
          positions[i] = static_cast<std::int32_t>(i * 7 % 200);  // both sides of 32 and 64
        }
        Tensor x = random_matrix(rng, t, 3 * head_dim, t % 2 == 1);
        Tensor ref = x.clone();
        reference::rope(ref, positions, 3, head_dim, spec);
        rope(x, positions, 3, head_dim, spec);
        EXPECT_TRUE(close(x, ref))
            << "scaling " << static_cast<int>(spec.scaling) << " D " << head_dim << " T " << t;
      }
    }
  }
}

}  // namespace
}  // namespace huddle::kernels
