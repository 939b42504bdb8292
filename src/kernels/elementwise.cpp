#include "core/quant.h"
#include "kernels/kernels.h"
#include "kernels/rows_parallel.h"
#include "kernels/shapes.h"
#include "kernels/vec_math.h"

#include <cstring>

namespace huddle::kernels {

// y may alias a or b: each element is read before it is written, so no __restrict.
void add(const Tensor& a, const Tensor& b, Tensor& y) {
  detail::check_same_shape(a, b, "add inputs");
  detail::check_same_shape(a, y, "add output");
  detail::for_spans(detail::as_mat(y), detail::as_mat(a), detail::as_mat(b),
                    [](float* out, const float* u, const float* v, std::int64_t n) {
                      for (std::int64_t i = 0; i < n; ++i) out[i] = u[i] + v[i];
                    });
}

void mul(const Tensor& a, const Tensor& b, Tensor& y) {
  detail::check_same_shape(a, b, "mul inputs");
  detail::check_same_shape(a, y, "mul output");
  detail::for_spans(detail::as_mat(y), detail::as_mat(a), detail::as_mat(b),
                    [](float* out, const float* u, const float* v, std::int64_t n) {
                      for (std::int64_t i = 0; i < n; ++i) out[i] = u[i] * v[i];
                    });
}

void softmax_rows(Tensor& x) {
  detail::check_row_op(x, nullptr, nullptr, x);
  const detail::Mat xm = detail::as_mat(x);
  const std::int64_t c = xm.cols;
  if (c == 0) return;
  detail::for_rows(xm.rows, c, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      float* __restrict row = xm.row(r);
      const float mx = detail::max_of(row, c);
      for (std::int64_t i = 0; i < c; ++i) row[i] = detail::exp_approx(row[i] - mx);
      const float inv = 1.0f / detail::sum(row, c);
      for (std::int64_t i = 0; i < c; ++i) row[i] *= inv;
    }
  });
}

void embedding(std::span<const std::int32_t> ids, const Tensor& table, Tensor& y) {
  detail::check_embedding(ids, table, y);
  const detail::Mat ym = detail::as_mat(y);
  const auto* base = static_cast<const std::byte*>(table.raw());
  const std::int64_t cols = table.dim(1);
  for (std::size_t t = 0; t < ids.size(); ++t) {
    // F32 rows are copied; other dtypes widened (same bytes for F32).
    dequantize_row(table.dtype(), base + dtype_bytes(table.dtype(), ids[t] * table.row_stride()),
                   ym.row(static_cast<std::int64_t>(t)), cols);
  }
}

}  // namespace huddle::kernels
