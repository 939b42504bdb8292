#include "kernels/blas.h"
#include "kernels/gemv.h"
#include "kernels/kernels.h"
#include "kernels/linear_lowp.h"
#ifdef HUDDLE_WITH_DNNL
#include "kernels/matmul_dnnl.h"
#endif
#include "kernels/shapes.h"
#include "kernels/thread_pool.h"

#include <algorithm>

namespace huddle::kernels {

void linear(const Tensor& x, const Tensor& w, WeightLayout layout, const Tensor* bias, Tensor& y) {
  const auto [t, k, n] = detail::check_linear(x, w, layout, bias, y);
  if (t == 0 || n == 0) return;
  if (w.dtype() != DType::F32) {
    detail::linear_lowp(x, w, layout, bias != nullptr ? bias->f32() : nullptr, y);
    return;
  }
  const detail::ConstMat xm = detail::as_mat(x);
  const detail::ConstMat wm = detail::as_mat(w);
  const detail::Mat ym = detail::as_mat(y);
  const float* b = bias != nullptr ? bias->f32() : nullptr;

  if (t == 1 && k > 0) {
    if (layout == WeightLayout::OutIn) {
      detail::gemv_out_in(xm.data, wm, b, ym.data);
    } else {
      detail::gemv_in_out(xm.data, wm, b, ym.data);
    }
    return;
  }
  if (k == 0) {
    for (std::int64_t r = 0; r < t; ++r) {
      for (std::int64_t c = 0; c < n; ++c) ym.row(r)[c] = b != nullptr ? b[c] : 0.0f;
    }
    return;
  }
#ifdef HUDDLE_WITH_DNNL
  const bool done = detail::matmul_dnnl(xm, wm, layout, t, k, n, ym);  // faster where it runs
#else
  const bool done = false;
#endif
  if (!done) {
    raw_sgemm(Trans::No, layout == WeightLayout::OutIn ? Trans::Yes : Trans::No, t, n, k, 1.0f,
              xm.data, std::max<std::int64_t>(xm.stride, 1), wm.data,
              std::max<std::int64_t>(wm.stride, 1), 0.0f, ym.data,
              std::max<std::int64_t>(ym.stride, 1));
  }
  if (b != nullptr) {
    const std::int64_t cols = n;  // clang 14 cannot capture a structured binding in a lambda
    parallel_for(
        0, t,
        [&](std::int64_t r0, std::int64_t r1) {
          for (std::int64_t r = r0; r < r1; ++r) {
            float* __restrict row = ym.row(r);
            for (std::int64_t c = 0; c < cols; ++c) row[c] += b[c];
          }
        },
        std::max<std::int64_t>(1, 16384 / cols));
  }
}

bool linear_uses_onednn(std::int64_t k, std::int64_t n, WeightLayout layout) {
#ifdef HUDDLE_WITH_DNNL
  return k > 0 && n > 0 && detail::matmul_dnnl_takes(k, n, layout);
#else
  (void)k;
  (void)n;
  (void)layout;
  return false;
#endif
}

}  // namespace huddle::kernels
