#include "runtime/sampling.h"
#include "core/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace huddle {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, -1.0f, 0.0f};

TEST(Sampler, GreedyAndDegenerateSettingsPickTheArgmax) {
  EXPECT_EQ(Sampler({}).pick(kLogits, {}), 1);
  EXPECT_EQ(Sampler({.temperature = 1.0f, .top_k = 1}).pick(kLogits, {}), 1);
  EXPECT_EQ(Sampler({.temperature = 1.0f, .top_p = 1e-6f}).pick(kLogits, {}), 1);
}

TEST(Sampler, RepeatPenaltyDemotesSeenTokens) {
  const std::vector<std::int32_t> history = {1, 1, 4};
  // 3.0 / 1.5 = 2.0 < 2.5: token 2 wins once token 1 is penalised.
  EXPECT_EQ(Sampler({.repeat_penalty = 1.5f}).pick(kLogits, history), 2);
  EXPECT_EQ(Sampler({.repeat_penalty = 1.1f}).pick(kLogits, history), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  Sampler a({.temperature = 1.0f, .seed = 42}), b({.temperature = 1.0f, .seed = 42});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.pick(kLogits, {}), b.pick(kLogits, {}));
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  Sampler s({.temperature = 1.0f, .seed = 7});
  std::vector<int> counts(kLogits.size(), 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[static_cast<std::size_t>(s.pick(kLogits, {}))];
  double z = 0;
  for (float l : kLogits) z += std::exp(l);
  for (std::size_t i = 0; i < kLogits.size(); ++i) {
    const double expected = std::exp(kLogits[i]) / z;
    EXPECT_NEAR(counts[i] / static_cast<double>(n), expected, 0.015) << i;
  }
}

TEST(Sampler, TopKAndTopPRestrictTheCandidates) {
  Sampler k({.temperature = 2.0f, .top_k = 2, .seed = 3});
  Sampler p(
      {.temperature = 1.0f, .top_p = 0.5f, .seed = 3});  // token 1 alone holds ~0.5 of the mass
  for (int i = 0; i < 500; ++i) {
    const std::int32_t a = k.pick(kLogits, {});
    EXPECT_TRUE(a == 1 || a == 2) << a;
    const std::int32_t b = p.pick(kLogits, {});
    EXPECT_TRUE(b == 1 || b == 2) << b;
  }
}

TEST(Sampler, RejectsBadOptions) {
  EXPECT_THROW(Sampler({.temperature = -1.0f}), InputError);
  EXPECT_THROW(Sampler({.top_p = 0.0f}), InputError);
  EXPECT_THROW(Sampler({.top_p = 1.5f}), InputError);
  EXPECT_THROW(Sampler({.top_k = -2}), InputError);
  EXPECT_THROW(Sampler({.repeat_penalty = 0.0f}), InputError);
}

}  // namespace
}  // namespace huddle
