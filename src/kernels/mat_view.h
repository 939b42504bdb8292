// Internal: a tensor seen as a matrix of rows, for kernels that work row by row.
//
// Rank 2 keeps the tensor's row stride (column views); rank 1 is one row; higher ranks are
// contiguous, so their rows are the last dimension.
#pragma once

#include "core/tensor.h"

#include <cstdint>

namespace huddle::kernels::detail {

template <typename T>
struct MatView {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t stride = 0;

  T* row(std::int64_t r) const { return data + r * stride; }
};

using ConstMat = MatView<const float>;
using Mat = MatView<float>;

inline ConstMat as_mat(const Tensor& t) {
  ConstMat m{t.f32(), 1, 1, 1};
  if (t.rank() == 2) {
    m = {t.f32(), t.dim(0), t.dim(1), t.row_stride()};
  } else if (t.rank() >= 1) {
    m.cols = t.dim(-1);
    m.rows = m.cols == 0 ? 0 : t.numel() / m.cols;
    m.stride = m.cols;
  }
  return m;
}

inline Mat as_mat(Tensor& t) {
  const ConstMat c = as_mat(static_cast<const Tensor&>(t));
  return {const_cast<float*>(c.data), c.rows, c.cols, c.stride};
}

}  // namespace huddle::kernels::detail
