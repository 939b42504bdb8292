#include "kernels/kernels.h"
#include "kernels/rows_parallel.h"
#include "kernels/shapes.h"

#include <cmath>
#include <vector>

namespace huddle::kernels {

// Angles pos·inv_freq and their cos/sin are computed in double once per row and shared by all
// heads: in float, pos·inv_freq at pos ~ 10^4 would carry an absolute error near 10^-3 rad.
void rope(Tensor& x, std::span<const std::int32_t> positions, int heads, int head_dim,
          float theta) {
  detail::check_rope(x, positions, heads, head_dim);
  const detail::Mat xm = detail::as_mat(x);
  const int half = head_dim / 2;
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) {
    inv_freq[static_cast<std::size_t>(i)] =
        std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
  }
  detail::for_rows(xm.rows, xm.cols, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> cos_sin(static_cast<std::size_t>(head_dim));
    float* __restrict cs = cos_sin.data();
    float* __restrict sn = cos_sin.data() + half;
    for (std::int64_t t = r0; t < r1; ++t) {
      const double pos = positions[static_cast<std::size_t>(t)];
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
