#include "profile/curve_fit.h"

#include <gtest/gtest.h>

namespace huddle::profile {
namespace {

TEST(CurveFit, RecoversOverheadAndThroughput) {
  const OpCurve truth{50.0, 20e-6};
  std::vector<Sample> samples;
  for (const double flops : {1e5, 1e6, 1e7, 1e8, 1e9})
    samples.push_back({flops, truth.seconds(flops)});
  const OpCurve fit = fit_curve(samples);
  EXPECT_NEAR(fit.gflops, 50.0, 1e-6 * 50);
  EXPECT_NEAR(fit.overhead_s, 20e-6, 1e-12);
  EXPECT_LT(median_relative_error(fit, samples), 1e-9);
}

TEST(CurveFit, NoisySamplesStayClose) {
  const OpCurve truth{30.0, 5e-6};
  std::vector<Sample> samples;
  const double noise[] = {1.03, 0.98, 1.01, 0.97, 1.02, 1.0};
  int i = 0;
  for (const double flops : {2e5, 1e6, 5e6, 2e7, 1e8, 4e8})
    samples.push_back({flops, truth.seconds(flops) * noise[i++]});
  const OpCurve fit = fit_curve(samples);
  EXPECT_NEAR(fit.gflops, 30.0, 3.0);
  EXPECT_LT(median_relative_error(fit, samples), 0.04);
}

TEST(CurveFit, NegativeInterceptFitsThroughTheOrigin) {
  // Time grows faster than linearly at small sizes' expense: the free fit's overhead is < 0.
  const std::vector<Sample> samples = {{1e6, 1e-5}, {1e7, 2e-4}, {1e8, 2.2e-3}};
  const OpCurve fit = fit_curve(samples);
  EXPECT_EQ(fit.overhead_s, 0.0);
  EXPECT_GT(fit.gflops, 0.0);
}

TEST(CurveFit, OneSampleIsThroughTheOrigin) {
  const OpCurve fit = fit_curve({{2e9, 0.1}});
  EXPECT_NEAR(fit.gflops, 20.0, 1e-9);
  EXPECT_EQ(fit.overhead_s, 0.0);
}

}  // namespace
}  // namespace huddle::profile
