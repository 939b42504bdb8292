#include "kernels/kernels.h"
#include "kernels/rows_parallel.h"
#include "kernels/shapes.h"
#include "kernels/vec_math.h"

#include <cmath>
#include <numbers>

namespace huddle::kernels {
namespace {

template <typename F>
void map(const Tensor& x, Tensor& y, F f) {
  detail::check_row_op(x, nullptr, nullptr, y);
  // y may alias x: same element read then written, so no __restrict.
  detail::for_spans(detail::as_mat(y), detail::as_mat(x),
                    [&](float* out, const float* in, std::int64_t n) {
                      for (std::int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
                    });
}

}  // namespace

// 0.5·x·(1 + tanh(u)) = x / (1 + e^(-2u)): one exp, and no cancellation for negative u.
void gelu_tanh(const Tensor& x, Tensor& y) {
  constexpr float kTwoSqrt2OverPi = static_cast<float>(2.0 * 0.7978845608028654);
  map(x, y, [](float v) {
    const float u2 = kTwoSqrt2OverPi * (v + 0.044715f * v * v * v);
    return v / (1.0f + detail::exp_approx(-u2));
  });
}

// erfc(z), z = |x|/√2, by the Chebyshev fit of Numerical Recipes (erfcc, fractional error
// < 1.2e-7); then 0.5·x·(1 + erf(x/√2)) = 0.5·x·erfc(z) for x < 0 and x - 0.5·x·erfc(z) for
// x >= 0, which keeps full relative accuracy in the negative tail.
void gelu_erf(const Tensor& x, Tensor& y) {
  map(x, y, [](float v) {
    const float z = std::fabs(v) * static_cast<float>(1.0 / std::numbers::sqrt2);
    const float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    const float erfc = t * detail::exp_approx(p - z * z);
    const float half_x_erfc = 0.5f * v * erfc;
    return v < 0.0f ? half_x_erfc : v - half_x_erfc;
  });
}

void silu(const Tensor& x, Tensor& y) {
  map(x, y, [](float v) { return v / (1.0f + detail::exp_approx(-v)); });
}

}  // namespace huddle::kernels
