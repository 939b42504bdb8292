#include "kernels/kernels.h"
#include "kernels/rows_parallel.h"
#include "kernels/shapes.h"
#include "kernels/vec_math.h"

#include <cmath>

namespace huddle::kernels {

void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, Tensor& y) {
  detail::check_row_op(x, &w, &b, y);
  const detail::ConstMat xm = detail::as_mat(x);
  const detail::Mat ym = detail::as_mat(y);
  const float* __restrict gain = w.f32();
  const float* __restrict shift = b.f32();
  const std::int64_t c = xm.cols;
  if (c == 0) return;
  detail::for_rows(xm.rows, c, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* in = xm.row(r);
      float* out = ym.row(r);  // may alias in
      const float mean = detail::sum(in, c) / static_cast<float>(c);
      const float var = detail::sum_sq_dev(in, mean, c) / static_cast<float>(c);
      const float inv = 1.0f / std::sqrt(var + eps);
      for (std::int64_t i = 0; i < c; ++i) out[i] = (in[i] - mean) * inv * gain[i] + shift[i];
    }
  });
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y) {
  detail::check_row_op(x, &w, nullptr, y);
  const detail::ConstMat xm = detail::as_mat(x);
  const detail::Mat ym = detail::as_mat(y);
  const float* __restrict gain = w.f32();
  const std::int64_t c = xm.cols;
  if (c == 0) return;
  detail::for_rows(xm.rows, c, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* in = xm.row(r);
      float* out = ym.row(r);
      const float ms = detail::dot(in, in, c) / static_cast<float>(c);
      const float inv = 1.0f / std::sqrt(ms + eps);
      for (std::int64_t i = 0; i < c; ++i) out[i] = in[i] * inv * gain[i];
    }
  });
}

}  // namespace huddle::kernels
