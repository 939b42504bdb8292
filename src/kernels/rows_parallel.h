// Internal: run a per-element or per-row loop body over a tensor's rows, in parallel when the
// work is large enough to pay for waking the pool's threads.
#pragma once

#include "kernels/mat_view.h"
#include "kernels/thread_pool.h"

#include <algorithm>

namespace huddle::kernels::detail {

// Elements per chunk below which a loop stays on the calling thread.
inline constexpr std::int64_t kMinChunkElements = 16384;

// body(r0, r1) over the rows of a [rows, cols] matrix.
template <typename Body>
void for_rows(std::int64_t rows, std::int64_t cols, const Body& body) {
  parallel_for(0, rows, body,
               std::max<std::int64_t>(1, kMinChunkElements / std::max<std::int64_t>(cols, 1)));
}

// body(out, in..., n) over spans of matching elements: one flat span per chunk when every view
// is contiguous, else row by row.
template <typename Body>
void for_spans(const Mat& y, const ConstMat& a, const Body& body) {
  if (y.stride == y.cols && a.stride == a.cols) {
    parallel_for(
        0, y.rows * y.cols,
        [&](std::int64_t b, std::int64_t e) { body(y.data + b, a.data + b, e - b); },
        kMinChunkElements);
    return;
  }
  for_rows(y.rows, y.cols, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) body(y.row(r), a.row(r), y.cols);
  });
}

template <typename Body>
void for_spans(const Mat& y, const ConstMat& a, const ConstMat& b, const Body& body) {
  if (y.stride == y.cols && a.stride == a.cols && b.stride == b.cols) {
    parallel_for(
        0, y.rows * y.cols,
        [&](std::int64_t s, std::int64_t e) { body(y.data + s, a.data + s, b.data + s, e - s); },
        kMinChunkElements);
    return;
  }
  for_rows(y.rows, y.cols, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) body(y.row(r), a.row(r), b.row(r), y.cols);
  });
}

}  // namespace huddle::kernels::detail
