#include "core/error.h"
#include "kernels/kernels.h"
#include "kernels/rows_parallel.h"
#include "kernels/shapes.h"

#include <cmath>
#include <numbers>
#include <vector>

namespace huddle::kernels {

void rope_inv_freq(const RopeSpec& spec, int head_dim, std::int64_t position,
                   std::span<double> out) {
  HUDDLE_CHECK(head_dim >= 2 && out.size() == static_cast<std::size_t>(head_dim / 2),
               "rope_inv_freq: {} frequencies for head_dim {}", out.size(), head_dim);
  double base = spec.theta;
  const double orig = static_cast<double>(spec.original_max_positions);
  if (spec.scaling == RopeScaling::Dynamic && static_cast<double>(position) + 1 > orig) {
    const double n = static_cast<double>(position) + 1;
    base *= std::pow(spec.factor * n / orig - (spec.factor - 1.0),
                     static_cast<double>(head_dim) / (head_dim - 2));
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double inv = std::pow(base, -2.0 * static_cast<double>(i) / head_dim);
    switch (spec.scaling) {
      case RopeScaling::None:
      case RopeScaling::Dynamic:
        out[i] = inv;
        break;
      case RopeScaling::Linear:
        out[i] = inv / spec.factor;
        break;
      case RopeScaling::Llama3: {
        const double wavelen = 2.0 * std::numbers::pi / inv;
        const double low = spec.low_freq_factor, high = spec.high_freq_factor;
        if (wavelen < orig / high) {
          out[i] = inv;  // high frequency: kept
        } else if (wavelen > orig / low) {
          out[i] = inv / spec.factor;  // low frequency: interpolated
        } else {
          const double smooth = (orig / wavelen - low) / (high - low);
          out[i] = (1.0 - smooth) * inv / spec.factor + smooth * inv;
        }
        break;
      }
    }
  }
}

// Angles pos·inv_freq and their cos/sin are computed in double once per row and shared by all
// heads: in float, pos·inv_freq at pos ~ 10^4 would carry an absolute error near 10^-3 rad.
void rope(Tensor& x, std::span<const std::int32_t> positions, int heads, int head_dim,
          const RopeSpec& spec) {
  detail::check_rope(x, positions, heads, head_dim);
  const detail::Mat xm = detail::as_mat(x);
  const int half = head_dim / 2;
  // Frequencies shared by every position (all but Dynamic beyond the original context).
  std::vector<double> shared(static_cast<std::size_t>(half));
  rope_inv_freq(spec, head_dim, 0, shared);
  const bool per_position = spec.scaling == RopeScaling::Dynamic;
  detail::for_rows(xm.rows, xm.cols, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> cos_sin(static_cast<std::size_t>(head_dim));
    std::vector<double> own(static_cast<std::size_t>(half));
    float* __restrict cs = cos_sin.data();
    float* __restrict sn = cos_sin.data() + half;
    for (std::int64_t t = r0; t < r1; ++t) {
      const std::int32_t p = positions[static_cast<std::size_t>(t)];
      const bool scaled = per_position && p + 1 > spec.original_max_positions;
      if (scaled) rope_inv_freq(spec, head_dim, p, own);
      const std::vector<double>& inv_freq = scaled ? own : shared;
      const double pos = p;
      for (int i = 0; i < half; ++i) {
        const double angle = pos * inv_freq[static_cast<std::size_t>(i)];
        cs[i] = static_cast<float>(std::cos(angle));
        sn[i] = static_cast<float>(std::sin(angle));
      }
      for (int h = 0; h < heads; ++h) {
        float* __restrict lo = xm.row(t) + static_cast<std::int64_t>(h) * head_dim;
        float* __restrict hi = lo + half;
        for (int i = 0; i < half; ++i) {
          const float x1 = lo[i];
          const float x2 = hi[i];
          lo[i] = x1 * cs[i] - x2 * sn[i];
          hi[i] = x2 * cs[i] + x1 * sn[i];
        }
      }
    }
  });
}

}  // namespace huddle::kernels
