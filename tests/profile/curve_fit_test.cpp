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

// Linears at two row counts over several weight shapes: the fit tells the multiply-adds from
// the weights' fetch and recovers both, and the per-call overhead.
TEST(CurveFit, LinearCurvesSeparateMultiplyAddsFromWeights) {
  const OpCurve gemm{200.0, 15e-6}, weights{4.0, 0};
  std::vector<LinearSample> samples;
  for (const double rows : {128.0, 32.0}) {
    for (const double kn : {768.0 * 768, 768.0 * 2304, 768.0 * 3072, 3072.0 * 768}) {
      const double f = 2 * rows * kn, w = 2 * kn;
      samples.push_back({f, w, gemm.seconds(f) + weights.seconds(w)});
    }
  }
  const LinearCurves fit = fit_linear_curves(samples, OpCurve{50.0, 0});
  EXPECT_NEAR(fit.gemm.gflops, 200.0, 1e-6 * 200);
  EXPECT_NEAR(fit.gemm.overhead_s, 15e-6, 1e-12);
  EXPECT_NEAR(fit.weights.gflops, 4.0, 1e-6 * 4);
  EXPECT_EQ(fit.weights.overhead_s, 0.0);
}

// At one row count the weights' share cannot be told from the multiply-adds: the fallback
// (the GEMV curve) is taken as the weights' cost and the GEMM curve fitted to the rest.
TEST(CurveFit, LinearCurvesFallBackWhenRowsDoNotVary) {
  const OpCurve read{10.0, 0};
  std::vector<LinearSample> samples;
  for (const double kn : {768.0 * 768, 768.0 * 2304, 768.0 * 3072, 3072.0 * 768, 512.0 * 512}) {
    const double f = 2 * 64 * kn, w = 2 * kn;
    samples.push_back({f, w, f / 100e9 + read.seconds(w)});
  }
  const LinearCurves fit = fit_linear_curves(samples, read);
  EXPECT_DOUBLE_EQ(fit.weights.gflops, 10.0);
  EXPECT_NEAR(fit.gemm.gflops, 100.0, 1e-6 * 100);
}

}  // namespace
}  // namespace huddle::profile
