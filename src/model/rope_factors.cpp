#include "model/rope_factors.h"

#include "core/error.h"
#include "kernels/kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace huddle {
namespace {

constexpr double kFactorTolerance = 1e-4;

// The factors a llama3 spec gives, as rope_factors.h defines them.
std::vector<double> llama3_factors(const kernels::RopeSpec& spec, int head_dim) {
  const auto half = static_cast<std::size_t>(head_dim / 2);
  kernels::RopeSpec plain = spec;
  plain.scaling = kernels::RopeScaling::None;
  std::vector<double> scaled(half), base(half), out(half);
  kernels::rope_inv_freq(spec, head_dim, 0, scaled);
  kernels::rope_inv_freq(plain, head_dim, 0, base);
  for (std::size_t i = 0; i < half; ++i) out[i] = base[i] / scaled[i];
  return out;
}

bool reproduces(std::span<const float> factors, const std::vector<double>& got) {
  for (std::size_t i = 0; i < factors.size(); ++i) {
    if (std::fabs(got[i] - factors[i]) > kFactorTolerance * factors[i]) return false;
  }
  return true;
}

}  // namespace

nlohmann::json rope_scaling_from_factors(std::span<const float> factors, double theta, int head_dim,
                                         const std::string& origin) {
  const auto refuse = [&](const std::string& why) {
    return LoadError(fmt::format(
        "{}: tensor 'rope_freqs.weight' ({} per-frequency rope factors) {}; Huddle reads the "
        "factors of Llama 3 scaling (or linear), convert from the Hugging Face directory instead",
        origin, factors.size(), why));
  };
  if (head_dim < 2 || factors.size() != static_cast<std::size_t>(head_dim / 2)) {
    throw refuse(fmt::format("does not hold head_dim / 2 = {} factors", head_dim / 2));
  }
  for (float f : factors) {
    if (!(f >= 1.0f) || !std::isfinite(f)) {
      throw refuse(fmt::format("has factor {}, not a finite number >= 1", f));
    }
  }
  const auto [lo, hi] = std::minmax_element(factors.begin(), factors.end());
  if (*hi == 1.0f) return nullptr;
  if (*hi - *lo <= kFactorTolerance * *hi) return {{"rope_type", "linear"}, {"factor", *hi}};

  // s_i = (1/f_i - 1/factor) / (1 - 1/factor) = A/λ_i - B over the pairs strictly in between;
  // least squares in u = 1/λ.
  const double factor = *hi;
  double n = 0, su = 0, ss = 0, suu = 0, sus = 0;
  double last_unscaled = 0, first_scaled = 0;  // 1/λ of the outermost plain and scaled pairs
  for (std::size_t i = 0; i < factors.size(); ++i) {
    const double lambda =
        2.0 * std::numbers::pi * std::pow(theta, 2.0 * static_cast<double>(i) / head_dim);
    const double u = 1.0 / lambda;
    const double f = factors[i];
    if (f <= 1.0 + kFactorTolerance) {
      last_unscaled = u;
    } else if (f >= factor * (1.0 - kFactorTolerance)) {
      if (first_scaled == 0) first_scaled = u;
    } else {
      const double s = (1.0 / f - 1.0 / factor) / (1.0 - 1.0 / factor);
      n += 1;
      su += u;
      ss += s;
      suu += u * u;
      sus += u * s;
    }
  }
  double a = 0, b = 0;
  if (n >= 2 && n * suu - su * su > 0) {
    a = (n * sus - su * ss) / (n * suu - su * su);
    b = (a * su - ss) / n;
  } else if (n == 1 && (last_unscaled > 0 || first_scaled > 0)) {
    // The line through the one pair in between and the band's edge beside it (s = 1 at the
    // outermost plain pair, or s = 0 at the first scaled one).
    const double u_edge = last_unscaled > 0 ? last_unscaled : first_scaled;
    const double s_edge = last_unscaled > 0 ? 1.0 : 0.0;
    a = (s_edge - ss) / (u_edge - su);
    b = a * su - ss;
  } else if (n == 0 && last_unscaled > 0 && first_scaled > 0) {
    // No pair in between: the band's edges at the outermost pairs on either side.
    a = 1.0 / (last_unscaled - first_scaled);
    b = a * first_scaled;
  }
  if (!(a > 0) || !(b > 0) || !std::isfinite(a) || !std::isfinite(b)) {
    throw refuse("does not follow Llama 3's scaling (no band between plain and scaled pairs)");
  }
  kernels::RopeSpec spec;
  spec.theta = static_cast<float>(theta);
  spec.scaling = kernels::RopeScaling::Llama3;
  spec.factor = static_cast<float>(factor);
  // orig the integer nearest A/B (what low = 1 gives), then low and high that keep A and B.
  spec.original_max_positions = std::max<std::int64_t>(1, std::llround(a / b));
  const auto orig = static_cast<double>(spec.original_max_positions);
  spec.low_freq_factor = static_cast<float>(b * orig / a);
  spec.high_freq_factor = static_cast<float>(b * orig / a + orig / a);
  if (!reproduces(factors, llama3_factors(spec, head_dim))) {
    throw refuse("does not follow Llama 3's scaling within 1e-4");
  }
  return {{"rope_type", "llama3"},
          {"factor", spec.factor},
          {"low_freq_factor", spec.low_freq_factor},
          {"high_freq_factor", spec.high_freq_factor},
          {"original_max_position_embeddings", spec.original_max_positions}};
}

}  // namespace huddle
