#include "profile/curve_fit.h"

#include "core/error.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

namespace huddle::profile {

namespace {

// Weighted least squares of t ≈ Σ_j x_j·β_j over the columns `cols` of x (at most 3, each
// scaled to unit size so the normal equations stay well conditioned), by Gaussian elimination;
// nullopt when they are singular. Columns not in `cols` get β = 0.
std::optional<std::array<double, 3>> weighted_least_squares(
    const std::vector<std::array<double, 3>>& x, const std::vector<double>& t,
    const std::vector<double>& w, const std::vector<int>& cols) {
  const std::size_t n = cols.size();
  std::array<double, 3> scale{};
  for (std::size_t j = 0; j < n; ++j) {
    for (const auto& row : x) scale[j] = std::max(scale[j], std::abs(row[cols[j]]));
    if (!(scale[j] > 0)) return std::nullopt;
  }
  // The normal equations A β' = b in the scaled columns, as one augmented 3x4 matrix.
  std::array<std::array<double, 4>, 3> a{};
  for (std::size_t i = 0; i < x.size(); ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const double xj = x[i][cols[j]] / scale[j];
      for (std::size_t k = 0; k < n; ++k) a[j][k] += w[i] * xj * x[i][cols[k]] / scale[k];
      a[j][3] += w[i] * xj * t[i];
    }
  }
  double norm = 0;
  for (std::size_t j = 0; j < n; ++j) norm = std::max(norm, a[j][j]);
  for (std::size_t j = 0; j < n; ++j) {
    std::size_t pivot = j;
    for (std::size_t r = j + 1; r < n; ++r)
      if (std::abs(a[r][j]) > std::abs(a[pivot][j])) pivot = r;
    if (!(std::abs(a[pivot][j]) > 1e-12 * norm)) return std::nullopt;
    std::swap(a[j], a[pivot]);
    for (std::size_t r = 0; r < n; ++r) {
      if (r == j) continue;
      const double f = a[r][j] / a[j][j];
      for (std::size_t k = j; k < 4; ++k) a[r][k] -= f * a[j][k];
    }
  }
  std::array<double, 3> beta{};
  for (std::size_t j = 0; j < n; ++j) beta[cols[j]] = a[j][3] / a[j][j] / scale[j];
  return beta;
}

}  // namespace

OpCurve fit_curve(const std::vector<Sample>& samples) {
  HUDDLE_CHECK(!samples.empty(), "fit_curve needs samples");
  // Columns: 1 (the overhead), flops (1 / throughput); the third is unused.
  std::vector<std::array<double, 3>> x;
  std::vector<double> t, w;
  for (const Sample& s : samples) {
    HUDDLE_CHECK(s.flops > 0 && s.seconds > 0, "samples need positive flops and time");
    x.push_back({1.0, s.flops, 0.0});
    t.push_back(s.seconds);
    w.push_back(1.0 / (s.seconds * s.seconds));
  }
  if (samples.size() > 1) {
    const auto beta = weighted_least_squares(x, t, w, {0, 1});
    if (beta && (*beta)[0] >= 0 && (*beta)[1] > 0)
      return OpCurve{1.0 / ((*beta)[1] * 1e9), (*beta)[0]};
  }
  // Through the origin: never singular, every sample's flops being positive.
  const auto beta = weighted_least_squares(x, t, w, {1});
  return OpCurve{1.0 / ((*beta)[1] * 1e9), 0.0};
}

std::vector<double> relative_errors(const OpCurve& curve, const std::vector<Sample>& samples) {
  std::vector<double> errors;
  for (const Sample& s : samples)
    errors.push_back(std::abs(curve.seconds(s.flops) - s.seconds) / s.seconds);
  return errors;
}

double median_relative_error(const OpCurve& curve, const std::vector<Sample>& samples) {
  std::vector<double> errors = relative_errors(curve, samples);
  if (errors.empty()) return 0;
  std::nth_element(errors.begin(), errors.begin() + static_cast<std::ptrdiff_t>(errors.size() / 2),
                   errors.end());
  return errors[errors.size() / 2];
}

LinearCurves fit_linear_curves(const std::vector<LinearSample>& samples,
                               const OpCurve& fallback_weights) {
  HUDDLE_CHECK(!samples.empty(), "fit_linear_curves needs samples");
  std::vector<std::array<double, 3>> x;  // 1, flops, weight flops
  std::vector<double> t, w;
  for (const LinearSample& s : samples) {
    HUDDLE_CHECK(s.flops > 0 && s.weight_flops > 0 && s.seconds > 0,
                 "linear samples need positive flops, weight flops and time");
    x.push_back({1.0, s.flops, s.weight_flops});
    t.push_back(s.seconds);
    w.push_back(1.0 / (s.seconds * s.seconds));
  }
  for (const std::vector<int>& cols : {std::vector<int>{0, 1, 2}, std::vector<int>{1, 2}}) {
    if (samples.size() < cols.size() + 1) continue;  // no more parameters than samples less one
    const auto beta = weighted_least_squares(x, t, w, cols);
    if (beta && (*beta)[0] >= 0 && (*beta)[1] > 0 && (*beta)[2] > 0) {
      return {OpCurve{1.0 / ((*beta)[1] * 1e9), (*beta)[0]},
              OpCurve{1.0 / ((*beta)[2] * 1e9), 0.0}};
    }
  }
  std::vector<Sample> rest;
  for (const LinearSample& s : samples) {
    const double left = s.seconds - fallback_weights.seconds(s.weight_flops);
    rest.push_back({s.flops, std::max(left, 0.1 * s.seconds)});
  }
  return {fit_curve(rest), fallback_weights};
}

}  // namespace huddle::profile
