#include "profile/curve_fit.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>

namespace huddle::profile {

OpCurve fit_curve(const std::vector<Sample>& samples) {
  HUDDLE_CHECK(!samples.empty(), "fit_curve needs samples");
  // Normal equations of Σ w (a + b f − t)² with w = 1/t².
  double sw = 0, swf = 0, swff = 0, swt = 0, swft = 0;
  for (const Sample& s : samples) {
    HUDDLE_CHECK(s.flops > 0 && s.seconds > 0, "samples need positive flops and time");
    const double w = 1.0 / (s.seconds * s.seconds);
    sw += w;
    swf += w * s.flops;
    swff += w * s.flops * s.flops;
    swt += w * s.seconds;
    swft += w * s.flops * s.seconds;
  }
  const double det = sw * swff - swf * swf;
  double a = 0, b = 0;
  if (samples.size() > 1 && det > 1e-12 * sw * swff) {
    a = (swff * swt - swf * swft) / det;
    b = (sw * swft - swf * swt) / det;
  }
  if (!(a >= 0) || !(b > 0)) {
    a = 0;
    b = swft / swff;  // through the origin
  }
  return OpCurve{1.0 / (b * 1e9), a};
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

}  // namespace huddle::profile
